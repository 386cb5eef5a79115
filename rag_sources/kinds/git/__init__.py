"""Git repositories: reading them with pygit2 (``repository``), the rules for files
that are not indexed (``rules``), listing the files of one ref and the commits of
the history window (``listing``), and the ``SourceKind`` (``kind``)."""

from rag_sources.kinds import KindInfo
from rag_sources.kinds.git.config import GitSourceConfig

# The key of a git source's commit item: ".git" can be no path of a tree, so it never
# names a file. (Here, light to import: search and MCP read it.)
COMMIT_KEY_PREFIX = ".git/commits/"

KIND = KindInfo(GitSourceConfig, "rag_sources.kinds.git.kind:GitKind")
