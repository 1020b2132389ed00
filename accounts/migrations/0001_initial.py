"""Profiles and API keys move here from ``search``: the engine never reads them (a surface turns its caller into a
``Principal``). The models' state moves without touching their rows; the tables are then renamed
``search_apikey`` → ``accounts_apikey`` (with its groups table) and ``search_userprofile`` →
``accounts_userprofile``, and the content types change app so granted permissions follow."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from search.model_moves import move_content_type


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("search", "0014_synonym"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiKey',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100)),
                        ('prefix', models.CharField(max_length=16, unique=True)),
                        ('key_hash', models.CharField(max_length=64)),
                        ('all_content', models.BooleanField(default=True, help_text='Read everything; otherwise only `groups`.')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('expires_at', models.DateTimeField(blank=True, null=True)),
                        ('revoked_at', models.DateTimeField(blank=True, null=True)),
                        ('last_used_at', models.DateTimeField(blank=True, null=True)),
                        ('groups', models.ManyToManyField(blank=True, to='auth.group')),
                    ],
                    options={"db_table": "search_apikey"},
                ),
                migrations.CreateModel(
                    name='UserProfile',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('primary_focus', models.CharField(blank=True, choices=[('bid_writing', 'Bid writing'), ('account_management', 'Account management'), ('marketing', 'Marketing')], max_length=30)),
                        ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='profile', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={"db_table": "search_userprofile"},
                ),
            ],
        ),
        move_content_type(model="apikey", old_app="search", new_app="accounts"),
        move_content_type(model="userprofile", old_app="search", new_app="accounts"),
        migrations.AlterModelTable(name="apikey", table=None),
        migrations.AlterModelTable(name="userprofile", table=None),
    ]
