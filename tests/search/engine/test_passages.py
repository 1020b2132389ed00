"""search/engine/passages.py: which title and body words a query highlights."""

from search.engine import passages
from search.text import query_parser


def _marked(text: str, spans) -> list[str]:
    return [text[s.start : s.end] for s in spans]


def test_title_spans_mark_words_as_written_and_words_starting_with_a_query_word():
    # given: a query of a whole word and a word of 3+ letters (a prefix term)
    parsed = query_parser.parse("pric café")
    title = "Pricing policy: the Café prices, not caf or pri"
    # when
    spans = passages.title_spans(title, parsed)
    # then: "Pricing"/"prices" start with "pric", "Café" matches accents folded; "caf" and "pri" are shorter
    assert _marked(title, spans) == ["Pricing", "Café", "prices"]


def test_title_spans_skip_articles_and_never_match_by_stem():
    # given: a query word whose stem is shared by other forms, and an article in the query
    parsed = query_parser.parse("the running")
    title = "The runs of the running club"
    # when
    spans = passages.title_spans(title, parsed)
    # then: only the written form (and words it starts) are marked, not "runs", and no article
    assert _marked(title, spans) == ["running"]


def test_title_spans_short_words_match_whole_words_only():
    # given: a two-letter query word, too short to be a prefix
    parsed = query_parser.parse("ox")
    title = "Ox and oxen in a box"
    # then
    assert _marked(title, passages.title_spans(title, parsed)) == ["Ox"]


def test_title_spans_of_an_unsearchable_query_are_empty():
    assert passages.title_spans("Anything", query_parser.parse("the of")) == []
