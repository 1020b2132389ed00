"""Preset errors: part of the one ``SearchError`` hierarchy, so every adapter already translates them.

Each subclass also inherits the engine error an adapter maps to an HTTP status (``NotFound`` -> 404,
``PermissionDenied`` -> 403, everything else -> 400); ``code`` is the stable machine-readable name.
"""

from __future__ import annotations

from search.errors import NotFound, PermissionDenied, SearchError


class PresetError(SearchError):
    code = "preset_error"


class PresetNameInvalid(PresetError):
    """The name is empty, too long or holds control characters (``field="name"``)."""

    code = "preset_name_invalid"


class PresetNameTaken(PresetError):
    """Another live preset of the same owner (or a system preset) already has this name."""

    code = "preset_name_taken"


class PresetParamsInvalid(PresetError):
    """A key is not one of the filters, or its value is not valid (``field="params.<key>"``)."""

    code = "preset_params_invalid"


class PresetLimitReached(PresetError):
    code = "preset_limit_reached"


class PresetNotFound(PresetError, NotFound):
    code = "preset_not_found"


class PresetImmutable(PresetError, PermissionDenied):
    """System presets cannot be renamed, deleted or restored."""

    code = "preset_immutable"


class PresetSignInRequired(PresetError, PermissionDenied):
    """Anonymous callers may read system presets only; saving needs an account."""

    code = "preset_sign_in_required"


class PresetRequestInvalid(PresetError):
    """The request body is not the JSON the endpoint expects."""

    code = "invalid_request"
