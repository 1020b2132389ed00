"""Recent searches move here from ``browse`` (the searches a user keeps live together): the model's state
moves without touching its rows, then its table is renamed ``browse_recentsearch`` → ``presets_recentsearch``."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from search.model_moves import move_content_type


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("presets", "0002_system_presets"),
        ("browse", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RecentSearch",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("query", models.CharField(max_length=200)),
                        ("used_at", models.DateTimeField()),
                        ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                   related_name="recent_searches", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "browse_recentsearch",
                        "ordering": ["-used_at", "-id"],
                        "indexes": [models.Index(fields=["user", "-used_at"], name="recent_search_user_used")],
                        "constraints": [models.UniqueConstraint(fields=("user", "query"), name="recent_search_unique")],
                    },
                ),
            ],
        ),
        move_content_type(model="recentsearch", old_app="browse", new_app="presets"),
        migrations.AlterModelTable(name="recentsearch", table=None),
    ]
