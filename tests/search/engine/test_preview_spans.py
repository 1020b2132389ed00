"""The preview's budget steps and the spans it marks in titles (search.engine.preview)."""

from __future__ import annotations

from typing import Any

import pytest

from search.engine.preview import preview_search, typed_words, word_spans
from search.principal import ANONYMOUS
from search.types import Span
from tests.factories import build, make_item

pytestmark = pytest.mark.django_db


def test_a_preview_step_past_its_budget_is_cancelled_and_the_session_is_left_as_it_was(db: Any) -> None:
    from django.db import connection

    from search.engine.preview import _within_budget
    from search.engine.sql import Fragment

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout'), current_setting('enable_bitmapscan')")
        before = cursor.fetchone()
    # a statement past the budget: cancelled by PostgreSQL, None instead of an error
    assert _within_budget(Fragment("SELECT pg_sleep(1)"), 50) is None
    # one within it: its rows; a per-statement setting applies to it only
    assert _within_budget(
        Fragment("SELECT current_setting('enable_bitmapscan')"), 5000, setting=("enable_bitmapscan", "off")
    ) == [("off",)]
    with connection.cursor() as cursor:  # this test's transaction goes on with its own settings
        cursor.execute("SELECT current_setting('statement_timeout'), current_setting('enable_bitmapscan')")
        assert cursor.fetchone() == before
        cursor.execute("SELECT pg_sleep(0.1)")  # no longer under a 50 ms budget


@pytest.mark.parametrize(
    ("text", "typed", "marked"),
    [
        ("Un ÉCRIT, deux écrits", "ecrit", ["ÉCRIT", "écrit"]),  # accents and case folded, every occurrence
        ("Un ÉCRIT", "Écrit", ["ÉCRIT"]),
        ("e\u0301crit", "ecrit", ["e\u0301crit"]),  # a decomposed accent stays inside the mark
        ("crite\u0301rium", "crite", ["crite\u0301"]),  # ... also after the last letter
        ("دليل الكِتَابةِ", "كتاب", ["كِتَاب"]),  # harakat ignored, kept inside the mark
        ("A \ufb01le", "fil", ["\ufb01l"]),  # a ligature folds to two letters: the mark takes it whole
        ("50% deposit, 50 %", "50%", ["50", "50"]),  # words only: the % is not one
        ("aaaa", "aa", []),  # a word of two letters matches only whole
        ("Pricing", "policy", []),
        ("ΟΔΟΣ", "οδος", []),  # folds differently as a whole (final sigma): no mark rather than a wrong one
        ("Rédiger une réponse à un appel d'offres", "reponse appel", ["réponse", "appel"]),
        ("Tender submission rules", "submission tend", ["Tender"[:4], "submission"]),  # the last word: typed part
        ("إدارة والغابات", "والغاب", ["والغاب"]),  # Arabic clitic and article
        ("إدارة الغابات", "والغاب", ["الغاب"]),
        ("إدارة الغابات", "غاب", ["غاب"]),
    ],
)
def test_word_spans_are_offsets_in_the_text_as_written(text: str, typed: str, marked: list[str]) -> None:
    # when
    spans = word_spans(text, typed_words(typed))
    # then
    assert [text[s.start : s.end] for s in spans] == marked


def test_preview_hits_carry_their_title_spans() -> None:
    # given
    make_item(title="Écrire un écrit", body="Texte.")
    make_item(title="Autre", body="Un écrit.")
    build()
    # when
    hits = preview_search(principal=ANONYMOUS, text="ÉCRIT")
    # then
    assert [(h.title, h.title_spans) for h in hits] == [("Écrire un écrit", (Span(10, 15),)), ("Autre", ())]
