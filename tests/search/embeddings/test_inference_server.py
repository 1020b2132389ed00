"""EMBEDDING_PROVIDER=openai against an OpenAI-compatible inference server running e5 (as text-embeddings-inference,
vLLM or Infinity would on a GPU host): a local server speaking the protocol, running the same model through
ONNX Runtime, reached through the real ``openai`` client."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from search.embeddings import e5_onnx, providers
from search.errors import EmbeddingUnavailable
from tests.search.embeddings.test_e5_onnx import TEXTS
from tests.search.fake_openai import FakeOpenAI, serving


@pytest.fixture(scope="module")
def e5_raw() -> e5_onnx.E5Onnx:
    from django.conf import settings

    return e5_onnx.E5Onnx(e5_onnx.ensure_model(Path(settings.MODEL_CACHE_DIR)))


@pytest.fixture
def e5_server(e5_raw: e5_onnx.E5Onnx) -> Iterator[FakeOpenAI]:
    """A server embedding exactly the text it is sent (no prefix of its own), with multilingual-e5-small."""
    with serving() as fake:
        fake.embedder = lambda texts: e5_raw._embed(texts, "", "document").tolist()
        yield fake


@pytest.fixture
def server_settings(settings: Any, e5_server: FakeOpenAI) -> Any:
    settings.EMBEDDING_PROVIDER = "openai"
    settings.OPENAI_API_KEY = "sk-local"
    settings.OPENAI_BASE_URL = e5_server.url
    settings.OPENAI_EMBEDDING_MODEL = "intfloat/multilingual-e5-small"
    settings.OPENAI_EMBEDDING_SPACE = "multilingual-e5-small-q4"
    settings.OPENAI_EMBEDDING_PREFIXES = "auto"
    settings.OPENAI_EMBEDDING_BATCH = 2
    settings.OPENAI_TIMEOUT_S = 5.0
    settings.OPENAI_MAX_RETRIES = 1
    return settings


def texts_sent(server: FakeOpenAI) -> list[str]:
    return [text for path, request in server.requests if path.endswith("/embeddings") for text in request["input"]]


def test_the_servers_vectors_join_the_local_models_space(server_settings: Any, e5_server: FakeOpenAI) -> None:
    remote = providers.OpenAIEmbedder()
    local = providers.E5Embedder(engine="onnx")

    documents = np.asarray(remote.embed(TEXTS))
    query = np.asarray(providers.embed_query(remote, "how are framework prices set"))

    # the same space: the name the local engine writes, vectors interchangeable with its own
    assert remote.name == local.name == "multilingual-e5-small-q4" and remote.dimensions == 384
    assert (documents * np.asarray(local.embed(TEXTS))).sum(axis=1).min() > 0.999
    assert float(query @ np.asarray(local.embed_query("how are framework prices set"))) > 0.999
    # e5's prefixes were added (the server adds none), five texts went two to a request
    sent = texts_sent(e5_server)
    assert sent[:5] == [f"passage: {text}" for text in TEXTS] and sent[5] == "query: how are framework prices set"
    assert [len(r["input"]) for p, r in e5_server.requests if p.endswith("/embeddings")] == [2, 2, 1, 1]
    assert all("dimensions" not in r for _, r in e5_server.requests)  # only text-embedding-3 takes it
    # queries for that space can then be embedded on this machine's CPU, by the local engine
    assert isinstance(providers.provider_for_model("multilingual-e5-small-q4", 384), providers.E5Embedder)


def test_without_prefixes_the_vectors_are_not_e5s(server_settings: Any, e5_server: FakeOpenAI) -> None:
    server_settings.OPENAI_EMBEDDING_PREFIXES = "none"
    with pytest.raises(ImproperlyConfigured, match="needs e5's prefixes"):
        providers.OpenAIEmbedder()  # e5's space cannot take vectors made without them
    server_settings.OPENAI_EMBEDDING_SPACE = ""
    server_settings.OPENAI_EMBEDDING_DIMENSIONS = 384
    remote = providers.OpenAIEmbedder()
    [vector] = remote.embed([TEXTS[0]])
    assert remote.name == "intfloat/multilingual-e5-small@384"
    assert texts_sent(e5_server) == [TEXTS[0]]
    [prefixed] = providers.E5Embedder(engine="onnx").embed([TEXTS[0]])
    assert float(np.asarray(vector) @ np.asarray(prefixed)) < 0.999


def test_a_model_of_its_own_gets_a_space_of_its_own(server_settings: Any, e5_server: FakeOpenAI) -> None:
    server_settings.OPENAI_EMBEDDING_SPACE = ""
    server_settings.OPENAI_EMBEDDING_DIMENSIONS = 384
    remote = providers.OpenAIEmbedder()
    # "auto" knows the model needs e5's prefixes; the space's name says they were used
    assert remote.name == "intfloat/multilingual-e5-small[e5]@384"
    assert len(remote.embed(["x"])[0]) == 384
    assert texts_sent(e5_server) == ["passage: x"]
    # the space's provider, found from its name alone, embeds queries the same way
    again = providers.provider_for_model("intfloat/multilingual-e5-small[e5]@384", 384)
    assert isinstance(again, providers.OpenAIEmbedder) and again.query_prefix == "query: "


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda a: {**a, "data": a["data"][:-1]}, "answered 1 vectors for 2 texts"),
        (lambda a: {**a, "data": [{**d, "embedding": d["embedding"] + [0.1] * 384} for d in a["data"]]},
         "vector of 768 numbers, not 384"),
        (lambda a: {**a, "data": [{**d, "embedding": ["x"] * 384} for d in a["data"]]},
         "something other than numbers|failed"),
        (lambda a: {**a, "data": [{**d, "embedding": [0.0] * 384} for d in a["data"]]}, "all-zero vector"),
        (lambda a: {**a, "data": [{**d, "index": 0} for d in a["data"]]}, "indexes are not 0 to 1"),
    ],
)
def test_a_server_answering_garbage_is_refused_with_a_reason(
    server_settings: Any, e5_server: FakeOpenAI, mangle: Any, message: str
) -> None:
    e5_server.mangle = mangle
    with pytest.raises(EmbeddingUnavailable, match=message):
        providers.OpenAIEmbedder().embed(TEXTS[:2])


def test_a_failing_server_is_retried_then_answers(server_settings: Any, e5_server: FakeOpenAI) -> None:
    e5_server.fail_times = 1
    [vector] = providers.OpenAIEmbedder().embed(["retry me"])
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-6)
    assert len(texts_sent(e5_server)) == 2
