"""Per-request batch loaders, one per relation, named ``<Model>By<Key>Loader`` as in Saleor.

graphql-core executes a synchronous schema depth-first, so a classic deferred DataLoader cannot
collect the keys of sibling objects before the first one resolves. Instead a list resolver announces
the keys its children will ask for (``expect``), and the first ``load`` fetches every announced key in
one query; later ``load`` calls are answered from the loader's cache. Nothing is fetched for a
relation the query does not select.

Loaders live on the request (``context``), one instance per class and arguments, so a cache never
crosses requests or principals. Item loaders apply the engine's access rule
(``ContentItem.objects.searchable``): an unreadable item loads as ``None``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from graphql_api.context import get_principal
from search.engine import corpus_for
from search.models import ContentItem, Revision
from search.principal import Principal
from search.types import Corpus

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class DataLoader(Generic[K, V]):
    """A synchronous batch loader: ``batch_load(keys)`` answers many keys with one query."""

    context_key: ClassVar[str]

    def __new__(cls, context: Any, *args: Hashable) -> DataLoader[K, V]:
        registry: dict[tuple[Hashable, ...], DataLoader[Any, Any]] = context.__dict__.setdefault(
            "_kb_loaders", {}
        )
        key = (cls.context_key, *args)
        if key not in registry:
            loader = super().__new__(cls)
            loader._setup(context, *args)
            registry[key] = loader
        return registry[key]  # type: ignore[return-value]

    def _setup(self, context: Any, *args: Hashable) -> None:
        self.context = context
        self.args = args
        self._cache: dict[K, V | None] = {}
        self._pending: dict[K, None] = {}
        self.batches = 0

    def batch_load(self, keys: Sequence[K]) -> Sequence[V | None]:  # pragma: no cover - abstract
        raise NotImplementedError

    def expect(self, keys: Iterable[K | None]) -> None:
        """Announce keys that sibling objects will load, so the first ``load`` fetches them all at once."""
        for key in keys:
            if key is not None and key not in self._cache:
                self._pending[key] = None

    def prime(self, key: K, value: V | None) -> None:
        """Store a value already fetched elsewhere (e.g. by a selector's page query)."""
        self._cache[key] = value
        self._pending.pop(key, None)

    def load(self, key: K | None) -> V | None:
        if key is None:
            return None
        value = self._cache.get(key, _MISSING)
        if value is _MISSING:
            self._pending[key] = None
            self._flush()
            value = self._cache.get(key)
        return value  # type: ignore[return-value]

    def load_many(self, keys: Iterable[K]) -> list[V | None]:
        keys = list(keys)
        self.expect(keys)
        return [self.load(key) for key in keys]

    def _flush(self) -> None:
        keys = list(self._pending)
        self._pending.clear()
        if not keys:
            return
        self.batches += 1
        for key, value in zip(keys, self.batch_load(keys), strict=True):
            self._cache[key] = value


class ContentItemByIdLoader(DataLoader[int, ContentItem]):
    """Items this request's principal may read in ``corpus`` (``None`` for any other id).

    Loading an item also primes ``RevisionByIdLoader`` with the revisions joined in the same query and
    announces ``superseded_by`` ids, so ``item { revision supersededBy { … } }`` over a page costs one
    query per level, not one per item.
    """

    context_key = "content_item_by_id"

    def __new__(cls, context: Any, corpus: Corpus = "live") -> ContentItemByIdLoader:
        return super().__new__(cls, context, corpus_for(get_principal(context), corpus))  # type: ignore[return-value]

    @property
    def corpus(self) -> Corpus:
        return self.args[0]  # type: ignore[return-value]

    @property
    def principal(self) -> Principal:
        return get_principal(self.context)

    def batch_load(self, keys: Sequence[int]) -> list[ContentItem | None]:
        found = {
            item.pk: item
            for item in ContentItem.objects.searchable(self.principal, self.corpus)
            .filter(pk__in=keys)
            .select_related("live_revision", "latest_revision")
        }
        self.adopt(found.values())
        return [found.get(key) for key in keys]

    def adopt(self, items: Iterable[ContentItem]) -> None:
        """Take items fetched elsewhere (a selector's page): cache them and prime their relations."""
        revisions = RevisionByIdLoader(self.context)
        for item in items:
            item.kb_corpus = self.corpus  # type: ignore[attr-defined] # which revision Item fields read
            self.prime(item.pk, item)
            for revision in (item.live_revision, item.latest_revision):
                if revision is not None:
                    revisions.prime(revision.pk, revision)
            self.expect([item.superseded_by_id])


class RevisionByIdLoader(DataLoader[int, Revision]):
    """Revisions by id. Callers reach a revision only through an item they may read."""

    context_key = "revision_by_id"

    def batch_load(self, keys: Sequence[int]) -> list[Revision | None]:
        found = Revision.objects.in_bulk(keys)
        return [found.get(key) for key in keys]
