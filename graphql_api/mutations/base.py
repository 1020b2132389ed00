"""The base of every mutation: service errors become typed ``errors`` entries, never exceptions."""

from __future__ import annotations

from typing import Any

import graphene
from django.db import transaction

from graphql_api.errors import SearchErrorType, error_payload
from search.errors import SearchError


class BaseMutation(graphene.Mutation):
    """Subclasses implement ``perform(info, **arguments) -> dict`` of payload fields.

    A ``SearchError`` from the service rolls the mutation back and is returned in ``errors``
    (``code``, ``message``, ``field``), Saleor style, so clients branch on a code, not on text.
    """

    errors = graphene.List(graphene.NonNull(SearchErrorType), required=True)

    class Meta:
        abstract = True

    @classmethod
    def perform(cls, info: Any, **arguments: Any) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def mutate(cls, root: Any, info: Any, **arguments: Any) -> BaseMutation:
        try:
            with transaction.atomic():
                fields = cls.perform(info, **arguments)
        except SearchError as exc:
            return cls(errors=[error_payload(exc)])
        return cls(errors=[], **fields)
