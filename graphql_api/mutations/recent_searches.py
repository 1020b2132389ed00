"""Recent-search mutations: thin calls to ``presets.services`` (signed-in users only)."""

from __future__ import annotations

from typing import Any

import graphene

from graphql_api.context import get_user
from graphql_api.mutations.base import BaseMutation
from presets import selectors as preset_selectors
from presets import services as preset_services
from search.errors import PermissionDenied

SIGN_IN_MESSAGE = (
    "Recent searches are kept on the server for signed-in users; sign in first "
    "(anonymous visitors keep them in the browser)."
)


class SignInRequired(PermissionDenied):
    code = "sign_in_required"


def _user_id(info: Any) -> int:
    user = get_user(info.context)
    if user is None:
        raise SignInRequired(SIGN_IN_MESSAGE)
    return int(user.pk)


class RecentSearchAdd(BaseMutation):
    """Remember a query as your newest recent search (the newest 10 are kept)."""

    recent_searches = graphene.List(graphene.NonNull(graphene.String), description="Newest first.")

    class Arguments:
        query = graphene.String(required=True)

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        user_id = _user_id(info)
        preset_services.recent_search_record(user_id=user_id, query=arguments["query"])
        return {"recent_searches": preset_selectors.recent_searches_list(user_id=user_id)}


class RecentSearchesClear(BaseMutation):
    """Forget every recent search of yours."""

    deleted_count = graphene.Int()
    recent_searches = graphene.List(graphene.NonNull(graphene.String), description="Empty after clearing.")

    class Arguments:
        pass

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        user_id = _user_id(info)
        deleted = preset_services.recent_search_clear(user_id=user_id)
        return {
            "deleted_count": deleted,
            "recent_searches": preset_selectors.recent_searches_list(user_id=user_id),
        }
