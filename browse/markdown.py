"""Item bodies: Markdown → sanitized HTML (markdown-it-py, then nh3 with an allow-list)."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre", "blockquote",
    "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "img",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "th": {"style"},
    "td": {"style"},
    "ol": {"start"},
    "code": {"class"},
}
URL_SCHEMES = {"http", "https", "mailto"}

# Raw HTML in the Markdown is not rendered (shown as text); nh3 is the second line of defence.
_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)


def render_markdown(text: str) -> str:
    """Sanitized HTML for a Markdown body: no scripts, no event handlers, only http(s)/mailto links."""
    html = _md.render(text or "")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
