"""The embedding backfill fanned out in batches: priority, idempotent batches, one wave at a time, progress."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone

from search.models import Chunk, ItemRead
from search.services import fanout, vector_index
from search.services import spaces as space_writes
from tests.factories import make_item

pytestmark = pytest.mark.django_db


def pending_ids() -> set[int]:
    return set(vector_index.embeddings_pending(space_writes.active_space().model).values_list("pk", flat=True))


class Wave:
    """What a fan-out queued: (wave id, chunk ids) per batch, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[int]]] = []

    def send(self, wave_id: str, ids: list[int]) -> None:
        self.sent.append((wave_id, ids))

    @property
    def batches(self) -> list[list[int]]:
        return [ids for _, ids in self.sent]

    def run(self, index: int) -> tuple[int, bool]:
        wave_id, ids = self.sent[index]
        return fanout.fanout_batch(ids, wave_id, enqueue=self.send)


def test_a_wave_hands_out_the_most_read_then_the_newest_items_first() -> None:
    now = timezone.now()
    older = make_item(title="Older", body="Older text.", updated_at=now - timedelta(days=10))
    read = make_item(title="Read a lot", body="Read text.", updated_at=now - timedelta(days=30))
    newest = make_item(title="Newest", body="Newest text.", updated_at=now)
    for name in ("ana", "bo"):
        ItemRead.objects.create(user=get_user_model().objects.create_user(name), item=read)

    wave = Wave()
    assert fanout.fanout_start(wave.send, batch_size=1) == 3

    items = [Chunk.objects.get(pk=batch[0]).item_id for batch in wave.batches]
    assert items == [read.pk, newest.pk, older.pk]
    assert fanout.fanout_start(wave.send) == 0 and len(wave.batches) == 3  # one wave at a time
    progress = fanout.fanout_progress()
    assert (progress.batches, progress.batches_done, progress.pending, progress.total) == (3, 0, 3, 3)


def test_batches_embed_one_by_one_and_a_batch_delivered_twice_changes_nothing() -> None:
    for i in range(5):
        make_item(title=f"Item {i}", body=f"Text number {i}.")
    wave = Wave()
    assert fanout.fanout_start(wave.send, batch_size=2) == 3
    queued = wave.batches

    # the first batch: its chunks get vectors (searchable by meaning), the others are still waiting
    assert wave.run(0) == (2, False)
    assert pending_ids() == set(queued[1]) | set(queued[2])
    vectors = dict(Chunk.objects.filter(pk__in=queued[0]).values_list("pk", "embedding_hash"))
    # delivered again (its worker died before acknowledging it): nothing is embedded or counted twice
    assert wave.run(0) == (0, False)
    assert dict(Chunk.objects.filter(pk__in=queued[0]).values_list("pk", "embedding_hash")) == vectors
    progress = fanout.fanout_progress()
    assert (progress.batches_done, progress.embedded, progress.pending) == (1, 2, 3)
    assert progress.chunks_per_s and progress.eta_s is not None and "ETA" in progress.summary()

    assert wave.run(1) == (2, False)
    # the last batch ends the wave, which embedded something: a next wave may be planned
    assert wave.run(2) == (1, True)
    assert not pending_ids()
    assert fanout.fanout_progress().batches == 0
    # nothing left: the next wave plans nothing
    assert fanout.fanout_start(wave.send) == 0 and len(wave.sent) == 3


def test_only_a_window_of_batches_is_queued_and_each_finished_one_queues_the_next(settings) -> None:  # type: ignore[no-untyped-def]
    settings.EMBEDDING_FANOUT_WINDOW = 2
    for i in range(5):
        make_item(title=f"Item {i}", body=f"Text number {i}.")
    wave = Wave()
    assert fanout.fanout_start(wave.send, batch_size=1) == 5
    assert len(wave.sent) == 2  # an index build queued now waits behind two batches, not five
    wave.run(0)
    wave.run(0)  # a redelivery moves the window no further
    assert len(wave.sent) == 3
    index = 1
    while index < len(wave.sent):
        wave.run(index)
        index += 1
    assert len(wave.sent) == 5 and not pending_ids() and not fanout.fanout_in_flight()


def test_a_late_batch_of_an_earlier_wave_counts_for_no_wave() -> None:
    for i in range(2):
        make_item(title=f"Item {i}", body=f"Text number {i}.")
    first = Wave()
    fanout.fanout_start(first.send, batch_size=1)
    cache.delete(fanout.WAVE_KEY)  # the first wave expired (say its messages were lost)
    second = Wave()
    assert fanout.fanout_start(second.send, batch_size=1) == 2
    assert first.run(0) == (1, False)  # embeds what it can, but the second wave is not advanced
    assert fanout.fanout_progress().batches_done == 0
    assert second.run(0) == (0, False) and second.run(1) == (1, True)


def test_a_plan_that_fails_leaves_no_wave_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        make_item(title=f"Item {i}", body=f"Text number {i}.")
    sent: list[list[int]] = []

    def broker_dies_after_one(wave_id: str, ids: list[int]) -> None:
        if sent:
            raise ConnectionError("broker gone")
        sent.append(ids)

    with pytest.raises(ConnectionError):
        fanout.fanout_start(broker_dies_after_one, batch_size=1)
    assert fanout.fanout_progress().batches == 1  # the wave is the one batch that reached the queue

    cache.delete(fanout.WAVE_KEY)
    monkeypatch.setattr(vector_index, "embeddings_pending_by_priority", lambda model: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        fanout.fanout_start(Wave().send)
    assert not fanout.fanout_in_flight()  # planning failed: nothing claims to be in flight


def test_a_batch_whose_chunks_were_replaced_embeds_only_what_still_exists() -> None:
    item = make_item(title="Changing", body="First body.")
    wave = Wave()
    fanout.fanout_start(wave.send)
    from search.services import content

    content.item_save_revision(item=item, title="Changing", body="A second body entirely.", summary="", publish=True)
    assert wave.run(0)[0] == 0  # the old revision's chunks are no longer current
    assert pending_ids()  # the new revision's chunk waits for the next wave


@pytest.fixture
def eager_celery():  # type: ignore[no-untyped-def]
    """Tasks run where they are sent, as if a worker took each at once."""
    from config.celery import app

    app.conf.task_always_eager = True
    yield app
    app.conf.task_always_eager = False


def test_backfill_embeddings_fan_out_follows_the_workers_to_the_end(eager_celery) -> None:  # type: ignore[no-untyped-def]
    from django.core.management import call_command

    for i in range(3):
        make_item(title=f"Item {i}", body=f"Text number {i}.")
    out, err = io.StringIO(), io.StringIO()
    call_command("backfill_embeddings", "--fan-out", stdout=out, stderr=err)
    assert "3 chunk(s) embedded by the workers" in out.getvalue()
    assert not pending_ids()
    out = io.StringIO()
    call_command("backfill_embeddings", "--fan-out", stdout=out, stderr=io.StringIO())
    assert "nothing to fan out: 0 of 3 chunks lack a vector" in out.getvalue()


def test_backfill_embeddings_fan_out_says_when_no_worker_takes_the_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.core.management import CommandError, call_command

    from search import tasks

    sent: list[list[int]] = []
    monkeypatch.setattr(tasks.embeddings_batch_task, "apply_async", lambda args, **_: sent.append(args[0]))
    make_item(title="Waiting", body="Nobody embeds this.")
    with pytest.raises(CommandError, match="No batch finished for 1 s.*Are Celery workers running"):
        call_command("backfill_embeddings", "--fan-out", "--stall-s", "1", stdout=io.StringIO(), stderr=io.StringIO())
    assert len(sent) == 1 and pending_ids() == set(sent[0])


def test_the_backfill_task_fans_out_from_the_threshold(settings, eager_celery) -> None:  # type: ignore[no-untyped-def]
    from search.tasks import embeddings_backfill_task

    for i in range(3):
        make_item(title=f"Item {i}", body=f"Text number {i}.")
    settings.EMBEDDING_FANOUT_MIN_CHUNKS = 2
    assert "3 chunks in 1 batches for the workers" in embeddings_backfill_task.apply().get()
    assert not pending_ids()
    make_item(title="One more", body="A single new chunk.")
    assert "1 item(s) touched" in embeddings_backfill_task.apply().get()  # below the threshold: embedded here


def test_a_build_with_a_backlog_is_searchable_by_words_first_and_fans_the_embedding_out(
    settings, eager_celery, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    from search.models import IndexState
    from search.services import indexing
    from search.tasks import index_build_task

    for i in range(3):
        make_item(title=f"Item {i}", body=f"Text number {i}.")
    a_minute_ago = timezone.now() - timedelta(minutes=1)
    IndexState.objects.update_or_create(pk=1, defaults={"dirty": True, "dirty_since": a_minute_ago})
    settings.EMBEDDING_FANOUT_MIN_CHUNKS = 2
    builds: list[bool] = []
    real_rebuild = indexing.index_rebuild
    monkeypatch.setattr(indexing, "index_rebuild", lambda **kw: builds.append(kw["embed"]) or real_rebuild(**kw))

    assert index_build_task.apply().get() == "built"
    assert builds == [False]  # the build itself embedded nothing ...
    assert not pending_ids()  # ... the fanned-out batches did
