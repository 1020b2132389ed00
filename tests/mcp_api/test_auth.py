from __future__ import annotations

import pytest
from django.test import RequestFactory

from accounts.api_keys import api_key_create
from mcp_api.auth import AuthenticationFailed, origin_allowed, request_principal
from search.principal import ANONYMOUS

DEFAULT = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*", "https://app.example.com"]


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),  # desktop clients and curl send no Origin
        ("http://localhost", True),
        ("http://localhost:6274", True),
        ("http://127.0.0.1:8000", True),
        ("http://[::1]:3000", True),
        ("https://app.example.com", True),
        ("https://app.example.com:443", True),  # the default port spelled out
        ("HTTPS://APP.EXAMPLE.COM", True),
        ("https://app.example.com:8443", False),  # a rule without a port means the default port only
        ("http://app.example.com", False),  # scheme matters
        ("https://localhost:3000", False),
        ("https://evil.example", False),
        ("http://localhost.evil.example", False),
        ("null", False),
        ("http://localhost:99999", False),  # malformed port
        ("", False),
    ],
)
def test_origin_allowed(origin: str | None, allowed: bool) -> None:
    assert origin_allowed(origin, DEFAULT) is allowed


def test_origin_rules_come_from_settings(settings: object) -> None:
    settings.MCP_ALLOWED_ORIGINS = ["https://agents.example.org"]  # type: ignore[attr-defined]
    assert origin_allowed("https://agents.example.org")
    assert not origin_allowed("http://localhost:3000")


@pytest.mark.django_db
def test_request_principal() -> None:
    # given
    factory = RequestFactory()
    raw = api_key_create(name="agent", all_content=True).raw_key
    # when / then
    assert request_principal(factory.post("/mcp")) is ANONYMOUS
    principal = request_principal(factory.post("/mcp", headers={"Authorization": f"bearer  {raw}"}))
    assert principal.kind == "api_key" and principal.all_content and principal.can_read_drafts
    for header in ("Bearer", "Bearer ", "Token abc", f"Bearer {raw} extra"):
        with pytest.raises(AuthenticationFailed):
            request_principal(factory.post("/mcp", headers={"Authorization": header}))
