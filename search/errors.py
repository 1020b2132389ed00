"""One error hierarchy, raised by services and translated by each adapter (HTTP 4xx, GraphQL, MCP)."""


class SearchError(Exception):
    """Base class. ``code`` is a stable machine-readable name; the message says how to fix the problem."""

    code = "search_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidQuery(SearchError):
    code = "invalid_query"


class InvalidCursor(SearchError):
    code = "invalid_cursor"


class NotFound(SearchError):
    code = "not_found"


class PermissionDenied(SearchError):
    code = "permission_denied"


class EmbeddingUnavailable(SearchError):
    code = "embedding_unavailable"


class EmbeddingModelMismatch(SearchError):
    code = "embedding_model_mismatch"


class ImportFailed(SearchError):
    code = "import_failed"
