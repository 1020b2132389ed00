"""Summaries: the local extractive summary, and the OpenAI path through the real client and a local fake."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from search.models import ContentItem, JobRun
from search.services import jobs, summaries
from search.services.summaries import SummaryUnavailable, summary_extractive
from tests.factories import make_item
from tests.search.fake_openai import FakeOpenAI, serving

BODY = """# Pricing a tender

Pricing a tender starts from a clear cost model for every line of the offer.

## Method

- List every cost line with its **owner**.
- Compare each cost line with the [budget](https://example.com/budget).

The cost model must be checked by a second person before the deadline.
Margins are set after the cost model is complete, never before.

| Line | Cost |
|------|------|
| Staff | 100 |

```python
print("not prose")
```

Weather was nice.
"""


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with serving() as server:
        yield server


def test_extractive_summary_picks_representative_prose_in_order() -> None:
    # when
    text = summary_extractive(BODY)

    # then prose only (no Markdown, table or code), leading with the opening sentence, bounded
    assert text.startswith("Pricing a tender starts from a clear cost model")
    assert text.count("cost") >= 3  # the sentences that share the body's main terms
    assert "owner." in text  # list items become sentences without their markers
    assert not any(mark in text for mark in ("#", "|", "**", "](", "print("))
    assert "Weather" not in text
    assert len(text) <= summaries.SUMMARY_MAX_CHARS
    assert summary_extractive(BODY) == text  # deterministic


def test_extractive_summary_is_bounded_and_handles_empty_bodies() -> None:
    long_sentence = "Tender " + " ".join(["pricing"] * 200) + "."
    assert len(summary_extractive(long_sentence)) <= summaries.SUMMARY_MAX_CHARS
    assert summary_extractive(long_sentence).endswith("…")
    assert summary_extractive("") == ""
    assert summary_extractive("# Only a heading\n\n| a | b |") == ""


def test_extractive_summary_in_french() -> None:
    body = (
        "Le résumé exécutif est souvent la première page lue par le décideur. "
        "Il doit convaincre que le candidat a compris le besoin de l'acheteur. Il fait une page."
    )
    assert summary_extractive(body).startswith("Le résumé exécutif est souvent")


@pytest.fixture
def openai_settings(settings, fake_openai: FakeOpenAI):
    settings.OPENAI_API_KEY = "sk-test"
    settings.OPENAI_BASE_URL = fake_openai.url
    settings.OPENAI_SUMMARY_MODEL = "gpt-test-mini"
    settings.OPENAI_TIMEOUT_S = 2.0
    settings.OPENAI_MAX_RETRIES = 0
    return settings


@pytest.mark.django_db
def test_openai_summary_through_the_real_client(openai_settings, fake_openai: FakeOpenAI) -> None:
    # given a published item with a newer draft, OpenAI configured
    from search.services import content

    item = make_item(title="Pricing a tender", body=BODY)
    content.item_save_revision(item=item, title="Pricing a tender", body=BODY + "\nMore.", publish=False)
    item.refresh_from_db()
    revisions_before = item.revisions.count()

    # when
    outcome = summaries.item_summary_regenerate(item_id=item.pk)

    # then both current revisions carry the model's summary, in place
    item = ContentItem.objects.select_related("live_revision", "latest_revision").get(pk=item.pk)
    assert outcome.provider == "openai" and outcome.revisions_updated == 2
    assert item.live_revision.summary == item.latest_revision.summary == fake_openai.summary_text
    assert item.revisions.count() == revisions_before
    assert item.live_revision_id != item.latest_revision_id  # nothing was published
    path, request = fake_openai.requests[0]
    assert path == "/v1/chat/completions"
    assert request["model"] == "gpt-test-mini"
    assert "Pricing a tender" in request["messages"][1]["content"]
    # the revision hash follows the new summary, so an unchanged admin save makes no new revision
    _, changed = content.item_save_revision(
        item=item, title="Pricing a tender", body=BODY + "\nMore.", summary=fake_openai.summary_text
    )
    assert changed is False
    # and the quality score now counts the summary
    assert item.quality_breakdown["summary"] == 20


@pytest.mark.django_db
def test_openai_failure_raises_summary_unavailable_and_keeps_the_summary(
    openai_settings,
    fake_openai: FakeOpenAI,
) -> None:
    # given a server answering 500
    item = make_item(title="T", body=BODY, summary="Kept.")
    fake_openai.fail_status = 500

    # when / then
    with pytest.raises(SummaryUnavailable, match="InternalServerError"):
        summaries.item_summary_regenerate(item_id=item.pk)
    item.refresh_from_db()
    assert item.live_revision.summary == "Kept."
    assert len(fake_openai.requests) == 1  # OPENAI_MAX_RETRIES=0: bounded


@pytest.mark.django_db
def test_task_retries_provider_errors_with_the_items_not_done(
    openai_settings,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given two items and a provider that fails once, on the second item
    from search.tasks import summaries_task

    first = make_item(title="First", body=BODY)
    second = make_item(title="Second", body=BODY)
    original = summaries.item_summary_regenerate
    calls: list[int] = []

    def flaky(*, item_id: int, provider: str = "auto") -> summaries.SummaryOutcome:
        calls.append(item_id)
        if len(calls) == 2:
            raise SummaryUnavailable("OpenAI summary failed: APIConnectionError")
        return original(item_id=item_id, provider=provider)  # type: ignore[arg-type]

    monkeypatch.setattr(summaries, "item_summary_regenerate", flaky)

    # when the task runs (in-process; Celery re-runs an eager retry at once)
    summaries_task.apply(args=[[first.pk, second.pk]])

    # then the retry took only the item not done, and both have summaries
    assert calls == [first.pk, second.pk, second.pk]
    for item in (first, second):
        item.refresh_from_db()
        assert item.live_revision.summary == fake_openai.summary_text
    runs = list(JobRun.objects.filter(job=jobs.SUMMARIES).order_by("pk"))
    assert [r.status for r in runs] == [JobRun.Status.FAILED, JobRun.Status.SUCCEEDED]
    assert "SummaryUnavailable" in runs[0].error


@pytest.mark.django_db
def test_local_provider_without_openai(settings) -> None:
    # given no OpenAI key
    settings.OPENAI_API_KEY = ""
    item = make_item(title="T", body=BODY)

    # when
    outcome = summaries.item_summary_regenerate(item_id=item.pk)
    again = summaries.item_summary_regenerate(item_id=item.pk)

    # then an extractive summary, written once (idempotent)
    item.refresh_from_db()
    assert outcome.provider == "local" and outcome.revisions_updated == 1
    assert again.revisions_updated == 0
    assert item.live_revision.summary == summary_extractive(BODY)


@pytest.mark.django_db
def test_summarize_command(settings) -> None:
    # given one item with a summary and one without
    settings.OPENAI_API_KEY = ""
    has = make_item(title="Has", body=BODY, summary="Human written.")
    lacks = make_item(title="Lacks", body=BODY)
    out = StringIO()

    # when run without options: only the missing one
    call_command("summarize", stdout=out, stderr=StringIO())

    # then
    has.refresh_from_db()
    lacks.refresh_from_db()
    assert has.live_revision.summary == "Human written."
    assert lacks.live_revision.summary == summary_extractive(BODY)
    assert "1 item(s) processed (1 local); 1 revision(s) updated" in out.getvalue()
    assert JobRun.objects.get(job=jobs.SUMMARIES).items_touched == 1

    # and --item regenerates a chosen one; a missing id or openai without a key says how to fix it
    call_command("summarize", "--item", str(has.pk), stdout=StringIO(), stderr=StringIO())
    has.refresh_from_db()
    assert has.live_revision.summary == summary_extractive(BODY)
    with pytest.raises(CommandError, match="No item with id 999999"):
        call_command("summarize", "--item", "999999", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="OPENAI_API_KEY"):
        call_command("summarize", "--provider", "openai", stdout=StringIO(), stderr=StringIO())
