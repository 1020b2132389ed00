"""Cold-start prompt cards on /browse: three per primary focus, and a fallback set.

Kinds:
- ``search``: runs ``query`` and records it as a recent search;
- ``filter``: applies ``params`` (only the whitelisted keys below); no recent-search write;
- ``chipComposite``: chips of the top 3 domains by item count (cached 24 h); a chip applies that
  domain; "More domains…" opens the filter panel on domain without changing the URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from browse.presenters import label
from search.filter_params import filters_from_params
from search.selectors.catalogue import top_domains

FILTER_CARD_KEYS = frozenset({"domain", "content_type", "include_qa", "source", "date_from", "freshness", "layer"})


@dataclass(frozen=True)
class Chip:
    value: str
    label: str
    count: int
    href: str


@dataclass(frozen=True)
class PromptCard:
    kind: str  # "search" | "filter" | "chipComposite"
    title: str
    description: str
    query: str = ""
    params: dict[str, str] = field(default_factory=dict)
    chips: tuple[Chip, ...] = ()

    @property
    def href(self) -> str:
        """Where the card leads without JavaScript."""
        if self.kind == "search":
            return "/browse?" + urlencode({"q": self.query})
        if self.kind == "filter":
            return "/browse?" + urlencode(self.params)
        return "#filter-domain"


def _search(title: str, query: str, description: str) -> PromptCard:
    return PromptCard("search", title, description, query=query)


def _filter(title: str, params: dict[str, str], description: str) -> PromptCard:
    unknown = set(params) - FILTER_CARD_KEYS
    if unknown:
        raise ValueError(f"filter cards may only set {sorted(FILTER_CARD_KEYS)}; remove {sorted(unknown)}")
    filters_from_params(params, strict=True)  # fail at import, not in front of a visitor
    return PromptCard("filter", title, description, params=dict(params))


_DOMAINS = PromptCard("chipComposite", "Explore the largest topics", "Jump into the domains with the most material.")

CARDS: dict[str, tuple[PromptCard, ...]] = {
    "bid_writing": (
        _search("Write a sharper executive summary", "executive summary", "Structure, length and common mistakes."),
        _filter("Learn from winning case studies", {"content_type": "case_study", "source": "bid_library"},
                "Case studies from the bid library."),
        _DOMAINS,
    ),
    "account_management": (
        _search("Onboard a new client", "client onboarding", "Kick-off, reporting and communication standards."),
        _filter("Answers to client questions", {"content_type": "qa", "domain": "account_management"},
                "Q&A from account management."),
        _DOMAINS,
    ),
    "marketing": (
        _search("Check our tone of voice", "tone of voice", "The brand guide and how to apply it."),
        _filter("Recent marketing material", {"domain": "marketing", "freshness": "365"},
                "Marketing items updated in the last year."),
        _DOMAINS,
    ),
}
FALLBACK: tuple[PromptCard, ...] = (
    _search("How do we price a bid?", "pricing policy", "Pricing models, discounts and payment terms."),
    _filter("Ready-to-use templates", {"content_type": "template", "include_qa": "0"},
            "Templates and answer banks you can start from."),
    _DOMAINS,
)


def prompt_cards(*, primary_focus: str) -> list[PromptCard]:
    """The three cards for a focus (fallback for viewers and unset focus), chips filled with top domains."""
    cards = []
    for card in CARDS.get(primary_focus, FALLBACK):
        if card.kind == "chipComposite":
            chips = tuple(
                Chip(d.domain, label(d.domain), d.count, "/browse?" + urlencode({"domain": d.domain}))
                for d in top_domains(limit=3)
            )
            card = PromptCard(card.kind, card.title, card.description, chips=chips)
        cards.append(card)
    return cards
