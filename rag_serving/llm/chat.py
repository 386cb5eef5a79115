"""Chat with the ``[llm]`` model through Ollama's ``/api/chat`` (the ``ollama`` client).

Nothing waits forever: the connection has ``connect_timeout_s``, each piece of a
streamed answer ``read_timeout_s`` (a model loading counts), the whole answer
``total_timeout_s``. Every failure is an :class:`LlmError` in one line that says
what to do; a server that cannot be reached is :class:`LlmUnavailableError`, which
callers that can go on without a model (auto-tags) catch.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from rag_sources.errors import RaglineError

if TYPE_CHECKING:
    import ollama

    from rag_serving.config import LlmConfig

M = TypeVar("M", bound=BaseModel)
SETUP_HINT = (
    'set [llm] model = "qwen2.5:7b-instruct" (any chat model) in the config, '
    "then `ollama pull` it and keep `ollama serve` running"
)


class LlmError(RaglineError):
    """The language model could not answer."""


class LlmUnavailableError(LlmError):
    """No model is configured, or the server cannot be reached."""


class ChatModel:
    """The configured chat model: streamed answers and answers validated as JSON."""

    def __init__(self, config: LlmConfig):
        self.config = config
        self._client: ollama.Client | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        if not self.config.model:
            raise LlmUnavailableError(f"no language model is configured: {SETUP_HINT}")
        return self.config.model

    def _get_client(self) -> ollama.Client:
        import ollama

        with self._lock:
            if self._client is None:
                timeout = httpx.Timeout(
                    self.config.read_timeout_s, connect=self.config.connect_timeout_s
                )
                self._client = ollama.Client(host=self.config.host, timeout=timeout)
            return self._client

    def _options(self, **extra: Any) -> dict[str, Any]:
        return {
            "temperature": self.config.temperature,
            "num_ctx": self.config.context_tokens,
            **extra,
        }

    def stream(self, messages: Sequence[dict[str, str]]) -> Iterator[str]:
        """The answer to ``messages``, piece by piece as the model writes it."""
        model = self.model
        deadline = time.monotonic() + self.config.total_timeout_s
        with self._errors():
            pieces = self._get_client().chat(
                model=model, messages=list(messages), stream=True, options=self._options()
            )
            for part in pieces:
                text = part.message.content or ""
                if text:
                    yield text
                if time.monotonic() > deadline:
                    close = getattr(pieces, "close", None)
                    if close is not None:
                        close()  # releases the connection
                    raise LlmError(
                        f"the model {model!r} at {self.config.host} was still answering after "
                        f"{self.config.total_timeout_s:g} s: raise [llm] total_timeout_s or "
                        "pick a smaller model"
                    )

    def structured(self, messages: Sequence[dict[str, str]], schema: type[M]) -> M:
        """The answer to ``messages`` as ``schema`` (Ollama's structured outputs), checked."""
        model = self.model
        with self._errors():
            response = self._get_client().chat(
                model=model,
                messages=list(messages),
                stream=False,
                format=schema.model_json_schema(),
                options=self._options(temperature=0),
            )
        text = response.message.content or ""
        try:
            return schema.model_validate(json.loads(text))
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()[0]
            raise LlmError(
                f"the model {model!r} answered with JSON that does not fit ({first}): "
                "try a model that supports structured outputs"
            ) from None

    def _errors(self) -> _Errors:
        return _Errors(self.config, self.config.model or "")


class _Errors:
    """Turns the client's errors into one-line :class:`LlmError`\\ s."""

    def __init__(self, config: LlmConfig, model: str):
        self.config, self.model = config, model

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> bool:
        import ollama

        if exc is None or isinstance(exc, RaglineError):
            return False
        host, model = self.config.host, self.model
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404 and "not found" in str(exc.error).lower():
                raise LlmUnavailableError(
                    f"the model {model!r} is not on the Ollama server at {host}: "
                    f"run `ollama pull {model}` (or set [llm] model to one it has)"
                ) from None
            raise LlmError(f"Ollama at {host} refused the request: {exc.error}") from None
        if isinstance(exc, ConnectionError | httpx.ConnectError | httpx.ConnectTimeout):
            raise LlmUnavailableError(
                f"no Ollama server answers at {host}: start it with `ollama serve` "
                "(or set [llm] host)"
            ) from None
        if isinstance(exc, httpx.TimeoutException):
            raise LlmError(
                f"the model {model!r} at {host} sent nothing for "
                f"{self.config.read_timeout_s:g} s: it may still be loading; raise "
                "[llm] read_timeout_s or try again"
            ) from None
        if isinstance(exc, httpx.HTTPError | ValueError):
            raise LlmError(f"Ollama at {host} sent an unexpected response: {exc}") from None
        return False
