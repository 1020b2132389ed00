"""The five system presets: immutable, created by migration 0002, shown first in every preset list.

Parameters are written in the canonical form of ``presets/params.py`` (a test checks it).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

SYSTEM_PRESETS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    # (system_key, name, params)
    ("overdue-review", "Overdue for review", {"overdue_review": "1"}),
    ("case-studies", "Case studies", {"content_type": ["case_study"]}),
    ("qa-library", "Q&A library", {"content_type": ["qa"]}),
    # A rolling quarter: the engine filters on age in days, so the window never empties on the 1st.
    ("updated-this-quarter", "Updated this quarter", {"freshness": "90"}),
    ("policies", "Policies", {"content_type": ["policy"]}),
)


def system_presets_ensure(preset_model: Any = None) -> None:
    """Create (or put back) the system presets. Idempotent.

    The data migration calls it with the historical model; tests whose database was flushed
    (``transaction=True``) call it with no argument.
    """
    if preset_model is None:
        from presets.models import Preset as preset_model
    now = timezone.now()
    for position, (key, name, params) in enumerate(SYSTEM_PRESETS):
        preset_model.objects.update_or_create(
            system_key=key,
            defaults={
                "name": name,
                "params": params,
                "is_system": True,
                "owner": None,
                "position": position,
                "deleted_at": None,
            },
            create_defaults={
                "name": name,
                "params": params,
                "is_system": True,
                "owner": None,
                "position": position,
                "created_at": now,
            },
        )
