"""A local language model for what comes after retrieval: `ragline ask`'s answers and
auto-tags (``[llm]``; Ollama's ``/api/chat``)."""

from rag_serving.llm.chat import ChatModel, LlmError, LlmUnavailableError

__all__ = ["ChatModel", "LlmError", "LlmUnavailableError"]
