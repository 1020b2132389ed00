"""Text analysis shared by the build and the query parser, so both see words the same way.

A word yields up to three forms:
- *folded*: lower-cased, NFKC, accents and Arabic diacritics removed (``Écrit`` → ``ecrit``), tatweel removed
  and Arabic letter variants folded the standard way (hamza-carrying alefs and alef wasla → ا, alef maqsura
  ى → ي, ta marbuta ة → ه), so ``مدرسة`` and ``مدرسه``, ``على`` and ``علي`` are one word;
- *stem*: the Snowball stem of the folded word in the item's language (``simple`` = no stemming);
- *title form*: the folded word with a leading article removed (``l'offre`` → ``offre``, ``الغابات`` → ``غابات``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import Stemmer

STEM_LANGUAGES = {"en": "english", "fr": "french", "ar": "arabic"}
_DATA = Path(__file__).parent / "analysis_data"

# Letters, digits and joiners inside a word; an apostrophe splits (l'offre → l, offre). U+02BC (the modifier
# letter apostrophe some keyboards type for ') counts as an apostrophe, not as a letter. Combining marks after a
# letter (Arabic harakat, a decomposed accent) stay inside the word: ``الكِتَابةِ`` is one word, as is ``écrit``
# typed as e + U+0301 (they are not word characters to ``re``, which split such words into pieces). ``fold``
# then strips them.
# Every character ``unicodedata.combining`` marks (generated; pinned by a test to this Python's Unicode data,
# and the same ranges migration 0013 strips in SQL), as regex ranges.
COMBINING_MARKS = (
    r"\u0300-\u034e\u0350-\u036f\u0483-\u0487\u0591-\u05bd\u05bf\u05c1-\u05c2\u05c4-\u05c5\u05c7"
    r"\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7-\u06e8\u06ea-\u06ed\u0711"
    r"\u0730-\u074a\u07eb-\u07f3\u07fd\u0816-\u0819\u081b-\u0823\u0825-\u0827\u0829-\u082d"
    r"\u0859-\u085b\u0898-\u089f\u08ca-\u08e1\u08e3-\u08ff\u093c\u094d\u0951-\u0954\u09bc\u09cd\u09fe"
    r"\u0a3c\u0a4d\u0abc\u0acd\u0b3c\u0b4d\u0bcd\u0c3c\u0c4d\u0c55-\u0c56\u0cbc\u0ccd\u0d3b-\u0d3c"
    r"\u0d4d\u0dca\u0e38-\u0e3a\u0e48-\u0e4b\u0eb8-\u0eba\u0ec8-\u0ecb\u0f18-\u0f19\u0f35\u0f37\u0f39"
    r"\u0f71-\u0f72\u0f74\u0f7a-\u0f7d\u0f80\u0f82-\u0f84\u0f86-\u0f87\u0fc6\u1037\u1039-\u103a\u108d"
    r"\u135d-\u135f\u1714-\u1715\u1734\u17d2\u17dd\u18a9\u1939-\u193b\u1a17-\u1a18\u1a60\u1a75-\u1a7c"
    r"\u1a7f\u1ab0-\u1abd\u1abf-\u1ace\u1b34\u1b44\u1b6b-\u1b73\u1baa-\u1bab\u1be6\u1bf2-\u1bf3\u1c37"
    r"\u1cd0-\u1cd2\u1cd4-\u1ce0\u1ce2-\u1ce8\u1ced\u1cf4\u1cf8-\u1cf9\u1dc0-\u1dff\u20d0-\u20dc\u20e1"
    r"\u20e5-\u20f0\u2cef-\u2cf1\u2d7f\u2de0-\u2dff\u302a-\u302f\u3099-\u309a\ua66f\ua674-\ua67d"
    r"\ua69e-\ua69f\ua6f0-\ua6f1\ua806\ua82c\ua8c4\ua8e0-\ua8f1\ua92b-\ua92d\ua953\ua9b3\ua9c0\uaab0"
    r"\uaab2-\uaab4\uaab7-\uaab8\uaabe-\uaabf\uaac1\uaaf6\uabed\ufb1e\ufe20-\ufe2f\U000101fd\U000102e0"
    r"\U00010376-\U0001037a\U00010a0d\U00010a0f\U00010a38-\U00010a3a\U00010a3f\U00010ae5-\U00010ae6"
    r"\U00010d24-\U00010d27\U00010eab-\U00010eac\U00010f46-\U00010f50\U00010f82-\U00010f85\U00011046"
    r"\U00011070\U0001107f\U000110b9-\U000110ba\U00011100-\U00011102\U00011133-\U00011134\U00011173"
    r"\U000111c0\U000111ca\U00011235-\U00011236\U000112e9-\U000112ea\U0001133b-\U0001133c\U0001134d"
    r"\U00011366-\U0001136c\U00011370-\U00011374\U00011442\U00011446\U0001145e\U000114c2-\U000114c3"
    r"\U000115bf-\U000115c0\U0001163f\U000116b6-\U000116b7\U0001172b\U00011839-\U0001183a"
    r"\U0001193d-\U0001193e\U00011943\U000119e0\U00011a34\U00011a47\U00011a99\U00011c3f\U00011d42"
    r"\U00011d44-\U00011d45\U00011d97\U00016af0-\U00016af4\U00016b30-\U00016b36\U00016ff0-\U00016ff1"
    r"\U0001bc9e\U0001d165-\U0001d169\U0001d16d-\U0001d172\U0001d17b-\U0001d182\U0001d185-\U0001d18b"
    r"\U0001d1aa-\U0001d1ad\U0001d242-\U0001d244\U0001e000-\U0001e006\U0001e008-\U0001e018"
    r"\U0001e01b-\U0001e021\U0001e023-\U0001e024\U0001e026-\U0001e02a\U0001e130-\U0001e136\U0001e2ae"
    r"\U0001e2ec-\U0001e2ef\U0001e8d0-\U0001e8d6\U0001e944-\U0001e94a"
)
WORD_RE = re.compile(rf"[^\W_\u02bc](?:[^\W_\u02bc]|[{COMBINING_MARKS}])*", re.UNICODE)
APOSTROPHES = frozenset("'\u2019\u02bc\u2018`\u00b4")
# French elided words: ``l'offre``, ``qu'il``, ``jusqu'à`` — dropped before the apostrophe (as Lucene's
# ElisionFilter does), so the word after it is the one indexed, counted and matched.
FRENCH_ELISIONS = frozenset({"l", "d", "j", "m", "n", "s", "t", "c", "qu", "jusqu", "lorsqu", "puisqu", "quoiqu"})
# Zero-width, bidi and tag characters: stripped before anything else.
INVISIBLE_RE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U000e0000-\U000e0fff]"
)
ARABIC_TATWEEL = "\u0640"
# Applied after diacritics are stripped (NFKD already turns أ إ آ into ا, ؤ into و, ئ into ي).
ARABIC_LETTER_FOLDS = str.maketrans({"\u0671": "\u0627", "\u0649": "\u064a", "\u0629": "\u0647"})
TITLE_ARTICLES = {"the", "a", "an", "le", "la", "les", "l", "un", "une", "des", "du", "de", "d"}
ARABIC_ARTICLE = "ال"
ARABIC_CLITICS = ("و", "ف")


@lru_cache(maxsize=8)
def stop_words(language: str) -> frozenset[str]:
    names = {"en": "english", "fr": "french", "ar": "arabic"}
    name = names.get(language)
    if not name:
        return frozenset()
    words = (_DATA / f"{name}.stop").read_text(encoding="utf-8").split()
    return frozenset(fold(w) for w in words)


ALL_STOP_WORDS: frozenset[str] = frozenset()


def all_stop_words() -> frozenset[str]:
    global ALL_STOP_WORDS
    if not ALL_STOP_WORDS:
        ALL_STOP_WORDS = stop_words("en") | stop_words("fr") | stop_words("ar")
    return ALL_STOP_WORDS


def strip_invisible(text: str) -> str:
    return INVISIBLE_RE.sub("", text)


@lru_cache(maxsize=200_000)
def fold(word: str) -> str:
    """Lower-case, compatibility-normalise and strip combining marks (accents, harakat)."""
    decomposed = unicodedata.normalize("NFKD", word.lower().replace(ARABIC_TATWEEL, ""))
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", stripped).translate(ARABIC_LETTER_FOLDS)


@lru_cache(maxsize=8)
def _stemmer(language: str) -> Stemmer.Stemmer | None:
    algorithm = STEM_LANGUAGES.get(language)
    return Stemmer.Stemmer(algorithm, 100_000) if algorithm else None


@lru_cache(maxsize=400_000)
def stem(folded_word: str, language: str) -> str:
    stemmer = _stemmer(language)
    if stemmer is None:
        return folded_word
    return fold(stemmer.stemWord(folded_word))


def title_form(folded_word: str) -> str:
    if folded_word.startswith(ARABIC_ARTICLE) and len(folded_word) > len(ARABIC_ARTICLE) + 1:
        return folded_word[len(ARABIC_ARTICLE) :]
    return folded_word


def is_arabic(word: str) -> bool:
    return any("\u0600" <= ch <= "\u06ff" for ch in word)


def arabic_clitic_variants(folded_word: str) -> list[str]:
    """``والخامسة`` → ``الخامسة``: a leading و or ف is also tried stripped (words of 4+ letters)."""
    if folded_word[:1] in ARABIC_CLITICS and len(folded_word) >= 4 and is_arabic(folded_word):
        return [folded_word[1:]]
    return []


@lru_cache(maxsize=200_000)
def preview_forms(folded_word: str) -> tuple[str, ...]:
    """The forms under which the live preview finds a word: as folded and, for Arabic, with a leading و/ف
    clitic and then the article stripped (``والغابات`` → ``والغابات``, ``الغابات``, ``غابات``). A word typed
    into the search bar is looked up under the same forms, so ``والغاب`` finds ``الغابات``."""
    forms = [folded_word, *arabic_clitic_variants(folded_word)]
    for form in list(forms):
        if is_arabic(form):
            forms.append(title_form(form))
    return tuple(dict.fromkeys(forms))


@dataclass(frozen=True)
class Token:
    text: str  # as written
    folded: str
    start: int
    end: int


def _elided(text: str, end: int, folded: str) -> bool:
    """Whether the word ending at ``end`` is a French elision (``l`` of ``l'offre``)."""
    return (
        folded in FRENCH_ELISIONS
        and end + 1 < len(text)
        and text[end] in APOSTROPHES
        and text[end + 1].isalpha()
    )


def tokens(text: str) -> Iterator[Token]:
    for match in WORD_RE.finditer(text):
        word = match.group(0)
        folded = fold(word)
        if folded and not _elided(text, match.end(), folded):
            yield Token(word, folded, match.start(), match.end())


def index_terms(text: str, language: str) -> tuple[dict[str, list[int]], dict[str, list[int]], int]:
    """Stem and surface postings (term → 1-based positions) of a text, stop words removed, and its length."""
    stops = all_stop_words()
    stems: dict[str, list[int]] = {}
    surface: dict[str, list[int]] = {}
    position = 0
    for token in tokens(text):
        position += 1
        if token.folded in stops:
            continue
        surface.setdefault(token.folded, []).append(position)
        stems.setdefault(stem(token.folded, language), []).append(position)
    return stems, surface, position


def title_terms(title: str) -> list[str]:
    terms = []
    for token in tokens(title):
        if token.folded in TITLE_ARTICLES:
            continue
        terms.append(title_form(token.folded))
    return terms


def quote_lexeme(lexeme: str, *, prefix: bool = False) -> str:
    """``lexeme`` as one quoted lexeme of a tsvector or tsquery literal: ``it's`` → ``'it''s'``, a backslash
    doubled, so every character (``:``, ``|``, ``&``, ``!``, spaces) stays part of the lexeme. ``prefix`` adds the
    tsquery prefix mark (``'harb':*``). The one place the engine quotes a lexeme; never build one by hand.
    """
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" + (":*" if prefix else "")


def tsquery_any(lexemes: Iterable[str], *, prefix: bool = False) -> str:
    """A tsquery literal matching any of ``lexemes`` (``'a' | 'b'``, or ``'a':* | 'b':*`` with ``prefix``), sorted,
    duplicates and empty lexemes dropped. With none left it is ``""``: cast to tsquery, the empty query, which
    matches nothing (a quoted empty lexeme, ``''``, is a syntax error in PostgreSQL).
    """
    parts = sorted({quote_lexeme(lexeme, prefix=prefix) for lexeme in lexemes if lexeme})
    return " | ".join(parts)


MAX_POSITION = 16383
# The longest word (in UTF-8 bytes) a tsvector keeps: PostgreSQL refuses a lexeme of 2 KB or more; a longer
# "word" is no word anyone searches for.
MAX_LEXEME_BYTES = 2000


def to_tsvector_literal(postings: dict[str, list[int]]) -> str:
    """A tsvector literal (``'word':1,4 'other':2``) with positions capped as PostgreSQL requires."""
    parts = []
    for term, positions in postings.items():
        if not term or len(term.encode()) > MAX_LEXEME_BYTES:
            continue
        capped = sorted({min(max(p, 1), MAX_POSITION) for p in positions})[:256]
        parts.append(f"{quote_lexeme(term)}:{','.join(str(p) for p in capped)}")
    return " ".join(parts)


def terms_tsvector(terms: list[str]) -> str:
    postings: dict[str, list[int]] = {}
    for position, term in enumerate(terms, start=1):
        postings.setdefault(term, []).append(position)
    return to_tsvector_literal(postings)


# PostgreSQL refuses a tsvector over 1 MB; a text whose distinct words would pass this keeps its first ones.
PREVIEW_WORDS_MAX_BYTES = 900_000


def preview_words_tsvector(*texts: str) -> str:
    """A tsvector literal (no positions) of every word of ``texts`` under its ``preview_forms``: what the live
    preview matches typed words against, by ``@@`` and a GIN index."""
    seen: dict[str, None] = {}
    size = 0
    for text in texts:
        for token in tokens(text):
            for form in preview_forms(token.folded):
                if form in seen or len(form.encode()) > MAX_LEXEME_BYTES:
                    continue
                size += len(form.encode()) + 4
                if size > PREVIEW_WORDS_MAX_BYTES:
                    return " ".join(quote_lexeme(w) for w in seen)
                seen[form] = None
    return " ".join(quote_lexeme(w) for w in seen)


def title_lead(title: str) -> str:
    """A tsvector literal of the forms of a title's first word, articles skipped (``The tender …`` →
    ``tender``): the preview ranks titles that begin with a typed word first."""
    for token in tokens(title):
        if token.folded not in TITLE_ARTICLES:
            return " ".join(quote_lexeme(w) for w in preview_forms(token.folded) if len(w.encode()) <= MAX_LEXEME_BYTES)
    return ""


def revision_preview_columns(title: str, body: str) -> dict[str, str]:
    """The columns of a revision the live preview reads (``search.engine.preview``), computed when the revision
    is written: its folded title, and the tsvectors of its title's words, its title's first word and every
    word of title and body."""
    return {
        "title_folded": folded_text(title)[:500],
        "title_words": preview_words_tsvector(title),
        "title_lead": title_lead(title),
        "preview_words": preview_words_tsvector(title, body),
    }


def folded_text(text: str) -> str:
    """Lower-cased, accent-folded copy with the same length semantics used for substring preview."""
    return fold(strip_invisible(text))
