"""The five system presets (defined in presets/system.py)."""

from django.db import migrations


def create_system_presets(apps, schema_editor):
    from presets.system import system_presets_ensure

    system_presets_ensure(apps.get_model("presets", "Preset"))


def remove_system_presets(apps, schema_editor):
    from presets.system import SYSTEM_PRESETS

    Preset = apps.get_model("presets", "Preset")
    Preset.objects.filter(system_key__in=[key for key, _, _ in SYSTEM_PRESETS]).delete()


class Migration(migrations.Migration):
    dependencies = [("presets", "0001_initial")]

    operations = [migrations.RunPython(create_system_presets, remove_system_presets)]
