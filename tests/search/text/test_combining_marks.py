"""``analysis.COMBINING_MARKS`` is every character ``unicodedata.combining`` marks, as migration 0013 strips them
in SQL: a word keeps its marks in Python exactly where the SQL twin of the tokenizer does."""

from __future__ import annotations

import importlib

from search.text import analysis


def test_the_marks_kept_inside_a_word_are_every_combining_character() -> None:
    vocabulary = importlib.import_module("search.migrations.0013_suggestion_vocabulary")
    assert analysis.COMBINING_MARKS == vocabulary.MARKS
