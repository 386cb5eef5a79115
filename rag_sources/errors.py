"""Typed errors that the CLI and the MCP server turn into clean messages."""

from __future__ import annotations


class RaglineError(Exception):
    """Base class for every error ragline reports to a user."""

    exit_code = 1


class ConfigError(RaglineError):
    """The configuration file is missing or invalid."""

    exit_code = 2


class FilterError(RaglineError):
    """A search filter names something that does not exist or is malformed."""

    exit_code = 2


class QueryError(FilterError):
    """The search query cannot be used as given (empty, or over the length limit)."""


class IndexNotBuiltError(RaglineError):
    """The index does not exist yet (nothing was indexed)."""


class IndexNeedsUpgradeError(RaglineError):
    """The index has an older format that ``ragline index`` upgrades in place."""


class EmbedderMismatchError(RaglineError):
    """The configured embedder differs from the one the index was built with."""


class ObjectStoreError(RaglineError):
    """The object store that holds the index (``index_uri``) cannot be used: it cannot
    be reached, or it ignores the conditional writes that keep concurrent writers safe."""


class ManifestConflictError(RaglineError):
    """Another writer replaced the index manifest since it was read (object storage)."""


class EmbedderError(RaglineError):
    """An embedder could not be loaded or could not embed text."""


class EmbedderUnavailableError(EmbedderError):
    """The embedding service cannot be reached."""


class ModelNotFoundError(EmbedderError):
    """The embedding model is not available to the provider."""


class SourceUnavailableError(RaglineError):
    """A source's folder cannot be reached now (an unplugged disk, a folder that cannot
    be read): its run fails and what the index holds for it is kept, never pruned."""


class UnsupportedCpuError(RaglineError):
    """The processor lacks an instruction set a compiled dependency was built for (an
    import would kill the process with SIGILL instead of raising)."""
