"""adapters.limits: a request spends its caller's budget (per user when signed in, else per IP)."""

from __future__ import annotations

from types import SimpleNamespace

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from django.test import RequestFactory

from adapters.limits import caller_key, spend


def _request(user: object, remote_addr: str = "10.0.0.9") -> HttpRequest:
    request = RequestFactory().get("/api/x", REMOTE_ADDR=remote_addr)
    request.user = user  # type: ignore[assignment]
    return request


def test_the_caller_is_the_user_when_signed_in_else_the_address() -> None:
    assert caller_key(_request(SimpleNamespace(is_authenticated=True, pk=7))) == "user:7"
    assert caller_key(_request(AnonymousUser())) == "ip:10.0.0.9"


def test_spending_past_the_budget_says_when_to_retry() -> None:
    # given: the 60 previews of this minute spent
    request = _request(AnonymousUser())
    assert not spend(request, "preview", cost=60).limited
    # when
    limit = spend(request, "preview")
    # then
    assert limit.limited and limit.retry_after >= 1
    assert not spend(_request(AnonymousUser(), remote_addr="10.0.0.10"), "preview").limited  # another caller
