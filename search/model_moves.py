"""Migrations that move a model from one app to another (state only, then the table renamed) keep the
permissions granted on it: its content type changes app, keeping its id (so every Permission row follows).

Used by search/migrations/0014 (synonyms from analytics) and presets/migrations/0003 (recent searches from
browse); kept small and free of model imports so those migrations never change meaning.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def _relabel(apps: Any, *, model: str, source: str, target: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    if not content_type.objects.filter(app_label=target, model=model).exists():
        content_type.objects.filter(app_label=source, model=model).update(app_label=target)


def move_content_type(*, model: str, old_app: str, new_app: str) -> migrations.RunPython:
    """A reversible ``RunPython`` that moves ``model``'s content type from ``old_app`` to ``new_app``."""
    return migrations.RunPython(
        lambda apps, schema_editor: _relabel(apps, model=model, source=old_app, target=new_app),
        lambda apps, schema_editor: _relabel(apps, model=model, source=new_app, target=old_app),
    )
