"""The live preview: what a fragment typed in the search bar matches, within a time budget.

Titles first (trigram and prefix matches), then content (postings of the fragment's words, then trigram
pairs), each step bounded by ``statement_timeout`` so a slow step shows what it found instead of blocking the
next keystroke. Reads go through ``ItemScope``, the access rule ``retrieve`` uses, so the preview can never
show an item the engine would not.
"""

from __future__ import annotations

import logging
import re
import time
import unicodedata
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError, transaction

from search.engine import reads
from search.engine.reads import read_connection
from search.engine.scope import ItemScope, corpus_for
from search.engine.sql import Fragment, compose, param
from search.errors import InvalidQuery
from search.models import ContentItem
from search.principal import Principal
from search.text import analysis
from search.text.analysis import folded_text
from search.text.query_parser import normalize_query_text
from search.types import PREVIEW_MAX_LIMIT, Corpus, Span

logger = logging.getLogger(__name__)

# A preview step is not started with less time than this left of the budget.
MIN_STEP_MS = 2
# What the preview keeps of its budget for the work after its steps (reading the hits' titles, about 1 ms,
# and Python): measured at 100k items, see docs/benchmarks.md.
FINAL_READ_MS = 3
# Postings a bounded content pass checks per millisecond of budget left: at 100k items one check (a chunk
# read and its LIKE) took about 13 µs and the statement's round trip and planning about 2.5 ms; this plans
# for half that speed, so the pass ends before its statement timeout and shows what it found.
POSTINGS_CHECKS_PER_MS = 15
# search_text_pairs (migration 0009): how many characters of each piece it keeps, and the characters that
# end a left piece it leaves out (a pair across a sentence end is not checked).
TEXT_PAIR_CHARS = 64
TEXT_PAIR_BREAKS = frozenset(".?!;:")
# At most this many of a fragment's pairs and pieces are checked (each is one index probe).
TEXT_PAIR_CHECKS = 8
_SETTING_NAME = re.compile(r"[a-z_]+")
_SETTING_VALUE = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class PreviewHit:
    id: int
    title: str
    content_type: str
    primary_domain: str
    url: str
    title_match: bool
    # Where the typed fragment occurs in ``title`` (offsets into it; empty for a match in the content only).
    title_spans: tuple[Span, ...] = ()


def folded_match_spans(text: str, folded: str) -> tuple[Span, ...]:
    """Where the folded fragment ``folded`` occurs in ``text``: spans of ``text`` itself (Python character
    offsets, end exclusive), non-overlapping, left to right.

    The preview's own match rule (``folded_text(text)`` holds ``folded``), mapped back through the folding
    character by character: ``ecrit`` marks ``Écrit``, ``كتاب`` marks ``كِتَابُ`` (the harakat after the last
    letter included, so a mark never splits a letter from its accents). Empty when ``folded`` is empty, or
    when ``text`` folds differently as a whole than character by character (context-dependent lower-casing,
    such as a Greek final sigma): no mark rather than a wrong one.
    """
    if not folded or not text:
        return ()
    pieces = [folded_text(ch) for ch in text]
    joined = "".join(pieces)
    if joined != folded_text(text):
        return ()
    owner = [i for i, piece in enumerate(pieces) for _ in piece]  # folded position -> index in text
    spans: list[Span] = []
    at = joined.find(folded)
    while at != -1:
        start, end = owner[at], owner[at + len(folded) - 1] + 1
        while end < len(text) and not pieces[end] and unicodedata.combining(text[end]):
            end += 1
        spans.append(Span(start, end))
        at = joined.find(folded, at + len(folded))
    return tuple(spans)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like_pattern(text: str) -> str:
    return f"%{_like_escape(text)}%"


def _within_budget(
    sql: str, params: list[Any], budget_ms: int | None, *, setting: tuple[str, str] | None = None
) -> list[tuple[Any, ...]] | None:
    """The rows of ``sql``, or None when it ran past ``budget_ms`` (cancelled by PostgreSQL, nothing left
    behind) or the budget is already too small to try. ``budget_ms`` None: no budget. ``setting`` (a
    PostgreSQL parameter name and value) applies to this statement only."""
    connection = read_connection()
    if budget_ms is None and setting is None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
    if budget_ms is None:
        budget_ms = int(settings.SEARCH["PREVIEW_BUDGET_MS"])
    if budget_ms < MIN_STEP_MS:
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
            prefix = f"SET LOCAL statement_timeout = {int(budget_ms)}; "
            if setting:
                prefix += f"SET LOCAL {setting[0]} = {setting[1]}; "
            try:
                cursor.execute(f"{prefix}{sql}; SET LOCAL statement_timeout = 0; SELECT pg_sleep(0)", params)
                while cursor.description is None and cursor.nextset():
                    pass
                return list(cursor.fetchall())
            except OperationalError as exc:
                if getattr(exc.__cause__, "sqlstate", None) != "57014":
                    raise
                return None
        try:
            with transaction.atomic(using=connection.alias):
                cursor.execute(
                    "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)",
                    [str(budget_ms)],
                )
                (previous_timeout, _) = cursor.fetchone()
                previous_setting = None
                if setting:
                    name, value = setting
                    cursor.execute("SELECT current_setting(%s), set_config(%s, %s, true)", [name, name, value])
                    previous_setting = (name, cursor.fetchone()[0])
                cursor.execute(sql, params)
                rows = cursor.fetchall()
                if outer:
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous_timeout])
                    if previous_setting:
                        cursor.execute("SELECT set_config(%s, %s, true)", list(previous_setting))
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
            cursor.execute("SELECT n_chunks FROM search_corpus_stats")
            row = cursor.fetchone()
        chunks = int(row[0]) if row else 0
        _corpus_size = (time.monotonic(), chunks)
    return chunks >= int(settings.SEARCH["PREVIEW_BUDGET_MIN_CHUNKS"])


def text_pair_scope(principal: Principal) -> bool | None:
    """Which ``search_text_pairs`` scope may rule out this principal's previews: the pairs of every text
    (False) for one who reads everything, those of anonymous-readable text (True) for an anonymous
    visitor, None (no rule-out) for anyone else. A scope wider than what the principal reads would let the
    speed of an empty answer tell them whether some text they may not read holds the fragment."""
    if principal.all_content:
        return False
    if principal.is_anonymous:
        return True
    return None


def fragment_absent(folded: str, *, anonymous: bool, budget_ms: int | None = None) -> bool:
    """True when no chunk text and no title in the scope (``anonymous``: only what anonymous visitors may
    read; else all) can hold the folded fragment ``folded`` (as a substring).

    Wherever ``folded`` occurs, each two of its consecutive space-separated pieces stand side by side in
    the text: the first piece as the end of a text piece, the last as the start of one, those between
    whole. ``search_text_pairs`` holds every such pair of the stored text and ``search_text_pieces`` every
    piece (both kept by triggers), so one pair or piece they lack rules the fragment out, exactly, with a
    few index probes in one statement. Pairs are checked where they can be (not across a sentence end, nor
    with a first piece under 3 characters: a probe over too many pairs); a piece no checked pair covers is
    checked on its own (a fragment of one piece lies inside one text piece), unless a pattern of it would
    be under 3 characters (no trigram to look up). False when nothing could be ruled out, or the check ran
    past ``budget_ms``.
    """
    pieces = folded.split(" ")
    scope = "anonymous" if anonymous else "NOT anonymous"
    checks: list[str] = []
    params: list[Any] = []
    covered: set[int] = set()
    for i, (left, right) in enumerate(pairwise(pieces)):
        first, last = i == 0, i + 1 == len(pieces) - 1
        if not left or left[-1] in TEXT_PAIR_BREAKS or (first and len(left) < 3):
            continue
        tail, head = left[::-1][:TEXT_PAIR_CHARS], right[:TEXT_PAIR_CHARS]
        where = [scope, "tail_rev LIKE %s" if first else "tail_rev = %s"]
        params.append(_like_escape(tail) + "%" if first else tail)
        if not last:
            where.append("head = %s")
            params.append(head)
        elif head:
            where.append("head LIKE %s")
            params.append(_like_escape(head) + "%")
        checks.append(f"EXISTS (SELECT 1 FROM search_text_pairs WHERE {' AND '.join(where)})")
        covered |= {i, i + 1}
        if len(checks) == TEXT_PAIR_CHECKS:
            break
    for i, piece in enumerate(pieces):
        if i in covered or not piece or len(checks) == TEXT_PAIR_CHECKS:
            continue
        first, last = i == 0, i == len(pieces) - 1
        if not (first or last):  # a whole piece
            checks.append(f"EXISTS (SELECT 1 FROM search_text_pieces WHERE {scope} AND piece = %s)")
            params.append(piece)
        elif len(piece) >= 3:  # the end of a piece, the start of one, or anywhere in one
            checks.append(f"EXISTS (SELECT 1 FROM search_text_pieces WHERE {scope} AND piece LIKE %s)")
            params.append(("%" if first else "") + _like_escape(piece) + ("%" if last else ""))
    if not checks:
        return False
    rows = _within_budget(f"SELECT {' AND '.join(checks)}", params, budget_ms)
    return rows is not None and not rows[0][0]


def _postings_term(cleaned: str) -> tuple[str | None, bool]:
    """The word of a typed fragment whose postings should gather the preview's content candidates, and
    whether that is exact.

    Exact: a middle word (both neighbours typed, so a whole word in every text holding the fragment) that
    occurs in at most as many chunks as its postings keep: every chunk holding the fragment is in them, as
    of the last build (a chunk written since then joins at the next, debounced, build). Otherwise the
    rarest complete word (all but the last, which may be unfinished), or None.
    """
    words = [t.folded for t in analysis.tokens(cleaned)]
    stops = analysis.all_stop_words()
    complete = {w for w in words[:-1] if w not in stops}
    if not complete:
        return None, False
    middle = {w for w in words[1:-1] if w not in stops}
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT term, df, df <= cardinality(chunk_ids) FROM search_postings "
            "WHERE field = 'surface' AND term = ANY(%s) ORDER BY df, term",
            [sorted(complete)],
        )
        rows = cursor.fetchall()
    for term, _, whole in rows:
        if whole and term in middle:
            return term, True
    return (rows[0][0], False) if rows else (None, False)


def _completion_term(cleaned: str) -> str | None:
    """For a fragment without a complete word ("kidn", "the kidn"): the corpus's most frequent word that
    starts with the last typed word, or None (a stop word, under 3 letters, or no such word)."""
    words = [t.folded for t in analysis.tokens(cleaned)]
    if not words or len(words[-1]) < 3 or words[-1] in analysis.all_stop_words():
        return None
    last = words[-1]
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT term FROM search_postings WHERE field = 'surface' AND term >= %s AND term < %s "
            "AND starts_with(term, %s) ORDER BY df DESC, term LIMIT 1",
            [last, last + "\U0010ffff", last],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _content_from_postings(
    term: str,
    pattern: str,
    chunk_col: str,
    items: Fragment,
    exclude: list[int],
    wanted: int,
    budget_ms: int | None,
    *,
    depth: int | None = None,
) -> list[tuple[Any, ...]] | None:
    """Content matches checked only on the chunks where ``term`` weighs most (its impact-ordered postings;
    the first ``depth`` of them when given): every row returned really holds the fragment.
    None when the budget ran out."""
    postings = "p.chunk_ids" if depth is None else f"p.chunk_ids[1:{int(depth)}]"
    # no ORDER BY: rows come in postings order as the plan walks the array (not promised; any real match will
    # do), whereas a sort would check every posting before the LIMIT
    statement = compose(
        """
        SELECT c.item_id
        FROM search_postings p CROSS JOIN LATERAL unnest({postings}) WITH ORDINALITY AS u(id, n)
        JOIN search_chunk c ON c.id = u.id
        WHERE p.field = 'surface' AND p.term = {term}
          AND c.{chunk_col} AND c.folded_text LIKE {pattern} ESCAPE '\\' AND c.item_id IN ({items})
          AND NOT (c.item_id = ANY({exclude}))
        LIMIT {wanted}
    """,
        postings=postings,
        term=param(term),
        chunk_col=chunk_col,
        pattern=param(pattern),
        items=items,
        exclude=param(exclude),
        wanted=param(wanted),
    )
    return _within_budget(statement.sql, list(statement.params), budget_ms)


def _bounded_postings_pass(
    term: str, scope: _PreviewScope, exclude: list[int], wanted: int, budget_ms: int | None
) -> list[tuple[Any, ...]] | None:
    """``_content_from_postings`` over as many of ``term``'s postings as ``budget_ms`` allows."""
    return _content_from_postings(
        term, scope.pattern, scope.chunk_col, scope.items, exclude, wanted, budget_ms,
        depth=_checks_within(budget_ms, wanted),
    )


def _checks_within(budget_ms: int | None, wanted: int) -> int | None:
    """How many postings a bounded pass may check in ``budget_ms`` (None: no budget, check them all)."""
    if budget_ms is None:
        return None
    return max(wanted, min(POSTINGS_CHECKS_PER_MS * budget_ms, 1000))


@reads.replica_reads
def preview_search(*, principal: Principal, text: str, limit: int = 8) -> list[PreviewHit]:
    """Search-as-you-type: case- and accent-insensitive substring match, title matches first.

    ``\\``, ``%`` and ``_`` are escaped, so ``50%`` matches the literal text. Bounded index lookups
    (trigram indexes on the folded title and chunk text, the impact-ordered postings), never a scan-and-sort.
    A fragment two of whose pieces never stand side by side, or one of whose pieces occurs in no text the
    caller may read, is answered at once with nothing (``fragment_absent``; anonymous visitors and those who
    read everything). On a corpus
    of ``PREVIEW_BUDGET_MIN_CHUNKS`` chunks or more the preview has a time budget (``PREVIEW_BUDGET_MS``, the
    whole call: its steps stop ``FINAL_READ_MS`` early to read their hits): a fragment made of common
    trigrams ("men are mor") can make a trigram index hand back most of a large corpus to re-check, and a
    preview that arrives after the next keystroke is worth nothing. A title search past half the budget is
    retried walking titles newest first (fast exactly when the fragment is common). Content matches come
    from the postings of a typed middle word when that word's list is complete (exact and bounded); else,
    for one typed word, first from the best chunks of its most frequent completion; then from the trigram
    index, and past its share from as many of the chunks where the rarest complete typed word weighs most
    as the time left allows. Whatever is found is a real substring match;
    past the budget the preview shows what it has. The full search (Enter) is exhaustive.

    In code: ``_preview_titles`` → ``_preview_content`` (only while titles leave room) → ``_preview_hits``.
    """
    started = time.monotonic()
    cleaned = normalize_query_text(text)
    if not cleaned:
        raise InvalidQuery("q is required: type at least one character.", field="q")
    limit = max(1, min(limit, PREVIEW_MAX_LIMIT))
    corpus = corpus_for(principal)
    folded = folded_text(cleaned)
    budget = _PreviewBudget.starting(started)
    pair_scope = text_pair_scope(principal)
    if pair_scope is not None and fragment_absent(folded, anonymous=pair_scope, budget_ms=budget.left_ms(0.25)):
        return []  # a pair or a piece of it occurs nowhere: no title or chunk it may read holds it
    scope = _PreviewScope.of(principal, corpus, folded)
    title_ids = _preview_titles(scope, limit, budget)
    content_ids = _preview_content(scope, cleaned, title_ids, limit, budget) if len(title_ids) < limit else []
    return _preview_hits(title_ids, content_ids[: limit - len(title_ids)], corpus=corpus, folded=folded)


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
    """What every preview step matches: the folded fragment as a LIKE pattern, over the items the caller may
    read (superseded ones left out) in the caller's corpus."""

    pattern: str
    items: Fragment
    revision_col: str
    chunk_col: str

    @classmethod
    def of(cls, principal: Principal, corpus: Corpus, folded: str) -> _PreviewScope:
        scope = ItemScope(principal, corpus)  # the default filters leave superseded items out
        items = scope.items_sql()
        assert items is not None  # no filters: the access rule alone always compiles
        return cls(_like_pattern(folded), items, scope.revision_column, scope.chunk_column)


def _preview_titles(scope: _PreviewScope, limit: int, budget: _PreviewBudget) -> list[int]:
    """The newest ``limit`` items whose title holds the fragment.

    A rare fragment: the trigram index finds its few titles at once. A common one ("there is"): the index
    hands back thousands to sort, while walking titles newest first finds 8 within a few rows. At most half
    the budget for the first try, so a common fragment has time left for the walk, and the walk leaves some
    for content matches."""
    statement = compose(
        """
        SELECT i.id FROM search_contentitem i JOIN search_revision r ON r.id = i.{revision_col}
        WHERE r.title_folded LIKE {pattern} ESCAPE '\\' AND i.id IN ({items})
        ORDER BY i.updated_at DESC, i.id LIMIT {limit}
    """,
        revision_col=scope.revision_col,
        pattern=param(scope.pattern),
        items=scope.items,
        limit=param(limit),
    )
    sql, params = statement.sql, list(statement.params)
    rows = _within_budget(sql, params, budget.left_ms(0.5))
    if rows is None:
        rows = _within_budget(sql, params, budget.left_ms(0.6), setting=("enable_bitmapscan", "off")) or []
    return [r[0] for r in rows]


def _content_by_trigrams(
    scope: _PreviewScope, exclude: list[int], wanted: int, budget_ms: int | None
) -> list[tuple[Any, ...]] | None:
    """Content matches through the trigram index on the folded chunk text: exact, and fast unless the fragment
    is common. None when the budget ran out."""
    statement = compose(
        """
            SELECT c.item_id FROM search_chunk c
            WHERE c.{chunk_col} AND c.folded_text LIKE {pattern} ESCAPE '\\' AND c.item_id IN ({items})
              AND NOT (c.item_id = ANY({exclude}))
            LIMIT {wanted}
        """,
        chunk_col=scope.chunk_col,
        pattern=param(scope.pattern),
        items=scope.items,
        exclude=param(exclude),
        wanted=param(wanted),
    )
    return _within_budget(statement.sql, list(statement.params), budget_ms)


def _preview_content(
    scope: _PreviewScope, cleaned: str, title_ids: list[int], limit: int, budget: _PreviewBudget
) -> list[int]:
    """Items whose content (not their title: ``title_ids`` are left out) holds the fragment, in the order
    found: from the postings of a typed middle word when its list is complete; else, for one typed word on a
    budgeted corpus, first from the best chunks of its most frequent completion, then from the trigram index,
    and past its share from the best chunks of the rarest complete typed word."""
    wanted = (limit - len(title_ids)) * 4
    term, exact = _postings_term(cleaned)
    content_ids: list[int] = []
    if term and exact:
        # A middle word with a complete postings list holds every match: check only its chunks.
        in_postings = _content_from_postings(
            term, scope.pattern, scope.chunk_col, scope.items, title_ids, wanted, budget.left_ms()
        )
        _add_item_ids(content_ids, in_postings)
        cut_short = in_postings is None
    else:
        completion = _completion_term(cleaned) if budget.budgeted and term is None else None
        if completion:
            # One word, maybe unfinished: the best chunks of its most frequent completion nearly all hold it
            # (a few ms), where the trigram index may hand back much of a large corpus to re-check.
            completed = _bounded_postings_pass(completion, scope, title_ids, wanted, budget.left_ms(0.5))
            _add_item_ids(content_ids, completed)
        cut_short = False
        if len(content_ids) < limit - len(title_ids):
            # The trigram index: exact, and fast unless the fragment is common. Past its share, the best
            # chunks of the rarest complete typed word, as many as the time left allows (a pass the
            # database cuts short would show nothing, so the pass is sized to end first).
            by_trigrams = _content_by_trigrams(scope, title_ids + content_ids, wanted, budget.left_ms(0.6))
            cut_short = by_trigrams is None
            if by_trigrams is None and term:
                rarest = _bounded_postings_pass(term, scope, title_ids + content_ids, wanted, budget.left_ms())
                _add_item_ids(content_ids, rarest)
            _add_item_ids(content_ids, by_trigrams)
    if cut_short:
        logger.info("preview: content matches for %r cut short by the time budget", cleaned[:60])
    return content_ids


def _add_item_ids(item_ids: list[int], rows: list[tuple[Any, ...]] | None) -> None:
    """Append each row's item id not yet in ``item_ids`` (``rows`` None: a step past its budget, nothing)."""
    for (item_id,) in rows or []:
        if item_id not in item_ids:
            item_ids.append(item_id)


def _preview_hits(title_ids: list[int], content_ids: list[int], *, corpus: Corpus, folded: str) -> list[PreviewHit]:
    """The hits in order, title matches first, each title read from the caller's corpus and marked where
    it holds the fragment."""
    ids = title_ids + content_ids
    items = {
        i.pk: i
        for i in ContentItem.objects.filter(pk__in=ids)
        .select_related("live_revision", "latest_revision")
        .only("pk", "slug", "content_type", "primary_domain", "live_revision__title", "latest_revision__title")
        .order_by()
    }
    hits = []
    for item_id in ids:
        item = items[item_id]
        revision = item.live_revision if corpus == "live" else (item.latest_revision or item.live_revision)
        title = revision.title if revision else ""
        spans = folded_match_spans(title, folded)
        hits.append(PreviewHit(item.pk, title, item.content_type, item.primary_domain, item.get_absolute_url(),
                               item_id in title_ids, spans))
    return hits
