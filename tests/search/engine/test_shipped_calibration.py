"""The shipped confidence table (search/engine/confidence.json), not the toy one the other tests search with: what
a small knowledge base gets from it on a fresh install (the test embedder is one the table does not know, and a
corpus this small has no vector background, so each language's lexical head judges, as for OpenAI's model).

These pin behaviour a refit must keep: a word only one item holds finds that item in every language, a made-up
word finds nothing, an item's title finds it."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from search.engine import retrieve
from search.types import SITE_THRESHOLD, RetrievalQuery
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def shipped_table(settings) -> None:
    settings.SEARCH = {**django_settings.SEARCH, "CONFIDENCE_TABLE": str(
        django_settings.BASE_DIR / "search" / "engine" / "confidence.json")}


@pytest.fixture
def corpus(shipped_table: None) -> dict[str, int]:
    items = {}
    for i in range(6):
        make_item(title=f"Tender pricing guide {i}", body=f"How to price a tender, part {i}: costs and margins.")
    for n in range(1, 9):
        items[f"en{n}"] = make_item(title=f"Zephyr{n} delivery note", body=f"zephyrword{n} shipping schedule.").pk
    for n, word in enumerate(("Quimperlé", "Vaucresson", "Ploërmel"), start=1):
        items[f"fr{n}"] = make_item(title=f"Compte rendu de la réunion {n}",
                                    body=f"La réunion s'est tenue à {word} avec les fournisseurs.",
                                    language="fr").pk
    for n, word in enumerate(("القيروان", "تطوان", "الحسيمة"), start=1):
        items[f"ar{n}"] = make_item(title=f"محضر الاجتماع رقم {n}", body=f"عقد الاجتماع في مدينة {word} مع الموردين.",
                                    language="ar").pk
    build()
    return items


def _kept(text: str) -> list[int]:
    return [h.item_id for h in retrieve(query=RetrievalQuery(text=text, threshold=SITE_THRESHOLD)).hits]


@pytest.mark.parametrize(("text", "key"), [
    ("zephyrword3", "en3"),
    ("Vaucresson", "fr2"),
    ("تطوان", "ar2"),
])
def test_a_word_only_one_item_holds_in_its_body_finds_that_item(corpus: dict[str, int], text: str, key: str) -> None:
    assert corpus[key] in _kept(text)[:1]


def test_a_made_up_word_finds_nothing(corpus: dict[str, int]) -> None:
    assert _kept("zanzibarquokka") == []
    assert _kept("قنفطوريس") == []


def test_an_items_title_finds_it_first(corpus: dict[str, int]) -> None:
    assert _kept("Zephyr5 delivery note")[:1] == [corpus["en5"]]
