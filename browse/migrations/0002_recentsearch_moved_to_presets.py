"""Recent searches now belong to ``presets`` (presets/migrations/0003 took the table with its rows)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("browse", "0001_initial"),
        ("presets", "0003_recentsearch"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="RecentSearch")]),
    ]
