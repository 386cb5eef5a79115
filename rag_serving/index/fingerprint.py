"""What an index's vectors were made with, as the manifest records it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rag_sources.versions import CHUNKER_VERSION


@dataclass(frozen=True)
class EmbedderFingerprint:
    """What an index's vectors were made with; searching with another is an error."""

    provider: str
    model: str
    dimension: int
    chunker_version: str = CHUNKER_VERSION
    # Texts the model sees before each document and query (e5: "passage: ", "query: "):
    # other prefixes make other vectors.
    document_prefix: str = ""
    query_prefix: str = ""

    def as_dict(self) -> dict[str, str | int]:
        data = asdict(self)
        for name in ("document_prefix", "query_prefix"):
            if not data[name]:
                del data[name]  # index.json files stay as they were without prefixes
        return data

    def key(self) -> str:
        """A short string that identifies the fingerprint (used in file names)."""
        import hashlib

        text = f"{self.provider}|{self.model}|{self.dimension}|{self.chunker_version}"
        if self.document_prefix or self.query_prefix:
            text += f"|{self.document_prefix}|{self.query_prefix}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        return (
            f"{self.provider}:{self.model} ({self.dimension} dims, chunker {self.chunker_version})"
        )
