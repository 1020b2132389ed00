"""Limits checked on the parsed document, before anything executes.

* depth: graphene's ``depth_limit_validator`` (graphql-core validation rule), at most ``MAX_DEPTH``;
* aliases: at most ``MAX_ALIASES`` aliased fields per operation (fragments counted where spread);
* cost: how many units of the shared ``search`` rate-limit budget the operation spends — one per
  ``search`` field, one per ``notePaths`` field whose filter sets ``search``.

The protection rules run only on documents that passed graphql-core's standard rules, so unknown or
cyclic fragments were already refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from graphene.validation import depth_limit_validator
from graphql import GraphQLError, GraphQLSchema
from graphql.execution.values import get_argument_values, get_variable_values
from graphql.language import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)
from graphql.validation import ValidationRule

MAX_DEPTH = 8
MAX_ALIASES = 20
# Root fields that run the engine's ranked search.
SEARCH_FIELD = "search"
FEDERATED_SEARCH_FIELD = "federatedSearch"
NOTE_PATHS_FIELD = "notePaths"


def _fields(
    selection_set: SelectionSetNode | None,
    fragments: dict[str, FragmentDefinitionNode],
    seen: frozenset[str] = frozenset(),
) -> Iterator[FieldNode]:
    """Every field of a selection set, fragments expanded (each spread counted where it is spread)."""
    if selection_set is None:
        return
    for selection in selection_set.selections:
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _fields(selection.selection_set, fragments, seen)
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            fragment = fragments.get(name)
            if fragment is not None and name not in seen:
                yield from _fields(fragment.selection_set, fragments, seen | {name})


def _all_fields(
    selection_set: SelectionSetNode | None, fragments: dict[str, FragmentDefinitionNode]
) -> Iterator[FieldNode]:
    for field in _fields(selection_set, fragments):
        yield field
        yield from _all_fields(field.selection_set, fragments)


def _fragments(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    return {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}


class AliasLimitRule(ValidationRule):
    """At most ``MAX_ALIASES`` aliased fields in one operation: aliases multiply work per request."""

    def enter_operation_definition(self, node: OperationDefinitionNode, *_args: Any) -> None:
        fragments = _fragments(self.context.document)
        count = sum(1 for field in _all_fields(node.selection_set, fragments) if field.alias is not None)
        if count > MAX_ALIASES:
            name = node.name.value if node.name else "anonymous"
            self.report_error(
                GraphQLError(
                    f"'{name}' uses {count} aliased fields; at most {MAX_ALIASES} are allowed. "
                    "Split the operation into several requests.",
                    node,
                    extensions={"code": "QUERY_TOO_COMPLEX"},
                )
            )


def protection_rules() -> list[type[ValidationRule]]:
    return [depth_limit_validator(max_depth=MAX_DEPTH), AliasLimitRule]


def tag_complexity_errors(errors: list[GraphQLError]) -> list[GraphQLError]:
    """The depth rule reports plain errors; give every protection error the QUERY_TOO_COMPLEX code."""
    tagged = []
    for error in errors:
        if not (error.extensions or {}).get("code"):
            error = GraphQLError(
                f"{error.message} Ask for fewer nested levels.",
                error.nodes,
                extensions={"code": "QUERY_TOO_COMPLEX"},
            )
        tagged.append(error)
    return tagged


def search_cost(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: dict[str, Any] | None,
) -> int:
    """Units of the ``search`` budget the operation would spend (counted before execution)."""
    if operation.operation.value != "query":
        return 0
    query_type = schema.query_type
    if query_type is None:
        return 0
    fragments = _fragments(document)
    coerced = get_variable_values(schema, operation.variable_definitions or (), variables or {})
    cost = 0
    for field in _fields(operation.selection_set, fragments):
        name = field.name.value
        if name in (SEARCH_FIELD, FEDERATED_SEARCH_FIELD):
            cost += 1
        elif name == NOTE_PATHS_FIELD:
            cost += 1 if _note_paths_searches(query_type.fields[name], field, coerced) else 0
    return cost


def _note_paths_searches(field_def: Any, node: FieldNode, coerced: Any) -> bool:
    if isinstance(coerced, list):  # bad variables: execution refuses the operation; count it to be safe
        return True
    try:
        arguments = get_argument_values(field_def, node, coerced)
    except GraphQLError:
        return True
    search = (arguments.get("filter") or {}).get("search")
    return bool(search and str(search).strip())
