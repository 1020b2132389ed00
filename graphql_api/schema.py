"""The GraphQL schema: root query and mutation fields, each a thin call into ``resolvers``/``mutations``.

Exported to ``docs/schema.graphql`` by ``manage.py export_schema`` (CI fails when that file is stale).
"""

from __future__ import annotations

from typing import Any

import graphene

from accounts.limits import RATES
from graphql_api import resolvers
from graphql_api.mutations.follows import FollowCreate, FollowDelete, FollowDigestSet, FollowMarkSeen
from graphql_api.mutations.presets import PresetCreate, PresetDelete, PresetRename, PresetRestore
from graphql_api.mutations.recent_searches import RecentSearchAdd, RecentSearchesClear
from graphql_api.types import (
    CorpusEnum,
    FederatedSearchInput,
    FederatedSearchResult,
    Follow,
    FollowDigest,
    Item,
    ItemConnection,
    ItemSortField,
    NotePathsFilterInput,
    Preset,
    SearchFilterInput,
    SearchInput,
    SearchResult,
)


class Query(graphene.ObjectType):
    search = graphene.Field(
        SearchResult,
        required=True,
        input=SearchInput(required=True),
        description=(
            "Ranked search (hybrid lexical + vector) through the one engine every surface uses. "
            f"Each `search` field spends one unit of the caller's search rate limit ({RATES['search']}, "
            "shared with POST /api/search)."
        ),
    )
    federated_search = graphene.Field(
        FederatedSearchResult,
        required=True,
        input=FederatedSearchInput(required=True),
        description=(
            "One search across this knowledge base and the peers you may see (docs/federation.md), ranked "
            "together as one knowledge base holding them all would rank them; `sources` says how each "
            "answered. Spends one search unit, like `search`."
        ),
    )
    note_paths = graphene.List(
        graphene.NonNull(graphene.String),
        required=True,
        filter=NotePathsFilterInput(),
        description=(
            "Paths (/items/<slug>) of matching items. With `filter.search` it spends one search unit."
        ),
    )
    item = graphene.Field(
        Item,
        id=graphene.ID(),
        slug=graphene.String(),
        corpus=CorpusEnum(default_value="live"),
        description="One item by id or slug; null when it does not exist or you may not read it.",
    )
    items = graphene.Field(
        ItemConnection,
        required=True,
        filter=SearchFilterInput(),
        sort=ItemSortField(default_value="newest"),
        first=graphene.Int(default_value=20, description="Items per page, 1–100."),
        after=graphene.String(description="`pageInfo.endCursor` of the previous page."),
        corpus=CorpusEnum(default_value="live"),
        description="Browse mode (no query): readable items by filters, sorted and paged.",
    )
    presets = graphene.List(
        graphene.NonNull(Preset), required=True, description="System presets first, then your own."
    )
    recent_searches = graphene.List(
        graphene.NonNull(graphene.String),
        required=True,
        description="Your recent queries, newest first (at most 10). Empty for anonymous callers.",
    )
    follows = graphene.List(
        graphene.NonNull(Follow),
        required=True,
        description="The searches you follow, newest first, with what is new for each. Empty for anonymous callers.",
    )
    follow_digest = graphene.Field(
        graphene.NonNull(FollowDigest), description="The e-mail digest of your follows: offered, and asked for."
    )

    @staticmethod
    def resolve_search(root: Any, info: Any, input: Any) -> Any:
        return resolvers.resolve_search(info, input)

    @staticmethod
    def resolve_federated_search(root: Any, info: Any, input: Any) -> Any:
        return resolvers.resolve_federated_search(info, input)

    @staticmethod
    def resolve_note_paths(root: Any, info: Any, filter: Any = None) -> list[str]:
        return resolvers.resolve_note_paths(info, filter)

    @staticmethod
    def resolve_item(root: Any, info: Any, **arguments: Any) -> Any:
        return resolvers.resolve_item(info, **arguments)

    @staticmethod
    def resolve_items(root: Any, info: Any, **arguments: Any) -> Any:
        return resolvers.resolve_items(info, **arguments)

    @staticmethod
    def resolve_presets(root: Any, info: Any) -> list[Any]:
        return resolvers.resolve_presets(info)

    @staticmethod
    def resolve_recent_searches(root: Any, info: Any) -> list[str]:
        return resolvers.resolve_recent_searches(info)

    @staticmethod
    def resolve_follows(root: Any, info: Any) -> list[Any]:
        return resolvers.resolve_follows(info)

    @staticmethod
    def resolve_follow_digest(root: Any, info: Any) -> Any:
        return resolvers.resolve_follow_digest(info)


class Mutation(graphene.ObjectType):
    preset_create = PresetCreate.Field()
    preset_rename = PresetRename.Field()
    preset_delete = PresetDelete.Field()
    preset_restore = PresetRestore.Field()
    recent_search_add = RecentSearchAdd.Field()
    recent_searches_clear = RecentSearchesClear.Field()
    follow_create = FollowCreate.Field()
    follow_delete = FollowDelete.Field()
    follow_mark_seen = FollowMarkSeen.Field()
    follow_digest_set = FollowDigestSet.Field()


schema = graphene.Schema(query=Query, mutation=Mutation)
