"""Small display filters for browse templates (labels only; no queries)."""

from __future__ import annotations

import json

from django import template

from browse import presenters

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
