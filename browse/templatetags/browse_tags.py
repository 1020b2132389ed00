"""Small display filters for browse templates (labels only; no queries), and the header's follow news (one
cached count, ``follows.selectors.follow_news``)."""

from __future__ import annotations

import json

from django import template

from browse import presenters
from follows.selectors import follow_news

register = template.Library()


@register.filter
def label(value: str) -> str:
    """``bid_writing`` → ``Bid writing``."""
    return presenters.label(str(value or ""))


@register.filter
def ctype_label(value: str) -> str:
    """A content type's display name (``qa`` → ``Q&A``)."""
    return presenters.content_type_label(str(value or ""))


@register.filter
def to_json(value: object) -> str:
    """JSON text, left unsafe so autoescaping makes it fit inside an HTML attribute."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@register.inclusion_tag("browse/_follow_news.html", takes_context=True)
def follow_news_link(context: template.Context) -> dict[str, object]:
    """The header's link to /follows: "3 new for “pricing policy”" (signed-in users only; cached per user)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"news": None}
    return {"news": follow_news(user=user), "current": getattr(request, "path", "") == "/follows"}
