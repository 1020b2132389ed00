"""Settings helpers: read environment variables and reject bad values with the fix in the message."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

N = TypeVar("N", int, float)


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
    return _env_number(name, default, int, "a whole number", minimum, maximum)


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum, maximum)


def _env_number(
    name: str, default: N, parse: Callable[[str], N], kind: str, minimum: N | None, maximum: N | None
) -> N:
    """``name`` parsed by ``parse`` (``default`` when unset or blank), within [minimum, maximum]; a value that is
    not ``kind`` or out of range is an ``ImproperlyConfigured`` that says what to set."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = parse(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {kind}: set it to e.g. {default}.") from None
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


def parse_database_url(url: str, *, setting: str = "DATABASE_URL") -> dict[str, object]:
    """Turn ``postgres://user:pass@host:port/name?host=/socket&sslmode=...`` into Django's DATABASES entry.

    ``setting`` names the variable the URL came from, for the error messages."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql", "pgsql"}:
        fix = (
            "Unset DATABASE_URL to use the embedded server."
            if setting == "DATABASE_URL"
            else f"Each entry of {setting} is a URL of its own, separated by commas."
        )
        raise ImproperlyConfigured(
            f"{setting} must start with postgres:// or postgresql:// (got {parsed.scheme!r}://); "
            f"this product needs PostgreSQL with pgvector. {fix}"
        )
    name = unquote(parsed.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured(f"{setting} has no database name: add it after the host, e.g. postgres://u@h/kb")
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


def database_replicas(urls: list[str], primary: dict[str, object]) -> dict[str, dict[str, object]]:
    """``DATABASES`` entries ``replica_1``, ``replica_2``, … for the read replicas at ``urls``
    (``DATABASE_REPLICA_URLS``), connected like ``primary`` (its pool, statement timeout and connection age).

    A replica is never created, migrated or flushed by the test runner: it mirrors ``default`` there
    (``TEST.MIRROR``). Unless the URL says otherwise, a connection attempt gives up after 2 s.
    """
    replicas: dict[str, dict[str, object]] = {}
    seen: set[str] = set()
    for number, url in enumerate(urls, start=1):
        if url in seen:
            raise ImproperlyConfigured(f"DATABASE_REPLICA_URLS lists {url!r} twice: list each replica once.")
        seen.add(url)
        entry = parse_database_url(url, setting="DATABASE_REPLICA_URLS")
        options = dict(entry["OPTIONS"])  # type: ignore[call-overload]
        primary_options = dict(primary.get("OPTIONS") or {})  # type: ignore[call-overload]
        options.setdefault("connect_timeout", "2")
        if "options" in primary_options and "options" not in options:
            options["options"] = primary_options["options"]
        if "pool" in primary_options:
            options["pool"] = dict(primary_options["pool"])
            entry["ENGINE"] = "config.postgres_db"  # fails fast when the server is down (see there)
        entry["OPTIONS"] = options
        entry["CONN_MAX_AGE"] = primary.get("CONN_MAX_AGE", 0)
        entry["CONN_HEALTH_CHECKS"] = True
        entry["TEST"] = {"MIRROR": "default"}
        replicas[f"replica_{number}"] = entry
    return replicas
