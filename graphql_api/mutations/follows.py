"""Follow mutations: thin calls to ``follows.services`` (signed-in users; CSRF as for every mutation)."""

from __future__ import annotations

from typing import Any

import graphene
from graphene.types.generic import GenericScalar

from follows import selectors as follow_selectors
from follows import services
from graphql_api.context import get_user
from graphql_api.mutations.base import BaseMutation
from graphql_api.types import Follow, FollowDigest
from presets import services as preset_services


class FollowCreateInput(graphene.InputObjectType):
    query = graphene.String(description="Words to search (at most 2000 characters); may be empty with filters.")
    filters = GenericScalar(
        description='Filters as URL parameters, e.g. {"domain": ["pricing"], "content_type": ["policy"]}.'
    )
    preset_id = graphene.ID(description="Follow a saved preset's filters (with `query`, if given).")
    label = graphene.String(description="1–80 characters; by default the query, or the filters.")


def _view(info: Any, follow_id: int) -> Any:
    return follow_selectors.follow_get(user=get_user(info.context), follow_id=follow_id)


class FollowCreate(BaseMutation):
    """Follow a search: its runs record what is new or changed (the first run is the baseline)."""

    follow = graphene.Field(Follow)

    class Arguments:
        input = FollowCreateInput(required=True)

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        data = arguments["input"]
        owner = get_user(info.context)
        filters, label = data.get("filters"), data.get("label")
        if data.get("preset_id") is not None:
            preset = preset_services.preset_get(owner=owner, preset_id=data["preset_id"])
            filters, label = preset.params, label or preset.name
        follow = services.follow_create(owner=owner, query=data.get("query") or "", filters=filters, label=label)
        return {"follow": _view(info, follow.pk)}


class FollowDelete(BaseMutation):
    """Unfollow: the follow and its feed are removed."""

    deleted_id = graphene.ID()

    class Arguments:
        id = graphene.ID(required=True)

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        follow = services.follow_delete(owner=get_user(info.context), follow_id=arguments["id"])
        return {"deleted_id": str(follow.pk)}


class FollowMarkSeen(BaseMutation):
    """Mark every new and changed item of one follow as seen."""

    follow = graphene.Field(Follow)

    class Arguments:
        id = graphene.ID(required=True)

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        follow = services.follow_mark_seen(owner=get_user(info.context), follow_id=arguments["id"])
        return {"follow": _view(info, follow.pk)}


class FollowDigestSet(BaseMutation):
    """Turn the e-mail digest of your follows on or off (turning it on needs a server that sends them)."""

    digest = graphene.Field(FollowDigest)

    class Arguments:
        enabled = graphene.Boolean(required=True)

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        user = get_user(info.context)
        services.follow_digest_set(owner=user, enabled=arguments["enabled"])
        return {"digest": follow_selectors.digest_state(user_id=user.pk if user is not None else None)}
