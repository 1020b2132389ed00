"""Which language a text is in: items at import, chunks at the build, queries at search time.

One detector for all three (py3langid, restricted to the languages the engine analyses), so a chunk and a
query written in the same language are always labelled alike. A text with no letters, or one the detector is
unsure of, gets no label (``None``) and the caller falls back to what it knows (the item's language).
"""

from __future__ import annotations

from functools import lru_cache

# The languages the engine stems, normalises and measures its lanes on (search.text.analysis, lane_weights.json).
LANGUAGES = ("en", "fr", "ar")
# Below this posterior a label is a guess: "cancer" is 0.52 English, 0.48 French.
MIN_CONFIDENCE = 0.8
# Texts longer than this are judged on their first part (a chunk is at most about 1,200 characters).
MAX_DETECT_CHARS = 2000


@lru_cache(maxsize=1)
def _identifier():  # type: ignore[no-untyped-def]
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


def _has_letters(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


@lru_cache(maxsize=20_000)
def language_probabilities(text: str) -> tuple[tuple[str, float], ...]:
    """``((language, probability), …)`` over :data:`LANGUAGES`, most likely first; empty without letters."""
    text = text[:MAX_DETECT_CHARS]
    if not _has_letters(text):
        return ()
    ranked = _identifier().rank(text)
    return tuple((lang, float(p)) for lang, p in ranked if lang in LANGUAGES)


def detect_language(text: str, *, min_confidence: float = MIN_CONFIDENCE) -> str | None:
    """The language of ``text`` when the detector is at least ``min_confidence`` sure, else ``None``."""
    ranked = language_probabilities(text)
    if ranked and ranked[0][1] >= min_confidence:
        return ranked[0][0]
    return None


def chunk_language(text: str, *, item_language: str) -> str:
    """A chunk's language: what its text says when that is clear, else its item's.

    An item tagged French may hold an English section; a short chunk ("Contact: …") keeps the item's tag.
    """
    if len(text) >= 40:
        detected = detect_language(text, min_confidence=0.9)
        if detected:
            return detected
    return item_language
