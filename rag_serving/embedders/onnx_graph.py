"""The ONNX graph of a sentence-transformers folder, built from its weights alone.

No PyTorch: the weights are read from ``model.safetensors`` with safetensors' numpy
reader and laid into a graph of standard ONNX operators (opset 17) that does what the
folder's modules say — the transformer (``config.json``), its pooling
(``1_Pooling/config.json``) and, when ``modules.json`` lists it, the normalisation.

Architectures (``config.json``'s ``model_type``):

- ``bert`` — MiniLM, BGE, E5 (English), GTE (the BERT-based ones), and any BERT;
- ``roberta`` and ``xlm-roberta`` — position ids counted from the padding index, as
  the originals do, and one token type;
- ``mpnet`` — relative position buckets added to every layer's attention scores.

Anything else (another architecture, a ``Dense`` module after pooling, absolute
positions of another kind) raises ``UnsupportedModel`` naming what is missing; the
embedder then needs the ``torch`` extra. The graph's input and output names are those
of the former PyTorch export: ``input_ids``, ``attention_mask`` (and
``token_type_ids`` where the model has segment ids) → ``embedding`` [batch, dim].
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Bumped when the graph this module builds changes: a cached graph of another version
# is built again.
GRAPH_VERSION = "1"
OPSET = 17
# Added to the attention scores of padding positions (exp() of it is 0 in float32).
MASKED = -1e9
SUPPORTED = ("bert", "roberta", "xlm-roberta", "mpnet")
# Pooling modes by their names in the two config formats.
_POOLING_NAMES = {
    "cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max",
    "mean_sqrt_len_tokens": "mean_sqrt_len",
}  # fmt: skip
# Modules a sentence-transformers folder may list that the graph reproduces.
_KNOWN_MODULES = ("Transformer", "Pooling", "Normalize")


class UnsupportedModel(Exception):
    """The folder holds something this builder does not reproduce (said in one line)."""


@dataclass(frozen=True)
class Pooling:
    mode: str  # "mean", "cls", "max" or "mean_sqrt_len"
    normalize: bool


def read_pooling(model_dir: Path) -> Pooling:
    """The folder's pooling and whether it normalises, from its modules."""
    modules_file = model_dir / "modules.json"
    modules = json.loads(modules_file.read_text()) if modules_file.is_file() else []
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    unknown = [k for k in kinds if k not in _KNOWN_MODULES]
    if unknown:
        raise UnsupportedModel(f"its modules.json lists {', '.join(unknown)}")
    pooling_dir = next(
        (model_dir / m["path"] for m, k in zip(modules, kinds, strict=True) if k == "Pooling"),
        model_dir / "1_Pooling",
    )
    config_file = pooling_dir / "config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    if "pooling_mode" in config:  # sentence-transformers 5.2+: a name or a list of names
        given = config["pooling_mode"]
        names = [given] if isinstance(given, str) else list(given)
    else:  # earlier versions: one flag per mode
        names = [
            name
            for name in (
                "cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
                "weightedmean_tokens", "lasttoken",
            )
            if config.get(f"pooling_mode_{name}")
        ] or ["mean"]  # fmt: skip
    modes = [_POOLING_NAMES.get(name, name) for name in names]
    if len(modes) != 1 or modes[0] not in ("cls", "mean", "max", "mean_sqrt_len"):
        raise UnsupportedModel(f"its pooling ({', '.join(names)})")
    if config.get("include_prompt") is False:
        raise UnsupportedModel("its pooling leaves the prompt out (include_prompt = false)")
    return Pooling(modes[0], "Normalize" in kinds)


def read_weights(model_dir: Path) -> dict[str, np.ndarray]:
    """The transformer's weights by name, without a ``bert.``/``roberta.`` prefix.
    Float tensors stored in float16 or bfloat16 (the bundled model's are float16,
    setup.py) come back as float32: the graph computes in float32."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise UnsupportedModel("it has no model.safetensors (only PyTorch's .bin format)")
    weights: dict[str, np.ndarray] = {}
    for file in files:
        weights.update(_float32_tensors(file))
    for prefix in ("bert.", "roberta.", "mpnet.", "model."):
        if any(name.startswith(prefix + "embeddings.") for name in weights):
            weights = {n[len(prefix) :]: w for n, w in weights.items() if n.startswith(prefix)}
            break
    return weights


def _float32_tensors(file: Path) -> dict[str, np.ndarray]:
    """A safetensors file's tensors, its float16 and bfloat16 ones as float32. numpy
    has no bfloat16: those are read from the file as 16-bit words and widened (a
    bfloat16 is the top half of a float32)."""
    from safetensors import safe_open

    widened: dict[str, np.ndarray] = {}
    with file.open("rb") as raw:
        size = int.from_bytes(raw.read(8), "little")
        header = json.loads(raw.read(size))
        for name, info in header.items():
            if name == "__metadata__" or info.get("dtype") != "BF16":
                continue
            begin, end = info["data_offsets"]
            raw.seek(8 + size + begin)
            words = np.frombuffer(raw.read(end - begin), dtype="<u2")
            wide = (words.astype(np.uint32) << 16).view(np.float32)
            widened[name] = wide.reshape(info["shape"])
    tensors: dict[str, np.ndarray] = {}
    with safe_open(str(file), framework="numpy") as handle:
        for name in handle.keys():  # noqa: SIM118 - a safe_open handle, not a dict
            tensor = widened[name] if name in widened else handle.get_tensor(name)
            tensors[name] = tensor.astype(np.float32) if tensor.dtype == np.float16 else tensor
    return tensors


class _Graph:
    """Nodes and initializers being laid out, with unique names."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: np.ndarray | float | int | list[int], hint: str = "c") -> str:
        from onnx import numpy_helper

        array = np.asarray(value)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, key: str, transpose: bool = False) -> str:
        if key not in self.weights:
            raise UnsupportedModel(f"its weights have no {key!r}")
        array = self.weights[key].astype(np.float32)
        return self.const(np.ascontiguousarray(array.T) if transpose else array, key)

    def op(self, kind: str, inputs: list[str], hint: str = "", **attributes: Any) -> str:
        from onnx import helper

        output = self.name(hint or kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [output], **attributes))
        return output

    def linear(self, x: str, prefix: str) -> str:
        """``x @ W.T + b`` for the weight and bias under ``prefix``."""
        product = self.op("MatMul", [x, self.weight(f"{prefix}.weight", transpose=True)])
        return self.op("Add", [product, self.weight(f"{prefix}.bias")])

    def layer_norm(self, x: str, prefix: str, epsilon: float) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.weight(f"{prefix}.weight"), self.weight(f"{prefix}.bias")],
            axis=-1,
            epsilon=epsilon,
        )

    def gelu(self, x: str) -> str:
        """The exact GELU, ``0.5 x (1 + erf(x / √2))``."""
        scaled = self.op("Div", [x, self.const(math.sqrt(2.0))])
        erf = self.op("Erf", [scaled])
        one_plus = self.op("Add", [erf, self.const(1.0)])
        half_x = self.op("Mul", [x, self.const(0.5)])
        return self.op("Mul", [half_x, one_plus])


def check_supported(model_dir: Path) -> tuple[dict[str, Any], Pooling]:
    """The folder's transformer config and pooling, when the builder covers them
    (without reading the weights); else ``UnsupportedModel`` says what it lacks."""
    config = json.loads((model_dir / "config.json").read_text())
    model_type = str(config.get("model_type", ""))
    if model_type not in SUPPORTED:
        raise UnsupportedModel(
            f"its architecture {model_type!r} (built without PyTorch: {', '.join(SUPPORTED)})"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise UnsupportedModel(f"its {config['position_embedding_type']} position embeddings")
    act = config.get("hidden_act", "gelu")
    if act not in ("gelu", "gelu_python"):
        raise UnsupportedModel(f"its activation {act!r}")
    if not any(model_dir.glob("*.safetensors")):
        raise UnsupportedModel("it has no model.safetensors (only PyTorch's .bin format)")
    return config, read_pooling(model_dir)


def weights_key(model_dir: Path, cache_dir: Path | None = None) -> str:
    """A hash of the folder's weights and configs (16 hex digits). Remembered in
    ``cache_dir/weights.json`` by the files' sizes and mtimes, so that only a changed
    folder is read again (hashing the bundled model's 45 MB takes under 0.1 s)."""
    files = sorted(
        path
        for pattern in ("*.json", "*.safetensors", "pytorch_model.bin", "*/config.json")
        for path in model_dir.glob(pattern)
        if path.is_file()
    )
    stamp = [[path.relative_to(model_dir).as_posix(), *_stat(path)] for path in files]
    memo_file = cache_dir / "weights.json" if cache_dir is not None else None
    memo: dict[str, Any] = {}
    if memo_file is not None and memo_file.is_file():
        try:
            memo = json.loads(memo_file.read_text())
        except (OSError, ValueError):
            memo = {}
    known = memo.get(str(model_dir))
    if isinstance(known, dict) and known.get("stamp") == stamp:
        return str(known["key"])
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(model_dir).as_posix().encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
    key = digest.hexdigest()[:16]
    if memo_file is not None:
        memo[str(model_dir)] = {"stamp": stamp, "key": key}
        try:
            memo_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo_file.with_name(f".{memo_file.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(memo))
            os.replace(tmp, memo_file)
        except OSError:
            pass  # a read-only data dir hashes again next time
    return key


def _stat(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_size, info.st_mtime_ns]


def build_encoder(model_dir: Path) -> Any:
    """The ``onnx.ModelProto`` of the folder's encoder (tokens → pooled vector)."""
    from onnx import TensorProto, helper

    config, pooling = check_supported(model_dir)
    model_type = str(config["model_type"])
    weights = read_weights(model_dir)
    graph = _Graph(weights)
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_size = hidden // heads
    epsilon = float(config.get("layer_norm_eps", 1e-12))
    with_types = model_type == "bert" and int(config.get("type_vocab_size", 2)) > 1

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
    ]
    if with_types:
        inputs.append(
            helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"])
        )

    x = _embeddings(graph, config, model_type, with_types, epsilon)
    mask = graph.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    # [batch, 1, 1, seq]: 0 where a token is, MASKED where padding is.
    mask_4d = graph.op("Unsqueeze", [mask, graph.const(np.array([1, 2], dtype=np.int64))])
    bias = graph.op(
        "Mul", [graph.op("Sub", [graph.const(1.0), mask_4d]), graph.const(MASKED)], "mask_bias"
    )
    if model_type == "mpnet":
        bias = graph.op("Add", [bias, _relative_position_bias(graph, config, heads)])
    for layer in range(int(config["num_hidden_layers"])):
        x = _layer(graph, x, bias, f"encoder.layer.{layer}", heads, head_size, hidden, epsilon)
    pooled = _pool(graph, x, mask, pooling.mode)
    if pooling.normalize:
        norm = graph.op("ReduceL2", [pooled], axes=[1], keepdims=1)
        pooled = graph.op("Div", [pooled, graph.op("Max", [norm, graph.const(1e-12)])])
    graph.nodes.append(helper.make_node("Identity", [pooled], ["embedding"]))
    onnx_graph = helper.make_graph(
        graph.nodes,
        "sentence_encoder",
        inputs,
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        graph.initializers,
    )
    model = helper.make_model(
        onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ragline"
    )
    model.ir_version = 8
    return model


def _embeddings(
    graph: _Graph, config: dict[str, Any], model_type: str, with_types: bool, epsilon: float
) -> str:
    """Word, position (and token type) embeddings, summed and normalised."""
    words = graph.op("Gather", [graph.weight("embeddings.word_embeddings.weight"), "input_ids"])
    if model_type == "bert":
        # Positions 0 … seq-1.
        seq = graph.op(
            "Gather", [graph.op("Shape", ["input_ids"]), graph.const(np.array(1, np.int64))]
        )
        positions = graph.op(
            "Range", [graph.const(np.array(0, np.int64)), seq, graph.const(np.array(1, np.int64))]
        )
    else:
        # RoBERTa, XLM-R, MPNet: positions count the non-padding tokens from pad + 1;
        # padding sits at the padding index.
        pad = int(config.get("pad_token_id", 1))
        real = graph.op(
            "Cast",
            [graph.op("Not", [graph.op("Equal", ["input_ids", graph.const(np.array(pad))])])],
            to=7,  # int64
        )
        counted = graph.op("CumSum", [real, graph.const(np.array(1, np.int64))])
        positions = graph.op(
            "Add", [graph.op("Mul", [counted, real]), graph.const(np.array(pad, np.int64))]
        )
    position_vectors = graph.op(
        "Gather", [graph.weight("embeddings.position_embeddings.weight"), positions]
    )
    summed = graph.op("Add", [words, position_vectors])
    type_key = "embeddings.token_type_embeddings.weight"
    if with_types:
        summed = graph.op(
            "Add", [summed, graph.op("Gather", [graph.weight(type_key), "token_type_ids"])]
        )
    elif type_key in graph.weights:  # one segment: its vector is added to every token
        summed = graph.op("Add", [summed, graph.const(graph.weights[type_key][0])])
    return graph.layer_norm(summed, "embeddings.LayerNorm", epsilon)


def _layer(
    graph: _Graph, x: str, bias: str, prefix: str, heads: int, head_size: int, hidden: int,
    epsilon: float,
) -> str:  # fmt: skip
    """One encoder layer: self-attention and the feed-forward block, each with its
    residual and layer norm (BERT's post-norm; MPNet names the parts alike)."""
    names = _layer_names(graph, prefix)

    def split(t: str) -> str:  # [b, s, h] → [b, heads, s, head_size]
        shaped = graph.op("Reshape", [t, graph.const(np.array([0, 0, heads, head_size]))])
        return graph.op("Transpose", [shaped], perm=[0, 2, 1, 3])

    query = split(graph.linear(x, names["query"]))
    key = graph.op("Transpose", [split(graph.linear(x, names["key"]))], perm=[0, 1, 3, 2])
    value = split(graph.linear(x, names["value"]))
    scores = graph.op("Mul", [graph.op("MatMul", [query, key]), graph.const(head_size**-0.5)])
    probs = graph.op("Softmax", [graph.op("Add", [scores, bias])], axis=-1)
    context = graph.op("Transpose", [graph.op("MatMul", [probs, value])], perm=[0, 2, 1, 3])
    merged = graph.op("Reshape", [context, graph.const(np.array([0, 0, hidden]))])
    attended = graph.layer_norm(
        graph.op("Add", [graph.linear(merged, names["attention_out"]), x]),
        names["attention_norm"],
        epsilon,
    )
    inner = graph.gelu(graph.linear(attended, names["intermediate"]))
    return graph.layer_norm(
        graph.op("Add", [graph.linear(inner, names["output"]), attended]),
        names["output_norm"],
        epsilon,
    )


def _layer_names(graph: _Graph, prefix: str) -> dict[str, str]:
    """The weight prefixes of one layer's parts (BERT's names, or MPNet's)."""
    if f"{prefix}.attention.attn.q.weight" in graph.weights:  # MPNet
        attention = f"{prefix}.attention"
        return {
            "query": f"{attention}.attn.q", "key": f"{attention}.attn.k",
            "value": f"{attention}.attn.v", "attention_out": f"{attention}.attn.o",
            "attention_norm": f"{attention}.LayerNorm",
            "intermediate": f"{prefix}.intermediate.dense", "output": f"{prefix}.output.dense",
            "output_norm": f"{prefix}.output.LayerNorm",
        }  # fmt: skip
    return {
        "query": f"{prefix}.attention.self.query", "key": f"{prefix}.attention.self.key",
        "value": f"{prefix}.attention.self.value",
        "attention_out": f"{prefix}.attention.output.dense",
        "attention_norm": f"{prefix}.attention.output.LayerNorm",
        "intermediate": f"{prefix}.intermediate.dense", "output": f"{prefix}.output.dense",
        "output_norm": f"{prefix}.output.LayerNorm",
    }  # fmt: skip


def _relative_position_bias(graph: _Graph, config: dict[str, Any], heads: int) -> str:
    """MPNet's relative position bias, [1, heads, seq, seq]: T5-style buckets of
    ``key position − query position`` (half for each direction, exact up to a quarter
    of the buckets, logarithmic beyond), each bucket a learned value per head."""
    buckets = int(config.get("relative_attention_num_buckets", 32))
    max_distance = 128
    seq = graph.op("Gather", [graph.op("Shape", ["input_ids"]), graph.const(np.array(1, np.int64))])
    positions = graph.op(
        "Range", [graph.const(np.array(0, np.int64)), seq, graph.const(np.array(1, np.int64))]
    )
    rows = graph.op("Unsqueeze", [positions, graph.const(np.array([1], np.int64))])
    columns = graph.op("Unsqueeze", [positions, graph.const(np.array([0], np.int64))])
    relative = graph.op("Sub", [columns, rows])  # memory (key) − context (query)
    # Follows transformers' MPNet: n = -relative; half the buckets for n < 0.
    n = graph.op("Neg", [relative])
    half = buckets // 2
    negative = graph.op("Cast", [graph.op("Less", [n, graph.const(np.array(0, np.int64))])], to=7)
    offset = graph.op("Mul", [negative, graph.const(np.array(half, np.int64))])
    n = graph.op("Abs", [n])
    max_exact = half // 2
    n_float = graph.op("Cast", [n], to=1)
    large = graph.op(
        "Add",
        [
            graph.const(np.array(max_exact, np.int64)),
            graph.op(
                "Cast",
                [
                    graph.op(
                        "Mul",
                        [
                            graph.op(
                                "Div",
                                [
                                    graph.op("Log", [graph.op("Div", [n_float, graph.const(float(max_exact))])]),
                                    graph.const(math.log(max_distance / max_exact)),
                                ],
                            ),
                            graph.const(float(half - max_exact)),
                        ],
                    )
                ],
                to=7,
            ),
        ],
    )  # fmt: skip
    large = graph.op("Min", [large, graph.const(np.array(half - 1, np.int64))])
    is_small = graph.op("Less", [n, graph.const(np.array(max_exact, np.int64))])
    bucket = graph.op("Add", [offset, graph.op("Where", [is_small, n, large])])
    values = graph.op(
        "Gather", [graph.weight("encoder.relative_attention_bias.weight"), bucket]
    )  # [seq, seq, heads]
    per_head = graph.op("Transpose", [values], perm=[2, 0, 1])
    return graph.op("Unsqueeze", [per_head, graph.const(np.array([0], np.int64))])


def _pool(graph: _Graph, x: str, mask: str, mode: str) -> str:
    """[batch, seq, hidden] → [batch, hidden] as sentence-transformers pools."""
    if mode == "cls":
        first = graph.op("Gather", [x, graph.const(np.array(0, np.int64))], axis=1)
        return first
    mask_3d = graph.op("Unsqueeze", [mask, graph.const(np.array([2], np.int64))])
    if mode == "max":
        masked = graph.op(
            "Add",
            [
                x,
                graph.op(
                    "Mul", [graph.op("Sub", [graph.const(1.0), mask_3d]), graph.const(MASKED)]
                ),
            ],
        )
        return graph.op("ReduceMax", [masked], axes=[1], keepdims=0)
    summed = graph.op(
        "ReduceSum",
        [graph.op("Mul", [x, mask_3d]), graph.const(np.array([1], np.int64))],
        keepdims=0,
    )
    counts = graph.op("ReduceSum", [mask_3d, graph.const(np.array([1], np.int64))], keepdims=0)
    counts = graph.op("Max", [counts, graph.const(1e-9)])
    if mode == "mean_sqrt_len":
        counts = graph.op("Sqrt", [counts])
    return graph.op("Div", [summed, counts])
