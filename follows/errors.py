"""Follow errors: part of the one ``SearchError`` hierarchy, so every adapter already translates them.

Each also inherits the engine error an adapter maps to a status (``NotFound`` -> 404, ``PermissionDenied``
-> 403, anything else -> 400).
"""

from __future__ import annotations

from search.errors import NotFound, PermissionDenied, SearchError


class FollowError(SearchError):
    code = "follow_error"


class FollowInvalid(FollowError):
    """The query, the filters or the label cannot be followed (``field`` names which)."""

    code = "follow_invalid"


class FollowLimitReached(FollowError):
    code = "follow_limit_reached"


class FollowNotFound(FollowError, NotFound):
    code = "follow_not_found"


class FollowSignInRequired(FollowError, PermissionDenied):
    code = "follow_sign_in_required"
