"""An optional second stage: re-score the top fused hits with a reranker.

Providers are registered by name, like the embedders, and imported lazily so that
torch loads only when a local cross-encoder is used:

- ``cross-encoder``: a sentence-transformers ``CrossEncoder`` from a local folder;
- ``http``: a Jina/Cohere-style ``POST /v1/rerank`` endpoint (llama.cpp
  ``llama-server --reranking``, vLLM, LocalAI, Infinity);
- ``ollama``: Ollama has no rerank endpoint (ollama/ollama#3368), so a
  Qwen3-Reranker-style model is asked through ``/api/generate`` whether each document
  answers the query; the score is ``P(yes) / (P(yes) + P(no))`` of its first token,
  from the log-probabilities Ollama returns since 0.12.11.
"""

from __future__ import annotations

import json
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_serving.providers import ProviderRegistry
from rag_sources.errors import ConfigError, RaglineError

if TYPE_CHECKING:
    import httpx

    from rag_serving.config import RerankConfig

# An answer holds a score per passage; a larger one (decompressed) is refused, as is
# a model folder's config.json above this: neither is ever that big.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
MAX_MODEL_CONFIG_BYTES = 1024 * 1024
_OFF = "or search without it (--no-rerank, or search.rerank.enabled = false)"


class RerankerError(RaglineError):
    """The reranker could not be reached or answered something unusable."""


class Reranker(ABC):
    """Scores documents against a query; higher is more relevant."""

    provider: str

    def __init__(self, config: RerankConfig) -> None:
        self.config = config

    @abstractmethod
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in the order given."""


# ---- cross-encoder ----------------------------------------------------------------


class CrossEncoderReranker(Reranker):
    """A sentence-transformers ``CrossEncoder`` loaded from a local folder, once."""

    provider = "cross-encoder"

    def __init__(self, config: RerankConfig) -> None:
        super().__init__(config)
        self.path = _cross_encoder_dir(config.model)
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                import os

                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from sentence_transformers import CrossEncoder
                from transformers.utils import logging as transformers_logging

                transformers_logging.set_verbosity_error()
                transformers_logging.disable_progress_bar()
                try:
                    model = CrossEncoder(str(self.path), device="cpu", local_files_only=True)
                except (OSError, ValueError) as exc:
                    raise ConfigError(
                        f"search.rerank.model: cannot load the cross-encoder at {self.path} "
                        f"({_first_line(exc)}); give a sentence-transformers CrossEncoder folder"
                    ) from exc
                labels = int(getattr(model.config, "num_labels", 1))
                if labels != 1:
                    raise ConfigError(
                        f"search.rerank.model: the model at {self.path} has {labels} output "
                        "labels, a reranker has one (a relevance score); give a reranking "
                        "cross-encoder (e.g. ms-marco-MiniLM-L6-v2, bge-reranker-base)"
                    )
                self._model = model
            return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        model = self._load()
        scores = model.predict(
            [(query, text) for text in texts], batch_size=16, show_progress_bar=False
        )
        return [float(s) for s in scores]


def _cross_encoder_dir(model: str | None) -> Path:
    """The folder of a local cross-encoder, checked before torch is imported."""
    if not model:
        raise ConfigError(
            "search.rerank.model is not set; give the path of a local cross-encoder folder "
            "(ragline never downloads models)"
        )
    path = Path(model).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"search.rerank.model {model!r} is not a folder; give the path of a local "
            "cross-encoder model (ragline never downloads models)"
        )
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ConfigError(
            f"search.rerank.model {model!r} has no config.json, so it is not a model folder; "
            "give the folder a cross-encoder was saved to"
        )
    try:
        if config_file.stat().st_size > MAX_MODEL_CONFIG_BYTES:
            raise ConfigError(
                f"search.rerank.model: {config_file} is larger than "
                f"{MAX_MODEL_CONFIG_BYTES:,} bytes; it is not a model's config"
            )
        architectures = json.loads(config_file.read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError, RecursionError) as exc:
        raise ConfigError(f"search.rerank.model: cannot read {config_file}: {exc}") from exc
    if architectures and not any("ForSequenceClassification" in a for a in architectures):
        raise ConfigError(
            f"search.rerank.model {model!r} is a {architectures[0]}, not a cross-encoder "
            "(an embedding model has no relevance head); give a reranking cross-encoder folder"
        )
    return path.resolve()


# ---- HTTP (/v1/rerank) --------------------------------------------------------------


class HttpReranker(Reranker):
    """``POST {"model", "query", "documents", "top_n"}`` to ``url``; reads
    ``{"results": [{"index", "relevance_score"}]}`` (Jina, Cohere, llama.cpp, vLLM)."""

    provider = "http"

    def __init__(self, config: RerankConfig) -> None:
        super().__init__(config)
        self.url = config.url
        self._client = _client(config.timeout_s)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        body: dict[str, Any] = {"query": query, "documents": list(texts), "top_n": len(texts)}
        if self.config.model:
            body["model"] = self.config.model
        data = _post(self._client, self.url, body, self.config.timeout_s, _HTTP_HINT)
        results = data.get("results") if isinstance(data, dict) else None
        scores: list[float | None] = [None] * len(texts)
        for item in results if isinstance(results, list) else []:
            index = item.get("index") if isinstance(item, dict) else None
            value = item.get("relevance_score", item.get("score")) if index is not None else None
            if isinstance(index, int) and 0 <= index < len(texts) and value is not None:
                scores[index] = float(value)
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            raise RerankerError(
                f"the reranker at {self.url} returned no score for {len(missing)} of "
                f"{len(texts)} documents; it must answer "
                '{"results": [{"index": i, "relevance_score": s}, ...]} for every document'
            )
        return [float(s) for s in scores if s is not None]


_HTTP_HINT = "start it (e.g. `llama-server --reranking -m MODEL.gguf --port 8080`) " + _OFF


# ---- Ollama (/api/generate with logprobs) ---------------------------------------------

# The prompt of Qwen3-Reranker (its model card), sent raw so no chat template adds to it.
_QWEN3_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
    'Query and the Instruct provided. Note that the answer can only be "yes" or "no".'
    "<|im_end|>\n<|im_start|>user\n"
)
_QWEN3_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
_INSTRUCTION = "Given a search query, retrieve relevant passages that answer the query"
OLLAMA_WORKERS = 4  # requests in flight; Ollama serves OLLAMA_NUM_PARALLEL of them at once


def ollama_prompt(query: str, document: str) -> str:
    """The raw Qwen3-Reranker prompt for one (query, document) pair."""
    return (
        f"{_QWEN3_PREFIX}<Instruct>: {_INSTRUCTION}\n<Query>: {query}\n"
        f"<Document>: {document}{_QWEN3_SUFFIX}"
    )


def yes_probability(logprobs: Any) -> float | None:
    """``P(yes) / (P(yes) + P(no))`` from the first generated token's top log-probabilities
    (``[{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]``); None when
    neither word is among them. Case and surrounding spaces of a token are ignored."""
    if not isinstance(logprobs, list) or not logprobs or not isinstance(logprobs[0], dict):
        return None
    first = logprobs[0]
    candidates = list(first.get("top_logprobs") or []) or [first]
    p = {"yes": 0.0, "no": 0.0}
    for entry in candidates:
        word = str(entry.get("token", "")).strip().lower()
        if word in p:
            p[word] += math.exp(float(entry.get("logprob", -math.inf)))
    total = p["yes"] + p["no"]
    return p["yes"] / total if total > 0 else None


class OllamaReranker(Reranker):
    """One ``/api/generate`` call per document (``num_predict`` 1, top 5 logprobs)."""

    provider = "ollama"

    def __init__(self, config: RerankConfig) -> None:
        super().__init__(config)
        if not config.model:
            raise ConfigError(
                "search.rerank.model is not set; name the Ollama reranking model "
                "(e.g. dengcao/Qwen3-Reranker-0.6B:Q8_0, pulled with `ollama pull`)"
            )
        self.model = config.model
        self.url = config.host.rstrip("/") + "/api/generate"
        self._client = _client(config.timeout_s)

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        workers = min(OLLAMA_WORKERS, len(texts))
        with ThreadPoolExecutor(workers, thread_name_prefix="ragline-rerank") as pool:
            answers = list(pool.map(lambda text: self._ask(query, text), texts))
        if all(a is None for a in answers):
            raise RerankerError(
                f"the Ollama model {self.model!r} answered neither 'yes' nor 'no' to any "
                "document; use a Qwen3-Reranker-style model (a yes/no relevance judge)"
            )
        return [0.0 if a is None else a for a in answers]

    def _ask(self, query: str, text: str) -> float | None:
        body = {
            "model": self.model,
            "prompt": ollama_prompt(query, text),
            "raw": True,
            "stream": False,
            "logprobs": True,
            "top_logprobs": 5,
            "options": {"num_predict": 1, "temperature": 0},
        }
        hint = f"start Ollama (`ollama serve`) and `ollama pull {self.model}`, " + _OFF
        data = _post(self._client, self.url, body, self.config.timeout_s, hint)
        if not isinstance(data, dict) or "logprobs" not in data:
            raise RerankerError(
                f"Ollama at {self.config.host} returned no logprobs; reranking through "
                "Ollama needs Ollama 0.12.11 or later"
            )
        return yes_probability(data["logprobs"])


# ---- HTTP plumbing ----------------------------------------------------------------------


def _client(timeout_s: float) -> httpx.Client:
    import httpx

    return httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)))


def _post(client: httpx.Client, url: str, body: dict[str, Any], timeout_s: float, hint: str) -> Any:
    """POST ``body`` as JSON; the decoded answer, or a one-line RerankerError."""
    import httpx

    try:
        with client.stream("POST", url, json=body) as response:
            content = _capped(response, url)
    except httpx.TimeoutException as exc:
        raise RerankerError(
            f"the reranker at {url} did not answer within {timeout_s:g} s; raise "
            "search.rerank.timeout_s or lower search.rerank.top_n, " + _OFF
        ) from exc
    except httpx.HTTPError as exc:
        raise RerankerError(
            f"cannot reach the reranker at {url} ({_first_line(exc) or type(exc).__name__}); "
            + hint
        ) from exc
    if response.status_code >= 400:
        detail = _first_line(_error_text(content))[:200]
        if response.status_code == 404 and "model" in detail.lower():
            detail += f" (search.rerank.model = {body.get('model')!r})"
        raise RerankerError(f"the reranker at {url} answered HTTP {response.status_code}: {detail}")
    try:
        return json.loads(content)
    except (ValueError, RecursionError) as exc:
        raise RerankerError(f"the reranker at {url} answered something that is not JSON") from exc


def _capped(response: httpx.Response, url: str) -> bytes:
    """The answer's body, decompressed, refused past ``MAX_ANSWER_BYTES``."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise RerankerError(
                f"the reranker at {url} answered more than {MAX_ANSWER_BYTES:,} bytes; "
                "it is not a reranker's answer, " + _OFF
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _error_text(content: bytes) -> str:
    """The server's own error message: the ``error`` (or ``detail``, ``message``) of a
    JSON body, else the body."""
    text = content.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(data, dict):
        for key in ("error", "detail", "message"):
            value = data.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if isinstance(value, str) and value:
                return value
    return text


def _first_line(value: object) -> str:
    lines = str(value).strip().splitlines()
    return lines[0] if lines else ""


# ---- registry ---------------------------------------------------------------------------

_PROVIDERS = ProviderRegistry(
    "reranker",
    {
        "cross-encoder": "rag_serving.search.rerank:CrossEncoderReranker",
        "http": "rag_serving.search.rerank:HttpReranker",
        "ollama": "rag_serving.search.rerank:OllamaReranker",
    },
)


def register_provider(name: str, target: str) -> None:
    """Register ``module:Class`` as the implementation of reranker provider ``name``."""
    _PROVIDERS.register(name, target)


def available_providers() -> list[str]:
    return _PROVIDERS.names()


def create_reranker(config: RerankConfig) -> Reranker:
    """Instantiate the provider named by ``config.provider``."""
    return _PROVIDERS.load(config.provider)(config)
