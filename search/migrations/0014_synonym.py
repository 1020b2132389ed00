"""Synonym sets move here from ``analytics``: they are a ranking input, read by the engine at query time.
The model's state moves without touching its rows; its table is renamed ``analytics_synonym`` → ``search_synonym``."""

import django.contrib.postgres.fields
import django.utils.timezone
from django.db import migrations, models

from search.model_moves import move_content_type


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("search", "0013_suggestion_vocabulary"),
        ("analytics", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Synonym",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("language", models.CharField(blank=True, help_text="language code (en, fr, …); blank = all", max_length=16)),
                        ("terms", django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=200), help_text="comma-separated words or phrases; one-way: the first expands", size=None)),
                        ("one_way", models.BooleanField(default=False, help_text="only the first word expands to the others")),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={"ordering": ["language", "id"], "db_table": "analytics_synonym"},
                ),
            ],
        ),
        move_content_type(model="synonym", old_app="analytics", new_app="search"),
        migrations.AlterModelTable(name="synonym", table=None),
    ]
