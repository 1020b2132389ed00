"""The health endpoints' views: thin, the checks live in ``config.health``.

``config.middleware.HealthEndpoints`` answers ``/healthz`` and ``/readyz`` before any other middleware, so a
load balancer's probe is never redirected to HTTPS, refused for its Host header (probes often send the
instance's address), rate-limited, asked for a CSRF token or a session, or counted in the request metrics.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from analytics.metrics import metrics_access
from config import health


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness: 200 while the process answers. Touches nothing else."""
    return _no_store(JsonResponse({"status": "ok"}))


def readyz(request: HttpRequest) -> HttpResponse:
    """Readiness: 200 with every check, or 503 naming the failing ones. Operators (the callers /metrics
    admits: METRICS_ALLOWED_IPS or METRICS_TOKEN) also see each failure's error message."""
    report = health.readiness()
    trusted = metrics_access(
        remote_addr=request.META.get("REMOTE_ADDR"), authorization=request.headers.get("Authorization")
    ) == "ok"
    response = JsonResponse(report.as_json(with_detail=trusted), status=200 if report.ready else 503)
    if not report.ready:
        response["Retry-After"] = "5"
    return _no_store(response)
