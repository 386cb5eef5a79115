"""Reading git repositories (pygit2) and the rules for files that are not indexed."""

from rag_serving.gitrepo.repository import (
    CommitInfo,
    FileChange,
    GitRepository,
    RepoInfo,
    RepositoryError,
    TreeEntry,
    open_repository,
)
from rag_serving.gitrepo.rules import (
    PathAttributes,
    content_skip_reason,
    entry_type_skip_reason,
    path_skip_reason,
)

__all__ = [
    "CommitInfo",
    "FileChange",
    "GitRepository",
    "PathAttributes",
    "RepoInfo",
    "RepositoryError",
    "TreeEntry",
    "content_skip_reason",
    "entry_type_skip_reason",
    "open_repository",
    "path_skip_reason",
]
