"""Production: the base settings with security switched on. Every value comes from the environment.

Required here: ``SECRET_KEY`` (50+ random characters) and ``ALLOWED_HOSTS``. The defaults suit a TLS-terminating
proxy that sets ``X-Forwarded-Proto`` (docs/deploy.md lists every variable).
"""

from django.core.exceptions import ImproperlyConfigured

from config import env
from config.settings.base import *  # noqa: F403
from config.settings.base import SECRET_KEY

DEBUG = env.env_bool("DEBUG", False)
if SECRET_KEY.startswith("dev-insecure") or len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("Set SECRET_KEY to a random string of at least 50 characters for production.")
if not env.env_str("ALLOWED_HOSTS"):
    raise ImproperlyConfigured(
        "Set ALLOWED_HOSTS for production: the host names the site answers to, comma-separated "
        "(e.g. kb.example.com). Load-balancer probes of /healthz and /readyz need no entry."
    )


def _proxy_ssl_header(raw: str) -> tuple[str, str] | None:
    """``X-Forwarded-Proto: https`` as Django's ``("HTTP_X_FORWARDED_PROTO", "https")``; ``off`` for none."""
    if raw.lower() in ("off", "none", "0", "false"):
        return None
    name, sep, value = raw.partition(":")
    if not sep or not name.strip() or not value.strip():
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER={raw!r} is not 'Header-Name: value': e.g. 'X-Forwarded-Proto: https', "
            "or 'off' when no proxy sets one (then only requests that reach Django over TLS are secure)."
        )
    return "HTTP_" + name.strip().upper().replace("-", "_"), value.strip()


# The TLS-terminating proxy tells Django a request came over HTTPS with this header. It must set (or strip)
# the header on every request, or a client could claim HTTPS.
SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(
    env.env_str("SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto: https")
)
# Trust the proxy's X-Forwarded-Host / -Port for the request's host (off: the Host header decides).
USE_X_FORWARDED_HOST = env.env_bool("USE_X_FORWARDED_HOST", False)
USE_X_FORWARDED_PORT = env.env_bool("USE_X_FORWARDED_PORT", False)
SECURE_SSL_REDIRECT = env.env_bool("SECURE_SSL_REDIRECT", True)
SESSION_COOKIE_SECURE = env.env_bool("SESSION_COOKIE_SECURE", True)
CSRF_COOKIE_SECURE = env.env_bool("CSRF_COOKIE_SECURE", True)
SECURE_HSTS_SECONDS = env.env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env.env_bool("SECURE_HSTS_PRELOAD", True)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
