"""Read-your-writes on a real replica: whoever just changed content reads from the primary, everyone else
may still be served by a replica that has not replayed the change (its replay is paused here, so "not yet"
is certain rather than a race)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from search import replicas
from search.engine import retrieve
from search.models import ContentItem
from search.principal import ANONYMOUS, principal_for_user
from search.replicas import freshness
from search.services import content
from search.signals import database_read
from search.types import RetrievalQuery
from tests.factories import build, make_item
from tests.support.replica import Replica, replica_db

pytestmark = replica_db

PRESETS = "query { presets { name } }"
PRESET_CREATE = """mutation($name: String!) {
  presetCreate(input: {name: $name, params: {domain: ["harbour"]}}) { preset { name } errors { code } } }"""


@pytest.fixture
def routed() -> Iterator[list[str]]:
    """The database of every read-only call made while the test runs, in order."""
    seen: list[str] = []

    def record(sender: Any, *, alias: str, **kwargs: Any) -> None:
        seen.append(alias)

    database_read.connect(record, weak=False, dispatch_uid="tests.replicas.routed")
    yield seen
    database_read.disconnect(dispatch_uid="tests.replicas.routed")


@pytest.fixture
def editor_client() -> Client:
    editor = get_user_model().objects.create_user("editor", password="pw", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(editor)
    return client


def _paused(replica: Replica, settings: Any) -> None:
    """The replica stops replaying (what it has stays readable) and stays eligible however far behind it falls:
    only read-your-writes can send a read to the primary."""
    settings.REPLICA_MAX_LAG_S = 3600.0
    make_item(title="Harbour crane manual", body="How the harbour cranes lift containers.")
    build()
    replica.wait_caught_up()
    replicas.replicas_probe()
    replica.pause_replay()


def _admin_add(client: Client, **fields: str) -> Any:
    """Post Django admin's "add content item" form as a browser would (inline management forms included)."""
    page = client.get("/admin/search/contentitem/add/").content.decode()
    data: dict[str, str] = {
        name: value
        for name, value in re.findall(r'name="([^"]+-(?:TOTAL|INITIAL|MIN_NUM|MAX_NUM)_FORMS)"[^>]*value="(\d*)"', page)
    }
    data.update({"content_type": "article", "language": "en", "visibility": "public",
                 "governance_review_status": "ok", "publish_now": "on", **fields})
    return client.post("/admin/search/contentitem/add/", data)


def _titles(result: Any) -> list[str]:
    return [hit.title for hit in result.hits]


def test_an_editor_finds_what_they_saved_in_the_admin_while_visitors_read_the_replica(
    replica: Replica, settings: Any, editor_client: Client, routed: list[str]
) -> None:
    # given: a replica that has stopped replaying
    _paused(replica, settings)
    # when: an editor adds and publishes an item in the admin, and the index build (a worker's job) runs
    response = _admin_add(editor_client, title="Quay bollard inspection", body="Bollards on the quay are inspected.",
                          external_id="quay-bollards", slug="quay-bollards")
    assert response.status_code == 302, response.content.decode()[:2000]
    build()
    routed.clear()
    # then: the editor reads from the primary (item page and search find it) ...
    assert editor_client.get("/items/quay-bollards").status_code == 200
    found = editor_client.post("/api/search", data={"query": "bollard inspection"}, content_type="application/json")
    assert [hit["title"] for hit in found.json()["results"]] == ["Quay bollard inspection"]
    assert routed and set(routed) == {"default"}
    # ... and so does any other web process (the mark is in the shared cache, not only in this process)
    freshness._local_marks.clear()
    routed.clear()
    assert editor_client.get("/items/quay-bollards").status_code == 200
    assert set(routed) == {"default"}
    # ... while an anonymous visitor is served by the replica, which has not replayed the item yet
    routed.clear()
    assert Client().get("/items/quay-bollards").status_code == 404
    assert retrieve(query=RetrievalQuery(text="bollard inspection", principal=ANONYMOUS)).total == 0
    assert set(routed) == {"replica_1"}
    # and once the replica has caught up, the visitor finds it there too
    replica.resume_replay()
    replica.wait_caught_up()
    assert Client().get("/items/quay-bollards").status_code == 200


def test_a_preset_saved_through_graphql_is_listed_to_its_owner_at_once(
    replica: Replica, settings: Any, editor_client: Client, routed: list[str]
) -> None:
    # given: a paused replica, and an editor whose preset listing reads from it
    _paused(replica, settings)
    listed = editor_client.post("/graphql", data={"query": PRESETS}, content_type="application/json")
    assert listed.json()["data"]["presets"] is not None
    assert routed[-1] == "replica_1"
    # when: the editor saves a preset (a mutation: the primary)
    created = editor_client.post("/graphql", data={"query": PRESET_CREATE, "variables": {"name": "Harbour only"}},
                                 content_type="application/json")
    assert created.json()["data"]["presetCreate"]["errors"] == []
    # then: the next listing (a GraphQL query) reads from the primary and shows it
    routed.clear()
    listed = editor_client.post("/graphql", data={"query": PRESETS}, content_type="application/json")
    assert "Harbour only" in [p["name"] for p in listed.json()["data"]["presets"]]
    assert routed == ["default"]


def test_a_write_outside_any_request_marks_its_author(replica: Replica, settings: Any, routed: list[str]) -> None:
    # given: a paused replica and an author
    _paused(replica, settings)
    author = get_user_model().objects.create_user("author", is_staff=True)
    principal = principal_for_user(author)
    # when: a content service saves and publishes on the author's behalf (a task, a shell, an import)
    item = ContentItem.objects.create(external_id="gantry", slug="gantry", updated_at=timezone.now())
    content.item_save_revision(item=item, title="Gantry crane rails", body="Rails of the gantry crane.",
                               author=author, publish=True)
    build()
    routed.clear()
    # then: the author's searches see it (primary); an anonymous search is served by the paused replica
    assert _titles(retrieve(query=RetrievalQuery(text="gantry rails", principal=principal))) == ["Gantry crane rails"]
    assert retrieve(query=RetrievalQuery(text="gantry rails", principal=ANONYMOUS)).total == 0
    assert routed == ["default", "replica_1"]


def test_the_window_closes_after_read_your_writes_s(replica: Replica, settings: Any, routed: list[str]) -> None:
    # given: an author who wrote with a one-second window
    settings.READ_YOUR_WRITES_S = 1.0
    author = get_user_model().objects.create_user("brief")
    principal = principal_for_user(author)
    replicas.mark_written(keys=replicas.principal_keys(principal))
    retrieve(query=RetrievalQuery(text="harbour", principal=principal))
    # when: the window has passed
    time.sleep(2.1)
    retrieve(query=RetrievalQuery(text="harbour", principal=principal))
    # then: the author's reads are back on the replica
    assert routed == ["default", "replica_1"]
