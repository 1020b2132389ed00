"""The live preview: the items whose title and body together hold every word typed into the search bar.

Words match in any order after the engine's folding (case, accents, French elisions, Arabic normalisation,
the Arabic article and a leading و/ف); the last word is matched as the start of a word, since it is still
being typed; a word of 5 letters or more also matches a corpus word one edit away, 9 or more two edits (the
last word: within its prefix), ranked below exact matches. Titles that hold every word come first (those
that begin with a typed word first, each newest first), then items whose title and body hold them together,
in the order the index finds them.

Matching is one ``@@`` over the revision's word tsvectors (GIN indexes, written with the revision:
``analysis.revision_preview_columns``); typo candidates come from the corpus vocabulary
(``search_term_stats``) through B-tree and trigram indexes. Each step runs within the preview's time budget
on a large corpus, so a slow step shows what it found instead of blocking the next keystroke. Reads go
through ``ItemScope``, the access rule ``retrieve`` uses, so the preview can never show an item the engine
would not.
"""

from __future__ import annotations

import logging
import math
import re
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models.functions import Substr

from search import replicas
from search.engine.expansion import osa_distance
from search.engine.scope import ItemScope, chunk_column, corpus_for
from search.engine.sql import Fragment, as_fragment, compose, execute, join, param
from search.errors import InvalidQuery
from search.models import ContentItem, item_path
from search.principal import Principal
from search.replicas import read_connection
from search.text import analysis
from search.text.highlight import plain_passage
from search.text.query_parser import normalize_query_text
from search.types import PREVIEW_MAX_LIMIT, Corpus, Span

logger = logging.getLogger(__name__)

# A preview step is not started with less time than this left of the budget.
MIN_STEP_MS = 2
# What the preview keeps of its budget for the work after its steps (reading the hits' titles and
# snippets, and Python): see docs/benchmarks.md.
FINAL_READ_MS = 3
# Walk items newest first before asking the index when the typed words together are estimated to be in more
# than this share of titles: the walk then finds its first items within a few hundred, while the index would
# gather (and PostgreSQL cannot interrupt) thousands. The cross-over measured at 100k items: a walk costs
# about 6 µs an item (8 / share items), the index about 4 µs a match (share × items).
WALK_FIRST_SHARE = 0.01
# The share of titles taken to hold a stop word (the vocabulary does not count them): common.
STOP_WORD_SHARE = 0.5
# A typed prefix's share of titles (and of texts) is counted over at most this many of the corpus words it begins.
TITLE_COUNT_TERMS = 200
# Typed words the preview matches (the first ones; a longer fragment is narrowed enough by them).
MAX_WORDS = 8
# A typed word of this many letters or more also matches a corpus word one edit away; of TYPO_TWO_EDITS or
# more, two edits away.
TYPO_ONE_EDIT = 5
TYPO_TWO_EDITS = 9
# No one mistypes a longer word (and PostgreSQL's levenshtein() refuses strings over 255 characters).
TYPO_MAX_LETTERS = 64
# The longest word a revision's word columns keep (``analysis.preview_words_tsvector``): a longer typed word
# is held by no item.
MAX_WORD_BYTES = analysis.MAX_LEXEME_BYTES
# At most this many corpus words (or, for the last word, corpus prefixes) stand in for one mistyped word:
# the closest, then the most frequent.
TYPO_FORMS = 8
# A word of this many letters or fewer is only ever matched whole (narrowing), never as the start of
# every word it begins; as the last of several words, it is not required at all while being typed.
SHORT_WORD = 2
# The body snippet: characters of context before the first matched word, and its length at most.
SNIPPET_BEFORE = 40
SNIPPET_CHARS = 160
# A body match without a built chunk holding the word looks for it in this much of the body.
SNIPPET_BODY_CHARS = 4000
# Chunks read per body match to find its snippet (those whose folded text holds a typed form, in order).
SNIPPET_CHUNKS = 4
_SETTING_NAME = re.compile(r"[a-z_]+")
_SETTING_VALUE = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class PreviewHit:
    id: int
    title: str
    content_type: str
    primary_domain: str
    url: str
    # The title holds every typed word (else the title and body together do).
    title_match: bool
    # Where typed words occur in ``title`` (offsets into it; the typed part only for the last word).
    title_spans: tuple[Span, ...] = ()
    # For a match that needs the body: a short plain-text passage around the first typed word the body holds,
    # and where typed words occur in it.
    snippet: str = ""
    snippet_spans: tuple[Span, ...] = ()
    # A typed word matched only with a typo forgiven.
    fuzzy: bool = False


@dataclass(frozen=True)
class TypedWord:
    """One word of a typed fragment: its folded ``forms`` (``analysis.preview_forms``), whether it is
    matched as the start of a word (the last word, still being typed), and the corpus words (or prefixes)
    within its edit distance once ``typo_forms`` has looked them up."""

    folded: str
    forms: tuple[str, ...]
    prefix: bool
    typos: tuple[str, ...] = ()

    @property
    def max_edits(self) -> int:
        n = len(self.folded)
        if n > TYPO_MAX_LETTERS:
            return 0
        return 2 if n >= TYPO_TWO_EDITS else 1 if n >= TYPO_ONE_EDIT else 0

    def lexemes(self, *, fuzzy: bool) -> tuple[str, ...]:
        return self.forms + (self.typos if fuzzy else ())

    def tsquery(self, *, fuzzy: bool) -> str:
        """This word as a tsquery: any of its forms (and, ``fuzzy``, its typo forms), prefix-matched if
        ``prefix``."""
        return "(" + analysis.tsquery_any(self.lexemes(fuzzy=fuzzy), prefix=self.prefix) + ")"

    def matches(self, form: str, *, fuzzy: bool) -> int:
        """How many folded characters of the written word's ``form`` this typed word covers (0: none): the
        whole form for a whole-word match, the typed part for a prefix."""
        lexemes = self.lexemes(fuzzy=fuzzy)
        if not self.prefix:
            return len(form) if form in lexemes else 0
        if not form.startswith(lexemes):
            return 0
        return max(len(lexeme) for lexeme in lexemes if form.startswith(lexeme))


def typed_words(cleaned: str) -> list[TypedWord]:
    """The words of a typed fragment the preview matches: the last as a prefix, a short one (``SHORT_WORD``
    letters or fewer) only whole, and a short last word left out when other words narrow already."""
    folded = [t.folded for t in analysis.tokens(cleaned)]
    words: list[TypedWord] = []
    for i, word in enumerate(folded):
        last = i == len(folded) - 1
        if len(word) <= SHORT_WORD and last and len(folded) > 1:
            continue
        words.append(TypedWord(word, analysis.preview_forms(word), prefix=last and len(word) > SHORT_WORD))
    unique = list({(w.folded, w.prefix): w for w in words}.values())
    return unique[:MAX_WORDS]


def _fragment_query(words: list[TypedWord], *, fuzzy: bool) -> str:
    """The tsquery every matching item's words satisfy: each typed word (one of its forms) in any order."""
    return " & ".join(w.tsquery(fuzzy=fuzzy) for w in words)


def _any_word_query(words: list[TypedWord], *, fuzzy: bool) -> str:
    """A tsquery that any one typed word satisfies (a title that begins with a typed word ranks first)."""
    return " | ".join(w.tsquery(fuzzy=fuzzy) for w in words)


def _within_budget(
    statement: Fragment, budget_ms: int | None, *, setting: tuple[str, str] | None = None
) -> list[tuple[Any, ...]] | None:
    """The rows of ``statement``, or None when it ran past ``budget_ms`` (cancelled by PostgreSQL, nothing left
    behind) or the budget is already too small to try. ``budget_ms`` None: no budget. ``setting`` (a
    PostgreSQL parameter name and value) applies to this statement only."""
    connection = read_connection()
    if budget_ms is None and setting is None:
        with connection.cursor() as cursor:
            execute(cursor, statement)
            return list(cursor.fetchall())
    if budget_ms is not None and budget_ms < MIN_STEP_MS:
        return None
    if setting and not (_SETTING_NAME.fullmatch(setting[0]) and _SETTING_VALUE.fullmatch(setting[1])):
        raise ValueError(f"not a PostgreSQL setting this code sets: {setting!r}")
    outer = connection.in_atomic_block  # SET LOCAL would outlive our savepoint: restore it then
    with connection.cursor() as cursor:
        if not outer and connection.get_autocommit() and isinstance(cursor.cursor, psycopg.ClientCursor):
            # One round trip: the statements of one simple-query message run as one implicit transaction,
            # so SET LOCAL holds for this message only (PostgreSQL times each statement on its own). A
            # timeout that fires after a statement's last interrupt check (a busy machine can deschedule
            # the backend there) would cancel whatever this connection runs next: so the message ends
            # with the timeout off and pg_sleep(0), whose interrupt check takes any such cancel here.
            prefix = "" if budget_ms is None else f"SET LOCAL statement_timeout = {int(budget_ms)}; "
            if setting:
                prefix += f"SET LOCAL {setting[0]} = {setting[1]}; "
            try:
                tail = "; SET LOCAL statement_timeout = 0; SELECT pg_sleep(0)"
                execute(cursor, as_fragment(prefix) + statement + tail)
                while cursor.description is None and cursor.nextset():
                    pass
                return list(cursor.fetchall())
            except OperationalError as exc:
                if getattr(exc.__cause__, "sqlstate", None) != "57014":
                    raise
                return None
        try:
            with transaction.atomic(using=connection.alias):
                previous_timeout = None  # no budget: the timeout in force stays
                if budget_ms is not None:
                    execute(cursor, Fragment(
                        "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                        (str(budget_ms),),
                    ))
                    (previous_timeout, _) = cursor.fetchone()
                previous_setting = None
                if setting:
                    name, value = setting
                    execute(
                        cursor, Fragment("SELECT current_setting(%s), set_config(%s, %s, true)", (name, name, value))
                    )
                    previous_setting = (name, cursor.fetchone()[0])
                execute(cursor, statement)
                rows = cursor.fetchall()
                if outer and previous_timeout is not None:
                    execute(cursor, Fragment("SELECT set_config('statement_timeout', %s, true)", (previous_timeout,)))
                if outer and previous_setting:
                    execute(cursor, Fragment("SELECT set_config(%s, %s, true)", previous_setting))
                return list(rows)
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != "57014":  # not our budget running out
                raise
            return None


_corpus_size: tuple[float, int] = (0.0, 0)  # (read at, chunks): the preview asks at most once a minute


def preview_budgeted() -> bool:
    """Whether the corpus is large enough for the preview's time budget to matter (see preview_search);
    public for the benchmarks' completeness report."""
    global _corpus_size
    read_at, chunks = _corpus_size
    if time.monotonic() - read_at > 60:
        with read_connection().cursor() as cursor:
            execute(cursor, "SELECT n_chunks FROM search_corpus_stats")
            row = cursor.fetchone()
        chunks = int(row[0]) if row else 0
        _corpus_size = (time.monotonic(), chunks)
    return chunks >= int(settings.SEARCH["PREVIEW_BUDGET_MIN_CHUNKS"])


def _edit_pieces(word: str, edits: int) -> tuple[str, str, str]:
    """Three pieces of ``word`` at least one of which a word within ``edits`` edits (optimal string
    alignment: a swapped pair is one edit) holds unchanged: its first letters (``head``), letters from its
    middle (``middle``, two edits only), its last letters (``tail``).

    One edit changes one letter or a swapped pair: splitting the word one letter apart (``head`` + one
    letter + ``tail``) leaves one side whole. Two edits: two one-letter gaps between three pieces."""
    n = len(word)
    if edits <= 1:
        cut = n // 2
        return word[:cut], "", word[cut + 1 :]
    # the middle piece is matched by trigrams anywhere in a word: the longest of the three, so the most selective
    head_len = (n - 2) // 3
    middle_len = n - 2 - 2 * head_len
    return word[:head_len], word[head_len + 1 : head_len + 1 + middle_len], word[head_len + middle_len + 2 :]


def typo_forms(words: list[TypedWord], budget_ms: int | None) -> list[TypedWord] | None:
    """``words`` with their typo forms: the corpus words (for the last word, the corpus words' prefixes)
    within each word's edit distance, closest and most frequent first, at most ``TYPO_FORMS``; None when the
    lookup ran past ``budget_ms``.

    The candidates come from the vocabulary the lexical lane and "did you mean" use (``search_term_stats``:
    body and title words of every item, as of the last index build), through indexes: the corpus words that
    begin with the typed word's ``head`` (B-tree), end with its ``tail`` (B-tree on the reversed word), or
    hold its ``middle`` (trigram), within a length window; ``levenshtein`` and then the optimal string
    alignment distance keep those close enough. A whole word's candidates are exact: every corpus word
    within the distance holds one piece. For the last word only the head is anchored, the other pieces
    are looked up where they have 3 letters (a trigram) or more."""
    lookups: list[tuple[int, str, str, str, str, int, int, int, bool]] = []
    for i, word in enumerate(words):
        edits = word.max_edits
        if not edits:
            continue
        head, middle, tail = _edit_pieces(word.folded, edits)
        n = len(word.folded)
        if word.prefix:
            # the tail and middle are matched anywhere in the corpus word (a trigram each, 3 letters or more)
            middle = middle if len(middle) >= 3 else ""
            anywhere = tail if len(tail) >= 3 else ""
            lookups.append((i, word.folded, head, middle or anywhere, "", n - edits, 10_000, edits, True))
            if middle and anywhere:
                lookups.append((i, word.folded, "", anywhere, "", n - edits, 10_000, edits, True))
        else:
            lookups.append(
                (i, word.folded, head, middle if len(middle) >= 3 else "", tail, n - edits, n + edits, edits, False)
            )
    if not lookups:
        return words
    columns = list(zip(*lookups, strict=True))
    rows = _within_budget(
        Fragment(
        """
        SELECT DISTINCT q.i, t.term
        FROM unnest(%s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::int[], %s::int[], %s::int[],
                    %s::bool[]) AS q(i, word, head, middle, tail, shortest, longest, edits, prefix)
        CROSS JOIN LATERAL (
            SELECT term FROM search_term_stats
            WHERE field IN ('surface', 'title') AND q.head <> ''
              AND term ~>=~ q.head AND term ~<~ (q.head || chr(1114111))
            UNION
            SELECT term FROM search_term_stats
            WHERE field IN ('surface', 'title') AND q.tail <> ''
              AND reverse(term) ~>=~ reverse(q.tail) AND reverse(term) ~<~ (reverse(q.tail) || chr(1114111))
            UNION
            SELECT term FROM search_term_stats  -- the vocabulary's trigram index (all fields: filtered here)
            WHERE q.middle <> '' AND term LIKE '%%' || q.middle || '%%' AND field || '' IN ('surface', 'title')
        ) t
        WHERE length(t.term) BETWEEN q.shortest AND q.longest
          AND levenshtein_less_equal(CASE WHEN q.prefix THEN left(t.term, length(q.word) + q.edits) ELSE t.term END,
                                     q.word, 2 * q.edits) <= 2 * q.edits
        """,
        tuple(list(c) for c in columns),
        ),
        budget_ms,
    )
    if rows is None:
        return None
    found: dict[int, dict[str, int]] = {}
    for i, term in rows:
        word = words[i]
        best = _typo_form(word, term)
        if best is not None:
            form, distance = best
            if form not in word.forms:
                found.setdefault(i, {})
                found[i][form] = min(found[i].get(form, distance), distance)
    out = []
    for i, word in enumerate(words):
        ranked = sorted(found.get(i, {}).items(), key=lambda kv: (kv[1], kv[0]))
        out.append(TypedWord(word.folded, word.forms, word.prefix, tuple(f for f, _ in ranked[:TYPO_FORMS])))
    return out


def _typo_form(word: TypedWord, term: str) -> tuple[str, int] | None:
    """The form of corpus word ``term`` that stands in for mistyped ``word`` and its distance: ``term``
    itself for a whole word, for the last word the prefix of ``term`` closest to what was typed; None when
    none is within the word's edit distance."""
    edits = word.max_edits
    if not word.prefix:
        distance = osa_distance(word.folded, term)
        return (term, distance) if distance <= edits else None
    n = len(word.folded)
    best: tuple[str, int] | None = None
    for length in sorted(range(max(1, n - edits), min(len(term), n + edits) + 1), key=lambda k: abs(k - n)):
        distance = osa_distance(word.folded, term[:length])
        if distance <= edits and (best is None or distance < best[1]):
            best = (term[:length], distance)
    return best


@replicas.replica_reads
def preview_search(*, principal: Principal, text: str, limit: int = 8) -> list[PreviewHit]:
    """Search-as-you-type: the items whose title and body together hold every typed word (module docstring),
    titles that hold them all first, typo matches after exact ones; at most ``limit`` (≤ 20).

    On a corpus of ``PREVIEW_BUDGET_MIN_CHUNKS`` chunks or more the preview has a time budget
    (``PREVIEW_BUDGET_MS``, the whole call; its steps stop ``FINAL_READ_MS`` early to read their hits): a
    fragment of common words can make the GIN index hand back much of a large corpus to sort by date, and a
    preview that arrives after the next keystroke is worth nothing. A word check first says which typed words
    the corpus holds (a fragment with one it does not hold goes straight to the typo lookup) and how common
    they are; a title step asks the index, then walks items newest first past its share of the budget (the
    other way round for common words). Whatever is shown holds every typed word; past the budget the preview
    shows what it has. The full search (Enter) is exhaustive.

    In code: ``typed_words`` → ``_words_in_corpus`` → ``_add_matches`` over ``_STEPS`` (exact, then with
    ``typo_forms``) → ``_preview_hits`` (titles, marks and snippets).
    """
    started = time.monotonic()
    cleaned = normalize_query_text(text)
    if not cleaned:
        raise InvalidQuery("q is required: type at least one character.", field="q")
    limit = max(1, min(limit, PREVIEW_MAX_LIMIT))
    words = typed_words(cleaned)
    if not words or any(len(w.folded.encode()) > MAX_WORD_BYTES for w in words):
        return []  # nothing to match, or a word longer than any item holds
    corpus = corpus_for(principal)
    budget = _PreviewBudget.starting(started)
    scope = _PreviewScope.of(principal, corpus)
    found: list[tuple[int, bool, bool]] = []  # (item id, title match, fuzzy)
    known = _words_in_corpus(words, budget.left_ms(0.2))
    absent = [] if known is None else [w for i, w in enumerate(words) if i not in known.held]
    if any(not w.max_edits for w in absent):
        return []  # a word no item holds, too short to be a typo of one
    if not absent:
        _add_matches(found, scope, words, limit, budget, fuzzy=False, known=known)
    if len(found) < limit and any(w.max_edits for w in words):
        with_typos = typo_forms(words, budget.left_ms(0.6))
        if with_typos is not None and any(w.typos for w in with_typos):
            words = with_typos
            _add_matches(found, scope, words, limit, budget, fuzzy=True, known=known)
    return _preview_hits(found, words, corpus=corpus)


@dataclass(frozen=True)
class _WordsInCorpus:
    """What the preview knows of the typed words before it looks for items (``_words_in_corpus``)."""

    held: frozenset[int]  # positions of the words some revision holds (the last word as a prefix)
    # An estimate of the share of titles that hold every typed word (from the vocabulary's title counts;
    # words it does not count are left out): above WALK_FIRST_SHARE, walking items newest first finds the
    # first ones sooner than the index can gather them all.
    title_share: float
    # Per word position, the vocabulary's count of chunks whose text holds it, 0 where it has none.
    text_counts: dict[int, int]

    @property
    def walk_first(self) -> bool:
        return self.title_share > WALK_FIRST_SHARE

    def indexed(self, words: list[TypedWord]) -> list[TypedWord]:
        """The words the index looks up (the others are checked on each revision it finds): every whole
        word, and the last word (a prefix) only where it is the rarest: the index gathers a prefix's entries
        whole (``for`` typed last: every word that begins with it), while it intersects whole words by
        skipping through the common ones. Rarest: a word no revision holds as typed (matched by its typo
        forms, rare words), else the fewest chunks by the vocabulary's count (a word it does not count is
        taken for a stop word)."""

        def rarity(i: int) -> tuple[int, float]:
            count = self.text_counts.get(i, 0)
            return (0 if i not in self.held else 1, count if count else float("inf"))

        rarest = min(range(len(words)), key=rarity)
        return [w for i, w in enumerate(words) if not w.prefix or i == rarest]


def _words_in_corpus(words: list[TypedWord], budget_ms: int | None) -> _WordsInCorpus | None:
    """Which typed words some revision holds (the last word as a prefix) and how common they are in titles;
    None when the check ran past ``budget_ms``. A fragment with a word no revision holds can only match with
    a typo forgiven, so the exact steps (several ms each at 100k items when the other words are common) are
    skipped.

    A word is looked up in the vocabulary first (``search_term_stats``, B-tree: a common word answers at
    once), then in the revisions' word index, which is exact (a word written since the last index build) and
    fast for a rare or absent word. Each word's query is planned with its own value: a common whole word is
    found by reading the first few revisions, a prefix always through the index (the planner cannot estimate
    a prefix that no statistic holds, and a scan would read every revision)."""
    parts = []
    for i, word in enumerate(words):
        for form in word.forms:
            tsquery = param(analysis.tsquery_any((form,), prefix=word.prefix), "tsquery")
            if word.prefix:
                high = param(form + chr(0x10FFFF))
                known = compose("term ~>=~ {low} AND term ~<~ {high}", low=param(form), high=high)
                in_index = compose("(SELECT {tsquery})", tsquery=tsquery)  # a value the planner cannot see
            else:
                known, in_index = compose("term = {form}", form=param(form)), tsquery
            parts.append(
                compose(
                    """SELECT {i},
                    EXISTS (SELECT 1 FROM search_term_stats WHERE field IN ('surface', 'title') AND {known})
                    OR EXISTS (SELECT 1 FROM search_revision r WHERE r.preview_words @@ {in_index}),
                    (SELECT sum(df) FROM (SELECT df FROM search_term_stats WHERE field = 'title' AND {known}
                                          LIMIT {most}) AS t),
                    (SELECT sum(df) FROM (SELECT df FROM search_term_stats WHERE field = 'surface' AND {known}
                                          LIMIT {most}) AS t)""",
                    i=param(i),
                    known=known,
                    in_index=in_index,
                    most=param(TITLE_COUNT_TERMS),
                )
            )
    statement = compose(
        "SELECT q.*, (SELECT n_chunks FROM search_corpus_stats) FROM ({parts}) AS q",
        parts=join(parts, " UNION ALL "),
    )
    rows = _within_budget(statement, budget_ms)
    if rows is None:
        return None
    held = frozenset(i for i, is_held, *_ in rows if is_held)
    counts: dict[int, int] = {}
    in_text: dict[int, int] = {}
    for i, _, in_titles, in_texts, _ in rows:
        counts[i] = counts.get(i, 0) + int(in_titles or 0)
        in_text[i] = in_text.get(i, 0) + int(in_texts or 0)
    titles = max((int(n or 0) for *_, n in rows), default=0)
    # A word the vocabulary does not count in titles is in none (as of its last build: a word written since is
    # rare) or a stop word (it may leave those out: common).
    stop_words = analysis.all_stop_words()
    factors = [
        min(1.0, counts[i] / titles) if counts.get(i) else STOP_WORD_SHARE if word.folded in stop_words else 0.0
        for i, word in enumerate(words)
    ]
    return _WordsInCorpus(held, math.prod(factors) if titles else 0.0, in_text)


def _add_matches(
    found: list[tuple[int, bool, bool]],
    scope: _PreviewScope,
    words: list[TypedWord],
    limit: int,
    budget: _PreviewBudget,
    *,
    fuzzy: bool,
    known: _WordsInCorpus | None,
) -> None:
    """Append to ``found`` the items matching ``words`` (titles first, then title and body), up to ``limit``.
    ``known`` (``_words_in_corpus``; None when its check ran out of time) picks the word the index looks up
    and whether title steps walk first."""
    tsqueries = {
        "query": _fragment_query(words, fuzzy=fuzzy),
        "lead": _any_word_query(words, fuzzy=fuzzy),
        "anchor": _fragment_query(known.indexed(words) if known else words, fuzzy=fuzzy),
    }
    # typo forms are rare words: the index first
    walk_first = known is not None and known.walk_first and not fuzzy
    for step in _STEPS[1:] if len(words) == 1 else _STEPS[:1] + _STEPS[2:]:
        if len(found) >= limit:
            return
        exclude = [item_id for item_id, *_ in found]
        # titles that begin with a word are far fewer than those that hold it: the index first
        first = walk_first and step.name != "lead"
        rows = _matching_items(
            scope, step, tsqueries, exclude, limit - len(found), budget, walk_first=first, walk=not fuzzy
        )
        found.extend((item_id, step.in_title, fuzzy) for item_id in rows)


@dataclass(frozen=True)
class _Step:
    """One pass of the preview over the revisions' word columns (``_matching_items``)."""

    name: str
    # SQL over ``r`` (the revision) and tsquery parameters: ``{query}`` (every word), ``{lead}`` (any word, for
    # ``title_lead``), ``{anchor}`` (the words the index looks up, ``_WordsInCorpus.indexed``). ``where`` is
    # what the index looks up; ``check`` is checked on each revision it found (``ts_match_vq``, the function
    # behind ``@@``, which the planner never takes to an index), left out when the index looks up every word.
    where: str
    check: str
    newest_first: bool  # ordered by the item's date (else as the index finds them)
    in_title: bool


# Titles that begin with a typed word (``title_lead``, GIN), then the other titles that hold every word, both
# newest first; then items whose title and body hold them together, as the index finds them: sorting those
# by date would read every match of a common word (or walk items checking each one's whole word list, ~60 µs
# an item), where taking the first ones the index hands back costs a few ms at 100k items.
_STEPS = (
    _Step(
        "lead",
        "r.title_lead @@ {lead} AND r.title_words @@ {anchor}",
        "ts_match_vq(r.title_words, {query})",
        newest_first=True,
        in_title=True,
    ),
    # one typed word: a title that begins with it holds it
    _Step("lead", "r.title_lead @@ {lead}", "", newest_first=True, in_title=True),
    _Step(
        "title",
        "r.title_words @@ {anchor} AND NOT (r.title_lead @@ {lead})",
        "ts_match_vq(r.title_words, {query})",
        newest_first=True,
        in_title=True,
    ),
    _Step(
        "body",
        "r.preview_words @@ {anchor}",
        "ts_match_vq(r.preview_words, {query})",
        newest_first=False,
        in_title=False,
    ),
)


@dataclass(frozen=True)
class _PreviewBudget:
    """The preview's time budget: it covers the whole call, and the steps stop ``FINAL_READ_MS`` early to
    leave time for reading their hits."""

    deadline: float  # time.monotonic()
    budgeted: bool

    @classmethod
    def starting(cls, started: float) -> _PreviewBudget:
        deadline = started + (int(settings.SEARCH["PREVIEW_BUDGET_MS"]) - FINAL_READ_MS) / 1000
        return cls(deadline, preview_budgeted())

    def left_ms(self, share: float = 1.0) -> int | None:
        """What is left of the budget (None on a small corpus: its index scans are never the slow kind, and
        a loaded machine must not cut them short)."""
        return int((self.deadline - time.monotonic()) * 1000 * share) if self.budgeted else None


@dataclass(frozen=True)
class _PreviewScope:
    """The items the caller may read (superseded ones left out) in the caller's corpus, and the columns of
    that corpus."""

    items: Fragment
    revision_col: str
    chunk_col: str

    @classmethod
    def of(cls, principal: Principal, corpus: Corpus) -> _PreviewScope:
        return _preview_scope(principal, corpus)


@lru_cache(maxsize=1024)
def _preview_scope(principal: Principal, corpus: Corpus) -> _PreviewScope:
    """The scope of one principal and corpus: the access rule depends on nothing else (not the time, not the
    data), and compiling it through the ORM costs more than a preview step (1–2 ms), so it is kept."""
    scope = ItemScope(principal, corpus)  # the default filters leave superseded items out
    items = scope.items_sql()
    assert items is not None  # no filters: the access rule alone always compiles
    return _PreviewScope(items, scope.revision_column, scope.chunk_column)


def _matching_items(
    scope: _PreviewScope,
    step: _Step,
    tsqueries: dict[str, str],
    exclude: list[int],
    wanted: int,
    budget: _PreviewBudget,
    *,
    walk_first: bool,
    walk: bool = True,
) -> list[int]:
    """The items (ids, in order) of one ``step``, at most ``wanted``, ``exclude`` left out.

    The GIN index finds a rare word's few items at once; a common word's thousands must all be sorted by
    date, while walking items newest first finds ``wanted`` within a few rows. So a step ordered by date gets
    at most half of what is left of the budget for the index, then the walk (the same order: the same
    rows); ``walk_first`` (the typed words are common in titles) the other way round; without ``walk`` (typo
    forms: rare words, which a walk would look for through the whole corpus) the index alone, with more
    time. The index attempt reads the matching revisions first (a materialized CTE): left to itself the
    planner often walks for a word it cannot estimate (a prefix), which costs 5–20 ms at 100k items where
    the index takes 1–3."""
    where = step.where
    if step.check and not ("{anchor}" in where and tsqueries["anchor"] == tsqueries["query"]):
        where = f"{where} AND {step.check}"
    words = {name: param(value, "tsquery") for name, value in tsqueries.items() if f"{{{name}}}" in where}
    rest = compose(
        f"""i.id IN ({{items}}) AND NOT (i.id = ANY({{exclude}}))
        {"ORDER BY i.updated_at DESC, i.id" if step.newest_first else ""} LIMIT {{wanted}}""",
        items=scope.items,
        exclude=param(exclude),
        wanted=param(wanted),
    )
    plain = compose(
        f"""SELECT i.id FROM search_contentitem i JOIN search_revision r ON r.id = i.{scope.revision_col}
        WHERE {where} AND {{rest}}""",
        **words,
        rest=rest,
    )
    if not step.newest_first or budget.left_ms() is None:  # on a small corpus the planner's plan is fast
        rows = _within_budget(plain, budget.left_ms())
    else:
        indexed = compose(
            f"""WITH m AS MATERIALIZED (SELECT r.id FROM search_revision r WHERE {where})
            SELECT i.id FROM search_contentitem i JOIN m ON m.id = i.{scope.revision_col} WHERE {{rest}}""",
            **words,
            rest=rest,
        )
        attempts = [(indexed, ("enable_seqscan", "off")), (plain, ("enable_bitmapscan", "off"))]
        if walk_first:
            attempts.reverse()
        shares: tuple[float, ...] = (0.5, 0.6)
        if not walk:
            attempts, shares = attempts[:1], (0.7,)
        rows = None
        for (statement, setting), share in zip(attempts, shares, strict=True):
            rows = _within_budget(statement, budget.left_ms(share), setting=setting)
            if rows is not None:
                break
    if rows is None:
        logger.info("preview: %s matches cut short by the time budget", step.name)
        return []
    return [r[0] for r in rows]


def _preview_hits(found: list[tuple[int, bool, bool]], words: list[TypedWord], *, corpus: Corpus) -> list[PreviewHit]:
    """The hits in order, each title read from the caller's corpus and marked where it holds typed words;
    a hit that needs its body gets a snippet around the first typed word the body holds."""
    ids = [item_id for item_id, *_ in found]
    statement = compose(
        """
        SELECT i.id, i.slug, i.content_type, i.primary_domain, coalesce(r.title, '')
        FROM search_contentitem i LEFT JOIN search_revision r ON r.id = {revision}
        WHERE i.id = ANY({ids})
    """,
        revision="i.live_revision_id" if corpus == "live" else "coalesce(i.latest_revision_id, i.live_revision_id)",
        ids=param(ids),
    )
    with read_connection().cursor() as cursor:
        execute(cursor, statement)
        items = {row[0]: row for row in cursor.fetchall()}
    body = {item_id: fuzzy for item_id, in_title, fuzzy in found if not in_title}
    passages = _body_passages(body, words, corpus=corpus) if body else {}
    hits = []
    for item_id, in_title, fuzzy in found:
        _, slug, content_type, primary_domain, title = items[item_id]
        snippet, snippet_spans = passages.get(item_id, ("", ()))
        hits.append(
            PreviewHit(
                item_id,
                title,
                content_type,
                primary_domain,
                item_path(slug),
                in_title,
                word_spans(title, words, fuzzy=fuzzy),
                snippet,
                snippet_spans,
                fuzzy,
            )
        )
    return hits


def _body_passages(
    items: dict[int, bool], words: list[TypedWord], *, corpus: Corpus
) -> dict[int, tuple[str, tuple[Span, ...]]]:
    """For each item, a short passage of its body around the first typed word it holds, and the spans of
    typed words in it. The item's chunks whose folded text holds a typed word's form at the start of a word
    (anywhere for an Arabic form) are read in order (the first ``SNIPPET_CHUNKS``), and the first that holds
    one as a word gives the passage; an item with no chunk at all (not built yet) is looked for in the start
    of its body. ``items``: item id → whether it matched with a typo forgiven (only such an item's passage
    may start at a typo form)."""
    item_ids = list(items)
    patterns = sorted({_word_start_pattern(f) for w in words for f in w.lexemes(fuzzy=True)})
    # the patterns go in as a sub-select: a value the planner cannot see, or it derives every pattern's
    # trigrams to cost the chunks' trigram index (2 ms of planning for a query that runs in under 1)
    statement = compose(
        """
        SELECT i.id, i.built, c.text FROM (
            SELECT u.id, EXISTS (SELECT 1 FROM search_chunk b WHERE b.item_id = u.id AND b.{chunk_col}) AS built
            FROM unnest({ids}) AS u(id)
        ) i
        LEFT JOIN LATERAL (
            SELECT c.text, c.ordinal FROM search_chunk c
            WHERE c.item_id = i.id AND c.{chunk_col} AND c.folded_text ~ ANY((SELECT {patterns})::text[])
            ORDER BY c.ordinal LIMIT {most}
        ) c ON true
        ORDER BY i.id, c.ordinal
    """,
        ids=param(item_ids, "bigint[]"),
        chunk_col=chunk_column(corpus),
        patterns=param(patterns, "text[]"),
        most=param(SNIPPET_CHUNKS),
    )
    with read_connection().cursor() as cursor:
        execute(cursor, statement)
        rows = cursor.fetchall()
    passages: dict[int, tuple[str, tuple[Span, ...]]] = {}
    for item_id, _, text in rows:
        # a chunk can hold a typed form only inside a longer word ("tenders" for "tender"): try the next one
        if text and item_id not in passages and (passage := snippet(text, words, fuzzy=items[item_id]))[0]:
            passages[item_id] = passage
    unbuilt = [item_id for item_id, built, _ in rows if not built]
    if unbuilt:
        revision_col = "live_revision" if corpus == "live" else "latest_revision"
        # only the start of each body is read (PostgreSQL decompresses no more of it)
        start = Substr(f"{revision_col}__body", 1, SNIPPET_BODY_CHARS)
        for item_id, body in ContentItem.objects.filter(pk__in=unbuilt).values_list("pk", start):
            passage = snippet(body or "", words, fuzzy=items[item_id])
            if passage[0]:
                passages[item_id] = passage
    return passages


def _word_start_pattern(form: str) -> str:
    """A PostgreSQL regular expression for ``form`` at the start of a word (anywhere for an Arabic form, which
    may follow a clitic or the article), as ``_word_starts`` finds it."""
    escaped = re.sub(r"([^\w\s])", r"\\\1", form)  # every character that is not a letter, digit or space
    return escaped if analysis.is_arabic(form) else r"\m" + escaped


def _folded_offsets(text: str) -> list[int] | None:
    """For each character of ``analysis.fold(text)``, the index in ``text`` it comes from; None when ``text``
    folds differently as a whole than character by character (no mark rather than a wrong one)."""
    pieces = [analysis.fold(ch) for ch in text]
    if "".join(pieces) != analysis.fold(text):
        return None
    return [i for i, piece in enumerate(pieces) for _ in piece]


def _token_span(token: analysis.Token, start: int, end: int) -> Span | None:
    """The span of ``token`` (offsets into the whole text) covering folded characters ``start:end`` of it,
    combining marks after its last letter included (a mark never splits a letter from its accents)."""
    owner = _folded_offsets(token.text)
    if owner is None or end > len(owner) or start >= end:
        return None
    first, last = owner[start], owner[end - 1] + 1
    while last < len(token.text) and unicodedata.combining(token.text[last]) and analysis.fold(token.text[last]) == "":
        last += 1
    return Span(token.start + first, token.start + last)


def _token_match(token: analysis.Token, words: list[TypedWord], *, fuzzy: bool) -> Span | None:
    """Where ``token`` holds a typed word: the whole word, or the typed part of the last word (after an
    Arabic clitic or article it was matched without)."""
    for form in analysis.preview_forms(token.folded):
        skipped = len(token.folded) - len(form)  # forms drop letters from the front only
        for word in words:
            covered = word.matches(form, fuzzy=fuzzy)
            if covered:
                end = skipped + covered if word.prefix else len(token.folded)
                return _token_span(token, skipped if word.prefix else 0, end)
    return None


def word_spans(text: str, words: list[TypedWord], *, fuzzy: bool = False) -> tuple[Span, ...]:
    """Every place ``text`` holds one of the typed ``words`` (``fuzzy``: or one of their typo forms), left to
    right, as spans of ``text`` itself."""
    spans = []
    for token in analysis.tokens(text):
        span = _token_match(token, words, fuzzy=fuzzy)
        if span is not None:
            spans.append(span)
    return tuple(spans)


def _first_match(text: str, words: list[TypedWord], *, fuzzy: bool) -> analysis.Token | None:
    """The first word of ``text`` that holds a typed word (``fuzzy``: or a typo form). Tokenising a whole chunk is
    the slow part of a preview, so only the words around where the folded text holds a typed form at the start
    of a word are tokenised, in order. Folding that shortens a text (invisible characters removed) moves its
    offsets back: the text is scanned from the word before the first such place; folding that lengthens it
    (a ligature) leaves no guide, and the whole text is scanned."""
    folded = analysis.folded_text(text)
    lexemes = {f for w in words for f in w.lexemes(fuzzy=fuzzy)}
    if len(folded) > len(text):
        return _first_token_match(text, 0, len(text), words, fuzzy=fuzzy)
    places = sorted({at for lexeme in lexemes for at in _word_starts(folded, lexeme)})
    if not places:
        return None
    if len(folded) < len(text):
        return _first_token_match(text, text.rfind(" ", 0, places[0]) + 1, len(text), words, fuzzy=fuzzy)
    for at in places:  # each a word or two: a chunk is a few KB
        end = text.find(" ", at)
        start, end = text.rfind(" ", 0, at) + 1, end if end != -1 else len(text)
        token = _first_token_match(text, start, end, words, fuzzy=fuzzy)
        if token is not None:
            return token
    return None


def _first_token_match(
    text: str, start: int, end: int, words: list[TypedWord], *, fuzzy: bool
) -> analysis.Token | None:
    """The first word of ``text[start:end]`` (``start`` and ``end`` at word boundaries) that holds a typed word."""
    for token in analysis.tokens(text[start:end]):
        if _token_match(token, words, fuzzy=fuzzy):
            return analysis.Token(token.text, token.folded, token.start + start, token.end + start)
    return None


def _word_starts(folded: str, lexeme: str) -> Iterator[int]:
    """Where ``lexeme`` occurs in ``folded`` at the start of a word (anywhere for an Arabic form, which may
    follow a clitic or the article), left to right."""
    arabic = analysis.is_arabic(lexeme)
    at = folded.find(lexeme)
    while at != -1:
        if arabic or at == 0 or not folded[at - 1].isalnum():
            yield at
        at = folded.find(lexeme, at + 1)


def snippet(text: str, words: list[TypedWord], *, fuzzy: bool = False) -> tuple[str, tuple[Span, ...]]:
    """A passage of about ``SNIPPET_CHARS`` characters of ``text`` starting a little before the first typed
    word it holds (``fuzzy``: or typo form), cut at word boundaries, Markdown markers removed, with the spans of
    typed words in it; ``("", ())`` when it holds none."""
    first = _first_match(text, words, fuzzy=fuzzy)
    if first is None:
        return "", ()
    start = max(0, first.start - SNIPPET_BEFORE)
    if start:
        space = text.find(" ", start, first.start)
        start = space + 1 if space != -1 else first.start
    end = min(len(text), start + SNIPPET_CHARS)
    if end < len(text):
        space = text.rfind(" ", first.end, end)
        end = space if space != -1 else end
    piece = text[start:end]
    plain, spans = plain_passage(piece, word_spans(piece, words, fuzzy=fuzzy))
    prefix = "… " if start else ""
    suffix = " …" if end < len(text) else ""
    moved = tuple(Span(s.start + len(prefix), s.end + len(prefix)) for s in spans)
    return prefix + plain + suffix, moved
