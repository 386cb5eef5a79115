"""A STAND-IN for an Ollama server, for testing the Ollama embedder provider.

No Ollama server can be installed on the machines these tests run on, so the
provider is tested against this small HTTP server instead: stdlib
``ThreadingHTTPServer`` on 127.0.0.1 (ephemeral port) in a background thread,
speaking the part of Ollama's REST protocol the provider uses. The real ``ollama``
client talks to it over real loopback HTTP.

``POST /api/embed``
    request ``{"model": str, "input": str | [str], "truncate": bool, ...}``,
    response ``{"model", "embeddings": [[float, ...], ...], "total_duration",
    "load_duration", "prompt_eval_count"}``. A string input is one text (the empty
    string none), as in Ollama. An unknown model gets HTTP 404
    ``{"error": "model \\"x\\" not found, try pulling it first"}`` (Ollama's wording,
    ``handleScheduleError`` in server/routes.go). With ``context_length`` set, an input
    of more "tokens" (here: whitespace-separated words) is cut when ``truncate`` is
    true or absent (Ollama's default) and refused with HTTP 400 ``{"error": "the input
    length exceeds the context length"}`` when it is false.

``POST /api/chat`` (for `ask` and auto-tags)
    request ``{"model", "messages", "stream", "format", "options"}``; the answer is
    ``chat_reply(messages, format)``, streamed as NDJSON pieces of 8 characters
    (``chat_piece_delay_s`` apart) or, with ``stream: false``, in one object.

``POST /api/generate`` (non-streaming only, for the Ollama reranker)
    request ``{"model", "prompt", "raw", "stream": false, "logprobs": true,
    "top_logprobs": n, "options": {"num_predict": 1}}``, response ``{"model",
    "created_at", "response", "done", "done_reason", "logprobs": [{"token", "logprob",
    "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}], ...}`` (the shape of
    Ollama >= 0.12.11, ``api.Logprob`` in api/types.go). A prompt holding ``<Query>:``
    and ``<Document>:`` (the Qwen3-Reranker prompt) is judged by
    :func:`standin_yes_probability`; the first token's top log-probabilities spread
    that over "yes", "Yes", "no", "No" and " maybe". Models are those of
    ``generate_models``; others get the 404 above. ``logprobs=False`` answers as an
    Ollama older than 0.12.11 does (no ``logprobs`` field).

Also ``GET /`` ("Ollama is running"), ``GET /api/version`` and ``GET /api/tags``;
any other path gets gin's plain ``404 page not found``.

Embeddings are deterministic: a signed, hashed bag of lower-cased words in ``dim``
buckets, L2-normalised (times ``scale``), so texts sharing words get similar
vectors and tests can assert rankings. :func:`standin_vector` computes the same
vector in-process.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

DEFAULT_MODELS: dict[str, int] = {"nomic-embed-text": 768, "all-minilm": 384}
RERANK_MODEL = "qwen3-reranker"
CHAT_MODEL = "standin-chat"
CONTEXT_ERROR = "the input length exceeds the context length"
_WORD_RE = re.compile(r"\w+")


def standin_vector(text: str, dim: int) -> list[float]:
    """The unit vector the stand-in returns for ``text``: a signed hashed bag of words."""
    vector = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vector[value % dim] += 1.0 if (value >> 63) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:  # no words: a fixed vector, as a real model never returns zeros
        vector[0], norm = 1.0, 1.0
    return [x / norm for x in vector]


_PROMPT_RE = re.compile(r"<Query>: (.*?)\n<Document>: (.*?)<\|im_end\|>", re.DOTALL)


def standin_yes_probability(query: str, document: str) -> float:
    """The stand-in reranker's P(yes): 0.02 + 0.96 x the share of the query's distinct
    words found in the document (so more shared words rank higher)."""
    words = set(_WORD_RE.findall(query.lower()))
    found = words & set(_WORD_RE.findall(document.lower()))
    return 0.02 + 0.96 * (len(found) / len(words) if words else 0.0)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the stand-in received (``body`` is the decoded JSON, if any)."""

    method: str
    path: str
    body: Any = None

    @property
    def inputs(self) -> list[str]:
        """The texts of an ``/api/embed`` request, always as a list."""
        value = self.body.get("input") if isinstance(self.body, dict) else None
        if isinstance(value, str):
            return [value] if value else []
        return list(value or [])


@dataclass
class OllamaStandIn:
    """A fake Ollama on 127.0.0.1; use as a context manager (``with OllamaStandIn() as s``).

    ``models``: known model names and their dimensions. ``delay_s``: sleep before
    answering ``/api/embed`` (timeout tests). ``context_length``: max words per input.
    ``scale``: multiply vectors (to check the client normalises). ``ragged``: make the
    last vector of each response one element short (a broken server).
    """

    models: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_MODELS))
    delay_s: float = 0.0
    context_length: int | None = None
    scale: float = 1.0
    ragged: bool = False
    generate_models: tuple[str, ...] = (RERANK_MODEL,)
    logprobs: bool = True
    chat_models: tuple[str, ...] = (CHAT_MODEL,)
    # What the chat "model" answers: called with the request's messages and its
    # `format` (a JSON schema, or None); the text is streamed a few characters a piece.
    chat_reply: Callable[[list[dict[str, Any]], Any], str] = field(
        default=lambda messages, schema: "{}" if schema else "I do not know."
    )
    # Seconds between streamed pieces (a slow model; timeout tests).
    chat_piece_delay_s: float = 0.0
    requests: list[RecordedRequest] = field(default_factory=list, init=False)
    _server: ThreadingHTTPServer | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    # ---- lifecycle ----------------------------------------------------------

    def start(self) -> OllamaStandIn:
        """Bind an ephemeral port on 127.0.0.1 and serve in a daemon thread."""
        handler = type("Handler", (_Handler,), {"standin": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._stopping.clear()
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; wakes handlers sleeping in ``delay_s``."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> OllamaStandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- what tests look at -------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the Ollama stand-in is not running")
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        """The base URL to give ``OllamaConfig(host=...)``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def embed_requests(self) -> list[RecordedRequest]:
        """The ``POST /api/embed`` requests received so far, in order."""
        with self._lock:
            return [r for r in self.requests if r.path == "/api/embed"]

    @property
    def generate_requests(self) -> list[RecordedRequest]:
        """The ``POST /api/generate`` requests received so far, in order."""
        with self._lock:
            return [r for r in self.requests if r.path == "/api/generate"]

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # ---- the protocol -------------------------------------------------------

    def handle_embed(self, body: Any) -> tuple[int, dict[str, Any]]:
        """Status and JSON answer for one ``/api/embed`` request body."""
        started = time.perf_counter_ns()
        if not isinstance(body, dict):
            return 400, {"error": "invalid request body"}
        model = body.get("model") or ""
        if not model:
            return 400, {"error": "model is required"}
        if model not in self.models:
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        raw = body.get("input", [])
        if isinstance(raw, str):
            texts = [raw] if raw else []
        elif isinstance(raw, list) and all(isinstance(t, str) for t in raw):
            texts = list(raw)
        else:
            return 400, {"error": "invalid input type"}
        truncate = body.get("truncate", True)
        if self.delay_s and self._stopping.wait(self.delay_s):
            return 503, {"error": "server shutting down"}
        limit = self.context_length
        tokens = 0
        for i, text in enumerate(texts):
            words = text.split()
            if limit is not None and len(words) > limit:
                if truncate is False:
                    return 400, {"error": CONTEXT_ERROR}
                texts[i] = " ".join(words[:limit])
                words = words[:limit]
            tokens += len(words) + 2
        dim = self.models[model]
        embeddings = [[x * self.scale for x in standin_vector(t, dim)] for t in texts]
        if self.ragged and embeddings:
            embeddings[-1] = embeddings[-1][:-1]
        elapsed = time.perf_counter_ns() - started
        return 200, {
            "model": model,
            "embeddings": embeddings,
            "total_duration": elapsed,
            "load_duration": 0,
            "prompt_eval_count": tokens,
        }

    def handle_generate(self, body: Any) -> tuple[int, dict[str, Any]]:
        """Status and JSON answer for one non-streaming ``/api/generate`` request body."""
        if not isinstance(body, dict) or not isinstance(body.get("prompt", ""), str):
            return 400, {"error": "invalid request body"}
        model = body.get("model") or ""
        if not model:
            return 400, {"error": "model is required"}
        if model not in self.generate_models:
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        if body.get("stream", True) is not False:
            return 400, {"error": "the stand-in answers only stream=false requests"}
        if self.delay_s and self._stopping.wait(self.delay_s):
            return 503, {"error": "server shutting down"}
        match = _PROMPT_RE.search(body.get("prompt", ""))
        p_yes = standin_yes_probability(*match.groups()) if match else 0.5
        spread = [
            ("yes", 0.9 * p_yes),
            ("no", 0.9 * (1 - p_yes)),
            ("Yes", 0.05 * p_yes),
            ("No", 0.05 * (1 - p_yes)),
            (" maybe", 0.05),
        ]
        spread.sort(key=lambda item: -item[1])
        top = [
            {"token": t, "logprob": math.log(p), "bytes": list(t.encode())}
            for t, p in spread[: max(1, int(body.get("top_logprobs") or 0))]
        ]
        answer: dict[str, Any] = {
            "model": model,
            "created_at": "2026-01-01T00:00:00Z",
            "response": top[0]["token"],
            "done": True,
            "done_reason": "length",
            "prompt_eval_count": len(body.get("prompt", "").split()),
            "eval_count": 1,
        }
        if self.logprobs and body.get("logprobs"):
            answer["logprobs"] = [
                {**top[0], "top_logprobs": top if body.get("top_logprobs") else []}
            ]
        return 200, answer

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The ``POST /api/chat`` requests received so far, in order."""
        with self._lock:
            return [r for r in self.requests if r.path == "/api/chat"]

    def handle_chat(self, body: Any) -> tuple[int, Any]:
        """Status and answer for one ``/api/chat`` request: a JSON object, or (streamed)
        an iterator of NDJSON objects as Ollama sends them."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, {"error": "invalid request body"}
        model = body.get("model") or ""
        if not model:
            return 400, {"error": "model is required"}
        if model not in self.chat_models:
            return 404, {"error": f'model "{model}" not found, try pulling it first'}
        text = self.chat_reply(body["messages"], body.get("format"))
        done = {
            "model": model,
            "created_at": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": sum(
                len(str(m.get("content", "")).split()) for m in body["messages"]
            ),
            "eval_count": len(text.split()),
        }
        if body.get("stream", True) is False:
            return 200, {**done, "message": {"role": "assistant", "content": text}}

        def pieces() -> Iterator[dict[str, Any]]:
            for start in range(0, len(text), 8):
                if self.chat_piece_delay_s and self._stopping.wait(self.chat_piece_delay_s):
                    return
                yield {
                    "model": model,
                    "created_at": "2026-01-01T00:00:00Z",
                    "message": {"role": "assistant", "content": text[start : start + 8]},
                    "done": False,
                }
            yield done

        return 200, pieces()

    def handle_get(self, path: str) -> tuple[int, Any]:
        if path == "/":
            return 200, "Ollama is running"
        if path == "/api/version":
            return 200, {"version": "0.0.0-standin"}
        if path == "/api/tags":
            names = [{"name": f"{m}:latest", "model": f"{m}:latest"} for m in self.models]
            return 200, {"models": names}
        return 404, "404 page not found"


class _Handler(BaseHTTPRequestHandler):
    """Routes requests to the owning :class:`OllamaStandIn` (set as a class attribute)."""

    standin: OllamaStandIn
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.standin.record(RecordedRequest("GET", self.path))
        self._send(*self.standin.handle_get(self.path))

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            self.standin.record(RecordedRequest("POST", self.path, raw.decode(errors="replace")))
            self._send(400, {"error": "invalid JSON"})
            return
        self.standin.record(RecordedRequest("POST", self.path, body))
        if self.path == "/api/embed":
            self._send(*self.standin.handle_embed(body))
        elif self.path == "/api/generate":
            self._send(*self.standin.handle_generate(body))
        elif self.path == "/api/chat":
            status, payload = self.standin.handle_chat(body)
            if isinstance(payload, dict):
                self._send(status, payload)
            else:
                self._stream(status, payload)
        else:
            self._send(404, "404 page not found")

    def _send(self, status: int, payload: Any) -> None:
        if isinstance(payload, str):
            data, kind = payload.encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(payload).encode(), "application/json; charset=utf-8"
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            self.close_connection = True

    def _stream(self, status: int, objects: Iterator[dict[str, Any]]) -> None:
        """NDJSON pieces, chunked, flushed one by one (as Ollama streams)."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for obj in objects:
                data = json.dumps(obj).encode() + b"\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``OllamaStandIn.requests`` instead of a log."""
