"""Fixtures of the selector tests: the MCP tests' corpus (dates, groups, drafts) and the browse tests' users."""

from __future__ import annotations

from tests.browse.conftest import staff, user  # noqa: F401 - the same fixtures, shared
from tests.mcp_api.conftest import corpus  # noqa: F401 - the same fixture, shared
