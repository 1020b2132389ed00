"""API keys and user profiles now belong to ``accounts`` (accounts/migrations/0001 took the tables with their
rows)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0014_synonym"),
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="userprofile", name="user"),
                migrations.DeleteModel(name="ApiKey"),
                migrations.DeleteModel(name="UserProfile"),
            ],
        ),
    ]
