"""What a search may read: one rule for the corpus a principal reads and the items it may see.

Every lane, the preview, the page rows and the selectors take their access sub-select and their corpus
columns from here, so no reader can disagree with another about who sees what.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import EmptyResultSet

from search.engine.sql import Fragment
from search.models import ContentItem
from search.principal import Principal
from search.types import Corpus, SearchFilters


def corpus_for(principal: Principal, corpus: Corpus = "live") -> Corpus:
    """The corpus ``principal`` reads when asking for ``corpus``: only staff and API keys read drafts (the latest
    corpus); everyone else gets the live corpus, whatever they asked for. The one place this rule lives: search,
    listing, reads, GraphQL and MCP all call it.
    """
    return corpus if principal.can_read_drafts else "live"


def chunk_column(corpus: str) -> str:
    """The boolean column of ``search_chunk`` that marks a chunk as part of ``corpus``."""
    return "in_live" if corpus == "live" else "in_latest"


def revision_column(corpus: str) -> str:
    """The column of ``search_contentitem`` that names the revision ``corpus`` reads."""
    return "live_revision_id" if corpus == "live" else "latest_revision_id"


@dataclass(frozen=True)
class ItemScope:
    """The items one search may return: readable by ``principal``, in the corpus it reads, not archived,
    under ``filters``. Build it with ``ItemScope.of`` (which applies ``corpus_for``)."""

    principal: Principal
    corpus: Corpus
    filters: SearchFilters = field(default_factory=SearchFilters)

    @classmethod
    def of(cls, principal: Principal, corpus: Corpus = "live", filters: SearchFilters | None = None) -> ItemScope:
        return cls(principal, corpus_for(principal, corpus), filters or SearchFilters())

    @property
    def chunk_column(self) -> str:
        return chunk_column(self.corpus)

    @property
    def revision_column(self) -> str:
        return revision_column(self.corpus)

    def items(self) -> Any:
        """The queryset of the items in scope (unordered)."""
        return (
            ContentItem.objects.searchable(self.principal, self.corpus)
            .apply_filters(self.filters, user_id=self.principal.user_id)
            .order_by()
        )

    def items_sql(self, qs: Any = None) -> Fragment | None:
        """The access-and-filters sub-select of ``qs`` (the scope's items by default) as SQL of their ids, or
        None when the filters can match nothing (e.g. an id past the column's range)."""
        try:
            return Fragment(*(self.items() if qs is None else qs).values("id").query.sql_with_params())
        except EmptyResultSet:
            return None
