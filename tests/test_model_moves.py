"""Models that moved between apps keep their rows: a state-only move, then the table renamed.

- recent searches: browse → presets (presets/migrations/0003, browse/migrations/0002);
- synonym sets: analytics → search (search/migrations/0014, analytics/migrations/0002);
- API keys (with their groups) and user profiles: search → accounts (accounts/migrations/0001,
  search/migrations/0015).
"""

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone


def migrate(targets: list[tuple[str, str | None]]) -> Any:
    """Migrate to ``targets`` (an app's name with None: none of its migrations) and return their models."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def tables() -> set[str]:
    return set(connection.introspection.table_names())


@pytest.mark.django_db(transaction=True)
def test_recent_searches_keep_their_rows_when_they_move_to_presets() -> None:
    user = get_user_model().objects.create_user("mover", "m@example.com", "pw-mover-1")
    try:
        # given recent searches stored the old way (browse's table)
        old = migrate([("presets", "0002_system_presets"), ("browse", "0001_initial")])
        assert "browse_recentsearch" in tables() and "presets_recentsearch" not in tables()
        old.get_model("browse", "RecentSearch").objects.create(
            user_id=user.pk, query="tender pricing", used_at=timezone.now()
        )
        # when the move runs
        new = migrate([("presets", "0003_recentsearch"), ("browse", "0002_recentsearch_moved_to_presets")])
        # then the same row is in presets' table, and browse has none left
        assert "presets_recentsearch" in tables() and "browse_recentsearch" not in tables()
        rows = new.get_model("presets", "RecentSearch").objects.values_list("user_id", "query")
        assert list(rows) == [(user.pk, "tender pricing")]
    finally:
        migrate(latest())  # leave the schema as every other test expects it


@pytest.mark.django_db(transaction=True)
def test_synonym_sets_keep_their_rows_when_they_move_to_search() -> None:
    # (users are created while the schema is current: a new user's profile lives in accounts' table)
    editor = get_user_model().objects.create_user("editor", "e@example.com", "pw-editor-1")
    try:
        # given a synonym set stored the old way (analytics' table)
        old = migrate([("search", "0013_suggestion_vocabulary"), ("analytics", "0001_initial")])
        assert "analytics_synonym" in tables() and "search_synonym" not in tables()
        old.get_model("analytics", "Synonym").objects.create(terms=["bid", "tender"], one_way=False, language="")
        # and an editors' group allowed to add synonym sets in the admin
        editors = Group.objects.create(name="synonym editors")
        editors.permissions.add(Permission.objects.get(content_type__app_label="analytics", codename="add_synonym"))
        # when the move runs
        new = migrate([("search", "0014_synonym"), ("analytics", "0002_synonym_moved_to_search")])
        # then the same set is in the engine's table
        assert "search_synonym" in tables() and "analytics_synonym" not in tables()
        assert list(new.get_model("search", "Synonym").objects.values_list("terms", flat=True)) == [["bid", "tender"]]
        # and the group keeps its permission, now on the model's new app
        editor.groups.add(editors)
        assert editor.has_perm("search.add_synonym")
    finally:
        migrate(latest())


@pytest.mark.django_db(transaction=True)
def test_api_keys_and_profiles_keep_their_rows_groups_and_permissions_when_they_move_to_accounts() -> None:
    user = get_user_model().objects.create_user("keeper", "k@example.com", "pw-keeper-1")
    team = Group.objects.create(name="bid team")
    try:
        # given a group-scoped key and a profile stored the old way (search's tables)
        old = migrate([("search", "0014_synonym"), ("accounts", None)])
        assert {"search_apikey", "search_apikey_groups", "search_userprofile"} <= tables()
        key = old.get_model("search", "ApiKey").objects.create(
            name="agent", prefix="kb_0123abcd", key_hash="0" * 64, all_content=False
        )
        key.groups.add(team.pk)
        old.get_model("search", "UserProfile").objects.update_or_create(
            user_id=user.pk, defaults={"primary_focus": "marketing"}
        )
        # and key managers allowed to revoke keys in the admin
        managers = Group.objects.create(name="key managers")
        managers.permissions.add(Permission.objects.get(content_type__app_label="search", codename="change_apikey"))
        # when the move runs
        new = migrate([("accounts", "0001_initial"), ("search", "0015_accounts_moved_out")])
        # then the same rows are in accounts' tables, the key still scoped to its group
        assert {"accounts_apikey", "accounts_apikey_groups", "accounts_userprofile"} <= tables()
        assert not {"search_apikey", "search_apikey_groups", "search_userprofile"} & tables()
        moved = new.get_model("accounts", "ApiKey").objects.get(prefix="kb_0123abcd")
        assert (moved.name, moved.all_content) == ("agent", False)
        assert list(moved.groups.values_list("name", flat=True)) == ["bid team"]
        profile = new.get_model("accounts", "UserProfile").objects.get(user_id=user.pk)
        assert profile.primary_focus == "marketing"
        # and the managers keep their permission, now on the model's new app
        user.groups.add(managers)
        assert get_user_model().objects.get(pk=user.pk).has_perm("accounts.change_apikey")
    finally:
        migrate(latest())
