"""Embeddings from a local Ollama server through the ``ollama`` client (``/api/embed``).

For users who already run Ollama (nomic-embed-text, bge-m3, mxbai-embed-large, ...).
The client waits forever by default, so every request carries the configured
timeouts. Inputs are sent with ``truncate=False``: a text longer than the model's
context is an error, never silently cut. Vectors are L2-normalised here whatever
the server returns.

Error mapping (checked against ollama 0.6.3, whose ``Client`` turns
``httpx.ConnectError`` into the builtin ``ConnectionError`` and HTTP errors into
``ollama.ResponseError``, and lets timeouts through as ``httpx.TimeoutException``):

- connection refused / DNS failure / no connect in ``connect_timeout_s``
  -> :class:`EmbedderUnavailableError` (hint: ``ollama serve``),
- HTTP 404 about the model -> :class:`ModelNotFoundError` (hint: ``ollama pull``),
- context-length refusal -> :class:`EmbedderError` naming ``chunking.max_tokens``,
- read timeout -> :class:`EmbedderError` naming ``embedder.timeout_s``,
- anything else -> :class:`EmbedderError` carrying the server's message.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from rag_serving.embedders.base import Embedder
from rag_serving.index.fingerprint import EmbedderFingerprint
from rag_sources.errors import EmbedderError, EmbedderUnavailableError, ModelNotFoundError

if TYPE_CHECKING:
    import ollama

    from rag_serving.config import OllamaConfig

DIMENSION_PROBE = "ragline dimension probe"

# One match per unit of the estimate: an ASCII letter/digit run, or one other
# non-space character (ASCII punctuation, or any non-ASCII character).
_PIECE_RE = re.compile(r"[A-Za-z0-9]+|\S")
# Sub-words of an ASCII run: camelCase humps, ALLCAPS runs, digit runs.
_SUBWORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_CONTEXT_RE = re.compile(r"context length|context window|too long|exceeds", re.IGNORECASE)


def estimate_tokens(text: str) -> int:
    """A conservative token count for a model whose tokenizer ragline cannot load.

    Rule (whitespace is free):

    - an ASCII letter/digit run is cut into camelCase humps, ALLCAPS runs and digit
      runs, and each part counts ``ceil(len / 3)`` (``"writeBoolean"`` -> 2 + 3);
    - every other ASCII character (punctuation, ``_``) counts 1, as WordPiece
      splits each one off;
    - every non-ASCII character counts the length of its NFD decomposition: 1 for
      a CJK ideograph or a Cyrillic letter, 2 for an accented Latin letter, 2-3 for
      a Hangul syllable (uncased BERT tokenizers decompose it into jamo).

    Against the WordPiece tokenizer of all-MiniLM-L6-v2 (the same vocabulary as
    nomic-embed-text and mxbai-embed-large) it is >= the real count for ~99% of
    Obsidian help paragraphs and CoSQA Python functions, ~1.45x (prose) and ~1.25x
    (code) the real total; BPE/SentencePiece tokenizers (bge-m3) need fewer tokens.
    """
    count = 0
    for match in _PIECE_RE.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isascii():
            if first.isalnum():
                if piece.islower() or piece.isdigit():
                    count += -(-len(piece) // 3)
                else:
                    count += sum(-(-len(part) // 3) for part in _SUBWORD_RE.findall(piece))
            else:
                count += 1
        else:
            count += len(unicodedata.normalize("NFD", piece))
    return count


class OllamaEmbedder(Embedder):
    """Vectors from ``POST /api/embed`` of an Ollama server, in batches of ``batch_size``."""

    provider = "ollama"

    def __init__(self, config: OllamaConfig, data_dir: Path | None = None) -> None:
        self.config = config
        self.data_dir = data_dir
        self._dimension: int | None = None
        self._client: ollama.Client | None = None
        self._lock = threading.Lock()

    # ---- Embedder interface -------------------------------------------------

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def dimension(self) -> int:
        """Found by embedding a probe string once (cached); a request to the server."""
        if self._dimension is None:
            self._embed([self.config.document_prefix + DIMENSION_PROBE])
        assert self._dimension is not None
        return self._dimension

    @property
    def device(self) -> str:
        return f"the Ollama server at {self.config.host}"

    @property
    def fingerprint(self) -> EmbedderFingerprint:
        base = super().fingerprint
        return replace(
            base,
            document_prefix=self.config.document_prefix,
            query_prefix=self.config.query_prefix,
        )

    @property
    def max_tokens(self) -> int:
        return self.config.max_tokens

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Conservative estimate (see :func:`estimate_tokens`) of each text with the
        document prefix the model will also see."""
        prefix = self.config.document_prefix
        return [estimate_tokens(prefix + text) for text in texts]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        prefix = self.config.document_prefix
        return self._embed([prefix + text for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([self.config.query_prefix + text])[0]

    def close(self) -> None:
        """Close the HTTP connection pool (a later call opens a new one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # ---- internals ------------------------------------------------------------

    def _get_client(self) -> ollama.Client:
        with self._lock:
            if self._client is None:
                import ollama

                timeout = httpx.Timeout(
                    self.config.timeout_s, connect=self.config.connect_timeout_s
                )
                self._client = ollama.Client(host=self.config.host, timeout=timeout)
            return self._client

    def _embed(self, inputs: list[str]) -> np.ndarray:
        """Embed ``inputs`` (prefixes already applied) batch by batch; unit float32 rows."""
        client = self._get_client()
        size = self.config.batch_size
        parts = [
            self._embed_batch(client, inputs[i : i + size]) for i in range(0, len(inputs), size)
        ]
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    def _embed_batch(self, client: ollama.Client, batch: list[str]) -> np.ndarray:
        embeddings = self._request(client, batch)
        if len(embeddings) != len(batch):
            raise EmbedderError(
                f"Ollama model {self.model!r} at {self.config.host} returned "
                f"{len(embeddings)} vectors for {len(batch)} inputs"
            )
        lengths = {len(vector) for vector in embeddings}
        expected = self._dimension
        if len(lengths) != 1 or 0 in lengths or (expected is not None and lengths != {expected}):
            seen = ", ".join(str(n) for n in sorted(lengths))
            want = f" (expected {expected})" if expected is not None else ""
            raise EmbedderError(
                f"Ollama model {self.model!r} at {self.config.host} returned vectors of "
                f"inconsistent dimension: {seen}{want}"
            )
        matrix = np.asarray(embeddings, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise EmbedderError(
                f"Ollama model {self.model!r} at {self.config.host} returned a zero or "
                "non-finite vector; it cannot be normalised"
            )
        if self._dimension is None:
            with self._lock:
                if self._dimension is None:
                    self._dimension = matrix.shape[1]
        return matrix / norms

    def _request(self, client: ollama.Client, batch: list[str]) -> Sequence[Sequence[float]]:
        """One ``/api/embed`` call with the errors mapped to ragline's."""
        import ollama

        config = self.config
        host = config.host
        unreachable = (
            f"Ollama server not reachable at {host}; start it with `ollama serve` "
            "(or set embedder.host)"
        )
        try:
            response = client.embed(model=config.model, input=batch, truncate=False)
        except ollama.ResponseError as exc:
            raise self._response_error(exc, batch) from exc
        except (ConnectionError, httpx.ConnectError) as exc:
            raise EmbedderUnavailableError(unreachable) from exc
        except httpx.ConnectTimeout as exc:
            raise EmbedderUnavailableError(
                f"{unreachable}: no connection within {config.connect_timeout_s:g} s "
                "(embedder.connect_timeout_s)"
            ) from exc
        except httpx.TimeoutException as exc:
            raise EmbedderError(
                f"Ollama at {host} did not answer within {config.timeout_s:g} s "
                f"(embedder.timeout_s) to embed a batch of {len(batch)} with {config.model!r}; "
                "the model may still be loading: raise embedder.timeout_s or lower "
                "embedder.batch_size"
            ) from exc
        except httpx.HTTPError as exc:
            raise EmbedderError(
                f"Ollama request to {host} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except ValueError as exc:  # malformed JSON or a response without "embeddings"
            raise EmbedderError(f"Ollama at {host} sent an unexpected response: {exc}") from exc
        return response.embeddings

    def _response_error(self, exc: Any, batch: list[str]) -> EmbedderError:
        """Translate an ``ollama.ResponseError`` (HTTP status + the server's message)."""
        config = self.config
        message = str(exc.error)
        status = exc.status_code
        if status == 404:
            if "model" in message.lower():
                return ModelNotFoundError(
                    f"Ollama model {config.model!r} not found at {config.host}; "
                    f"run `ollama pull {config.model}`"
                )
            return EmbedderError(
                f"{config.host} answered 404 for /api/embed ({message}); is it an Ollama "
                "server recent enough to have /api/embed? (check embedder.host)"
            )
        if _CONTEXT_RE.search(message):
            longest = max(estimate_tokens(text) for text in batch)
            return EmbedderError(
                f"Ollama model {config.model!r} refused an input longer than its context "
                f"({message}; the longest input of the batch is ~{longest} tokens by "
                f"ragline's estimate); lower chunking.max_tokens or embedder.max_tokens "
                f"(now {config.max_tokens}) and re-index"
            )
        return EmbedderError(
            f"Ollama at {config.host} failed to embed with {config.model!r} "
            f"(HTTP {status}): {message}"
        )
