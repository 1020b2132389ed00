import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from search.models import Chunk, ContentItem, Revision


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def run_import(path, *args):
    out = StringIO()
    call_command("import_content", str(path), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_beir_import_is_idempotent(tmp_path):
    # given
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [
        {"_id": "d1", "title": "Vitamin D", "text": "Vitamin D deficiency is common in winter."},
        {"_id": "d2", "title": "Sleep", "text": "Sleep duration and mortality."},
    ])
    # when
    run_import(corpus, "--format", "beir", "--publish")
    counts = (ContentItem.objects.count(), Revision.objects.count(), Chunk.objects.count())
    embedded = list(Chunk.objects.order_by("pk").values_list("pk", "embedding_model"))
    output = run_import(corpus, "--format", "beir", "--publish")
    # then
    assert counts == (2, 2, 2)
    assert (ContentItem.objects.count(), Revision.objects.count(), Chunk.objects.count()) == counts
    assert list(Chunk.objects.order_by("pk").values_list("pk", "embedding_model")) == embedded
    assert "2 unchanged" in output and "0 embedded" in output
    assert all(c.indexed and c.embedding_model for c in Chunk.objects.all())


@pytest.mark.django_db
def test_malformed_line_names_file_and_line_and_writes_nothing_of_its_batch(tmp_path):
    path = write_jsonl(tmp_path / "kb.jsonl", [
        {"id": "a", "title": "Fine", "body": "ok"},
        {"id": "b", "title": "Also fine", "body": "ok"},
        '{"id": "c", "title": ',
    ])
    with pytest.raises(CommandError) as excinfo:
        run_import(path, "--format", "jsonl", "--publish")
    assert f"{path}:3" in str(excinfo.value)
    assert ContentItem.objects.count() == 0


@pytest.mark.django_db
def test_unknown_field_is_refused_with_its_name(tmp_path):
    path = write_jsonl(tmp_path / "kb.jsonl", [{"id": "a", "title": "T", "body": "b", "titel": "typo"}])
    with pytest.raises(CommandError, match=r"kb.jsonl:1: titel: unknown field"):
        run_import(path, "--format", "jsonl")


@pytest.mark.django_db
def test_without_publish_a_changed_item_gets_a_draft_and_live_stays(tmp_path):
    path = write_jsonl(tmp_path / "kb.jsonl", [{"id": "p1", "title": "Policy", "body": "Version one."}])
    run_import(path, "--format", "jsonl", "--publish")
    write_jsonl(path, [{"id": "p1", "title": "Policy", "body": "Version two."}])
    run_import(path, "--format", "jsonl")
    item = ContentItem.objects.get(external_id="p1")
    assert item.live_revision.body == "Version one."
    assert item.latest_revision.body == "Version two."
    assert set(Chunk.objects.filter(item=item, in_live=True).values_list("text", flat=True)) == {"Version one."}
    assert set(Chunk.objects.filter(item=item, in_latest=True).values_list("text", flat=True)) == {"Version two."}


@pytest.mark.django_db
def test_new_item_without_publish_is_a_draft(tmp_path):
    path = write_jsonl(tmp_path / "kb.jsonl", [{"id": "n1", "title": "Draft", "body": "Not yet."}])
    run_import(path, "--format", "jsonl")
    item = ContentItem.objects.get(external_id="n1")
    assert item.live_revision is None and item.latest_revision is not None


@pytest.mark.django_db
def test_jsonl_fields_groups_and_superseded(tmp_path):
    path = write_jsonl(tmp_path / "kb.jsonl", [
        {"id": "old", "title": "Old policy", "body": "x", "superseded_by": "new", "visibility": "groups",
         "groups": ["legal"], "ai_keywords": ["Pricing"], "subtopic": "rates", "review_cadence_days": 90,
         "next_review_date": "2027-01-01", "language": "fr"},
        {"id": "new", "title": "New policy", "body": "y"},
    ])
    run_import(path, "--format", "jsonl", "--publish")
    old = ContentItem.objects.get(external_id="old")
    assert old.superseded_by.external_id == "new"
    assert list(old.groups.values_list("name", flat=True)) == ["legal"]
    assert old.ai_keywords == ["pricing"] and old.subtopic == "rates" and old.language == "fr"


@pytest.mark.django_db
def test_missing_superseded_target_is_an_error(tmp_path):
    path = write_jsonl(tmp_path / "kb.jsonl", [{"id": "a", "title": "A", "body": "x", "superseded_by": "ghost"}])
    with pytest.raises(CommandError, match="ghost"):
        run_import(path, "--format", "jsonl")


@pytest.mark.django_db
def test_markdown_import(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("---\ncontent_type: guide\n---\n# Writing bids\n\n## Step\n\nText.")
    run_import(tmp_path / "docs", "--format", "markdown", "--publish")
    item = ContentItem.objects.get(external_id="guide")
    assert item.title == "Writing bids" and item.content_type == "guide"
    assert Chunk.objects.filter(item=item, toc_path__contains="Step").exists()
