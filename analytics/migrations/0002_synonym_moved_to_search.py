"""Synonym sets now belong to ``search`` (search/migrations/0014 took the table with its rows)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0001_initial"),
        ("search", "0014_synonym"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="Synonym")]),
    ]
