"""Settings helpers: read environment variables and reject bad values with the fix in the message."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: set it to 1/0, true/false, yes/no or on/off.")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number: set it to e.g. {default}.") from None
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is out of range: use a value from {minimum} to {maximum}.")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number: set it to e.g. {default}.") from None
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is out of range: use a value from {minimum} to {maximum}.")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default) or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not supported: choose one of {', '.join(choices)}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [part.strip() for part in raw.split(",") if part.strip()]


def kb_home() -> Path:
    """Where the embedded servers keep their data (``KB_HOME``, default ``./var``)."""
    home = Path(env_str("KB_HOME") or BASE_DIR / "var").expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def parse_database_url(url: str) -> dict[str, object]:
    """Turn ``postgres://user:pass@host:port/name?host=/socket&sslmode=...`` into Django's DATABASES entry."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL must start with postgres:// or postgresql:// (got {parsed.scheme!r}://); "
            "this product needs PostgreSQL with pgvector. Unset DATABASE_URL to use the embedded server."
        )
    name = unquote(parsed.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured("DATABASE_URL has no database name: add it after the host, e.g. postgres://u@h/kb")
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    host = query.pop("host", None) or (unquote(parsed.hostname) if parsed.hostname else "")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(parsed.port or ""),
        "OPTIONS": query,
    }
