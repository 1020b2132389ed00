"""Followed searches on the site: ``/follows`` and its forms (plain HTML forms with CSRF, no JavaScript needed).

Adapters only: parse the form, call ``follows.services`` / ``follows.selectors``, redirect or render.
Every write answers with a redirect to ``/follows`` and a one-line message there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from follows import selectors as follow_selectors
from follows import services as follow_services
from follows.models import LABEL_MAX_CHARS
from presets import services as preset_services
from search.errors import SearchError
from search.filter_params import FILTER_PARAMS

FOLLOWS_URL = "/follows"


def _sign_in(next_url: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(f"{settings.LOGIN_URL}?" + urlencode({"next": next_url}))


def _back(follow_id: int | None = None) -> HttpResponseRedirect:
    return HttpResponseRedirect(FOLLOWS_URL + (f"#follow-{follow_id}" if follow_id else ""))


@require_GET
def follows_page(request: HttpRequest) -> HttpResponse:
    """/follows: the signed-in user's follows, new and changed items marked, paused ones with their reason."""
    if not request.user.is_authenticated:
        return _sign_in(FOLLOWS_URL)
    presets = [p for p in preset_services.preset_list(owner=request.user)]
    context: dict[str, Any] = {
        "follows": follow_selectors.follows_list(user=request.user),
        "presets": presets,
        "max_follows": follow_services.MAX_FOLLOWS_PER_USER,
        "label_max_chars": LABEL_MAX_CHARS,
        "digest": follow_selectors.digest_state(user_id=request.user.pk),
        "user_email": request.user.email,
        "every_minutes": getattr(settings, "FOLLOWS_EVERY_MINUTES", 15),
    }
    return render(request, "browse/follows.html", context)


@require_POST
def follow_create(request: HttpRequest) -> HttpResponse:
    """Follow the search the form holds (``q`` and the filter parameters), or a saved preset (``preset``)."""
    if not request.user.is_authenticated:
        return _sign_in(request.POST.get("next") or "/browse")
    query = request.POST.get("q", "")
    label = request.POST.get("label", "")
    preset_id = request.POST.get("preset", "").strip()
    try:
        if preset_id:
            preset = preset_services.preset_get(owner=request.user, preset_id=preset_id)
            filters: Any = preset.params
            label = label or (f"{query} · {preset.name}" if query.strip() else preset.name)
        else:
            filters = {key: request.POST.getlist(key) for key in request.POST if key in FILTER_PARAMS}
        follow = follow_services.follow_create(owner=request.user, query=query, filters=filters, label=label)
    except SearchError as exc:
        messages.error(request, f"That search could not be followed: {exc.message}")
        return _back()
    messages.success(
        request,
        f"You follow “{follow.label}”. What is new for it shows here and in the header after the next run.",
    )
    return _back(follow.pk)


def _follow_form(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A POST form of ``/follows`` acting on the signed-in user's own follows: anonymous callers are sent to sign
    in, and a refusal from the service comes back to ``/follows`` as its message."""

    @require_POST
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return _sign_in(FOLLOWS_URL)
        try:
            return view(request, *args, **kwargs)
        except SearchError as exc:
            messages.error(request, exc.message)
            return _back()

    return wrapper


@_follow_form
def follow_delete(request: HttpRequest, follow_id: int) -> HttpResponse:
    follow = follow_services.follow_delete(owner=request.user, follow_id=follow_id)
    messages.success(request, f"You no longer follow “{follow.label}”.")
    return _back()


@_follow_form
def follow_mark_seen(request: HttpRequest, follow_id: int) -> HttpResponse:
    follow = follow_services.follow_mark_seen(owner=request.user, follow_id=follow_id)
    return _back(follow.pk)


@_follow_form
def follow_digest(request: HttpRequest) -> HttpResponse:
    enabled = request.POST.get("email_digest") in ("1", "on", "true")
    follow_services.follow_digest_set(owner=request.user, enabled=enabled)
    messages.success(request, "E-mail digest turned on." if enabled else "E-mail digest turned off.")
    return _back()
