"""Preset mutations: thin calls to ``presets.services`` (create, rename, delete, restore)."""

from __future__ import annotations

from typing import Any

import graphene
from graphene.types.generic import GenericScalar

from graphql_api.context import get_user
from graphql_api.mutations.base import BaseMutation
from graphql_api.types import Preset
from presets import services


class PresetCreateInput(graphene.InputObjectType):
    name = graphene.String(required=True, description="1–40 characters, unique among your presets.")
    params = GenericScalar(
        required=True,
        description='Filters as URL parameters, e.g. {"domain": ["Security"], "content_type": ["guide"]}.',
    )


class PresetCreate(BaseMutation):
    """Save filters under a name (signed-in users)."""

    preset = graphene.Field(Preset)

    class Arguments:
        input = PresetCreateInput(required=True)

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        data = arguments["input"]
        owner = get_user(info.context)
        return {
            "preset": services.preset_create(owner=owner, name=data.get("name"), params=data.get("params"))
        }


class PresetRename(BaseMutation):
    """Rename one of your presets. System presets cannot be renamed."""

    preset = graphene.Field(Preset)

    class Arguments:
        id = graphene.ID(required=True)
        name = graphene.String(required=True)

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        owner = get_user(info.context)
        return {
            "preset": services.preset_rename(owner=owner, preset_id=arguments["id"], name=arguments["name"])
        }


class _PresetByIdMutation(BaseMutation):
    """A change to one of your presets named by its id: the subclass names the service that makes it."""

    preset = graphene.Field(Preset)

    class Meta:
        abstract = True

    class Arguments:
        id = graphene.ID(required=True)

    @staticmethod
    def change(*, owner: Any, preset_id: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:
        return {"preset": cls.change(owner=get_user(info.context), preset_id=arguments["id"])}


class PresetDelete(_PresetByIdMutation):
    """Delete one of your presets; `presetRestore` undoes it."""

    change = staticmethod(services.preset_delete)


class PresetRestore(_PresetByIdMutation):
    """Undo a delete."""

    change = staticmethod(services.preset_restore)
