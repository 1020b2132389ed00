"""``/graphql``: graphene-django's view with the protections this API promises.

Order of checks (everything before the last step is free of SQL and embedding calls):

1. body size (``GRAPHQL_MAX_BODY_BYTES``, 64 KiB by default) → 413 ``REQUEST_TOO_LARGE``;
2. a JSON array body (batched operations) → 400 ``BATCH_NOT_SUPPORTED``;
3. parse and graphql-core's standard validation;
4. depth (at most 8) and aliases (at most 20) → 400 ``QUERY_TOO_COMPLEX``;
5. mutations only: Django's CSRF check (session auth) → 403 ``CSRF_FAILED``; queries need no token;
6. the shared ``search`` rate limit, one unit per ``search`` field → 429 ``RATE_LIMITED``;
7. execute: a query with all its reads on one database (``search.replicas``: a replica when one is
   configured and healthy), a mutation on the primary. GraphiQL is served only when ``DEBUG`` is on.
"""

from __future__ import annotations

import json
import logging
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DEFAULT_DB_ALIAS
from django.http import HttpRequest, HttpResponse
from graphene_django.views import GraphQLView, HttpError
from graphql import ExecutionResult, GraphQLError, OperationType, execute, get_operation_ast, parse
from graphql.validation import validate

from adapters.http import csrf_rejected
from adapters.limits import spend
from config.middleware import unavailable_reason
from graphql_api.protection import protection_rules, search_cost, tag_complexity_errors
from graphql_api.schema import schema as kb_schema
from search import replicas

logger = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 64 * 1024


def max_body_bytes() -> int:
    return int(getattr(settings, "GRAPHQL_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))


def _error_response(status: int, message: str, code: str, **extensions: Any) -> HttpResponse:
    body = {"errors": [{"message": message, "extensions": {"code": code, **extensions}}]}
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


def _check_types(query: Any, variables: Any, operation_name: Any) -> None:
    """A JSON body can hold anything: refuse a non-string query or operationName, non-object variables."""
    problem = None
    if not isinstance(query, str):
        problem = "query must be a string holding a GraphQL document."
    elif variables is not None and not isinstance(variables, dict):
        problem = "variables must be a JSON object mapping variable names to values."
    elif operation_name is not None and not isinstance(operation_name, str):
        problem = "operationName must be a string naming an operation of the document."
    if problem:
        raise HttpError(HttpResponse(status=400), problem)


class _Refused(Exception):
    """A request refused before execution, with its HTTP status."""

    def __init__(self, status: int, error: GraphQLError, headers: dict[str, str] | None = None) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error
        self.headers = headers or {}


class ProtectedGraphQLView(GraphQLView):
    schema = kb_schema
    graphiql = True  # still needs DEBUG: see can_display_graphiql

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = max_body_bytes()
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        too_large = length > limit or len(request.META.get("QUERY_STRING", "")) > limit
        if not too_large and request.method == "POST":
            try:
                too_large = len(request.body) > limit  # a body sent without Content-Length
            except RequestDataTooBig:
                too_large = True
        if too_large:
            return _error_response(
                413,
                f"The request is larger than {limit} bytes. Send a shorter query, and pass long values as "
                "variables within the limit.",
                "REQUEST_TOO_LARGE",
            )
        response: HttpResponse = super().dispatch(request, *args, **kwargs)
        refused: _Refused | None = getattr(request, "_kb_refused", None)
        if refused is not None:
            response.status_code = refused.status
            for header, value in refused.headers.items():
                response[header] = value
        return response

    @classmethod
    def can_display_graphiql(cls, request: HttpRequest, data: Any) -> bool:
        return bool(settings.DEBUG) and super().can_display_graphiql(request, data)

    def parse_body(self, request: HttpRequest) -> Any:
        if self.get_content_type(request) == "application/json":
            try:
                data = json.loads(request.body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nested too deeply
                raise HttpError(HttpResponse(status=400), "POST body sent invalid JSON.") from None
            if isinstance(data, list):
                response = HttpResponse(status=400)
                raise HttpError(
                    response,
                    "Batched operations are not supported: send one operation per request "
                    "(a JSON object with query, variables and operationName).",
                )
            if not isinstance(data, dict):
                raise HttpError(HttpResponse(status=400), "The body must be a JSON object with a query.")
            return data
        if self.get_content_type(request) == "application/graphql":
            try:
                return {"query": request.body.decode("utf-8")}
            except UnicodeDecodeError:
                raise HttpError(HttpResponse(status=400), "The body is not valid UTF-8 text.") from None
        return super().parse_body(request)

    @staticmethod
    def format_error(error: Any) -> dict[str, Any]:
        if isinstance(error, GraphQLError):
            original = error.original_error
            if original is not None and not isinstance(original, GraphQLError) and not settings.DEBUG:
                logger.exception("GraphQL resolver failed", exc_info=original)
                formatted = GraphQLError(
                    "Internal error; it has been logged. Retry, or report it with the time of the request.",
                    error.nodes,
                    path=error.path,
                    extensions={"code": "INTERNAL_ERROR"},
                ).formatted
                return dict(formatted)
            return dict(error.formatted)
        message = getattr(error, "message", None) or str(error)
        code = "BATCH_NOT_SUPPORTED" if message.startswith("Batched operations") else "INVALID_QUERY"
        return {"message": message, "extensions": {"code": code}}

    def execute_graphql_request(
        self,
        request: HttpRequest,
        data: Any,
        query: str | None,
        variables: Any,
        operation_name: str | None,
        show_graphiql: bool = False,
    ) -> ExecutionResult | None:
        try:
            return self._execute(request, query, variables, operation_name, show_graphiql)
        except _Refused as refused:
            request._kb_refused = refused  # type: ignore[attr-defined]
            return ExecutionResult(data=None, errors=[refused.error])

    def _execute(
        self,
        request: HttpRequest,
        query: str | None,
        variables: Any,
        operation_name: str | None,
        show_graphiql: bool,
    ) -> ExecutionResult | None:
        if not query:
            if show_graphiql:
                return None
            raise HttpError(HttpResponse(status=400), "Must provide a query string.")
        _check_types(query, variables, operation_name)
        graphql_schema = self.schema.graphql_schema
        try:
            document = parse(query)
        except GraphQLError as exc:
            return ExecutionResult(errors=[exc])
        except RecursionError:
            return ExecutionResult(errors=[GraphQLError(
                "The document is nested too deeply to parse. Ask for fewer nested levels.",
                extensions={"code": "QUERY_TOO_COMPLEX"},
            )])
        operation = get_operation_ast(document, operation_name)
        if request.method == "GET" and operation is not None and operation.operation != OperationType.QUERY:
            if show_graphiql:
                return None
            raise HttpError(
                HttpResponse(status=405, headers={"Allow": "POST"}),
                f"Can only perform a {operation.operation.value} operation from a POST request.",
            )
        errors = validate(graphql_schema, document)
        if errors:
            return ExecutionResult(errors=errors)
        errors = validate(graphql_schema, document, protection_rules())
        if errors:
            return ExecutionResult(errors=tag_complexity_errors(errors))
        if operation is None:
            message = (
                f"No operation named {operation_name!r} in the document."
                if operation_name
                else "The document holds several operations: pass operationName to choose one."
            )
            return ExecutionResult(errors=[GraphQLError(message, extensions={"code": "INVALID_QUERY"})])
        if operation.operation == OperationType.MUTATION:
            self._check_csrf(request)
        self._spend_search_budget(request, document, operation, variables)

        def run() -> ExecutionResult:
            result = cast(ExecutionResult, execute(
                graphql_schema,
                document,
                root_value=self.get_root_value(request),
                context_value=request,
                variable_values=variables,
                operation_name=operation_name,
                middleware=self.get_middleware(request),
            ))
            on_replica = replicas.read_alias() != DEFAULT_DB_ALIAS
            for error in result.errors or ():
                original = error.original_error
                if original is not None and (
                    unavailable_reason(original) or (on_replica and replicas.replica_failure(original))
                ):
                    # A database outage, not a bug: a replica's is run again on the primary (replicas.replica_read),
                    # the primary's answers 503 with Retry-After (config.middleware).
                    raise original
            return result

        if operation.operation == OperationType.QUERY:
            # A query reads, all of it (its searches, item lookups, loaders) from one database; whether its caller
            # (the session user) just wrote is the request's to say (config.middleware.ReadYourWritesMiddleware).
            return replicas.replica_read(None, run)
        return run()

    @staticmethod
    def _check_csrf(request: HttpRequest) -> None:
        """Mutations act with the session's authority, so they need Django's CSRF token."""
        if csrf_rejected(request):
            raise _Refused(
                403,
                GraphQLError(
                    "CSRF check failed. Mutations need the csrftoken cookie's value in the X-CSRFToken "
                    "header (GET /graphql or any page sets the cookie); queries do not.",
                    extensions={"code": "CSRF_FAILED"},
                ),
            )

    def _spend_search_budget(
        self, request: HttpRequest, document: Any, operation: Any, variables: Any
    ) -> None:
        cost = search_cost(self.schema.graphql_schema, document, operation, variables)
        if not cost:
            return
        limit = spend(request, "search", cost=cost)
        if limit.limited:
            raise _Refused(
                429,
                GraphQLError(
                    f"Search rate limit reached: this operation needs {cost} search unit(s) and the budget "
                    f"(shared with POST /api/search) is spent. Retry in {limit.retry_after} s, or ask for "
                    "fewer search fields per request.",
                    extensions={"code": "RATE_LIMITED", "retryAfter": limit.retry_after},
                ),
                headers={"Retry-After": str(limit.retry_after)},
            )
