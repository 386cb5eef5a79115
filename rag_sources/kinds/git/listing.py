"""Listing a ``git`` source: the files of its ref's tree and the commits of its
history window, without reading any content.

It lives here, beside the folder walker, because ``ragline status`` lists a source
to count its pending changes, and ``rag_serving`` never imports the indexing side.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from wcmatch import glob

from rag_sources.errors import SourceUnavailableError
from rag_sources.kinds.git.keys import COMMIT_KEY_PREFIX
from rag_sources.kinds.git.repository import GitRepository, RepositoryError, open_repository
from rag_sources.kinds.git.rules import entry_type_skip_reason, path_skip_reason

if TYPE_CHECKING:
    # the config only names a type here: the config imports this module to list items
    from rag_sources.kinds.git.config import GitSourceConfig

COMMIT_PREFIX = COMMIT_KEY_PREFIX
_FLAGS = glob.GLOBSTAR | glob.DOTGLOB


@dataclass(frozen=True)
class GitItem:
    key: str
    fingerprint: str  # blob id or commit id
    size: int | None = None
    problem: str | None = None
    severity: str = "skipped"
    # Cannot be read now (a damaged object): what the index holds for it is kept.
    unavailable: bool = False


def commit_key(sha: str) -> str:
    return COMMIT_PREFIX + sha


def commit_sha(key: str) -> str | None:
    """The commit id of a commit item's key (None for a file)."""
    return key[len(COMMIT_PREFIX) :] if key.startswith(COMMIT_PREFIX) else None


def open_source_repository(config: GitSourceConfig) -> GitRepository:
    """The source's repository; ``SourceUnavailableError`` (one line, naming the
    source) when it cannot be opened: the run fails and the index is kept."""
    try:
        return open_repository(config.path)
    except RepositoryError as exc:
        raise SourceUnavailableError(f"source {config.name!r}: {exc}") from None


def resolve_head(config: GitSourceConfig, repo: GitRepository) -> str | None:
    """The commit id ``ref`` names now (None for a repository without commits)."""
    try:
        return repo.resolve(config.ref)
    except RepositoryError as exc:
        raise SourceUnavailableError(f"source {config.name!r}: {exc}") from None


def window_start(config: GitSourceConfig, now: datetime | None = None) -> datetime | None:
    """The oldest author date the history window keeps (None: no date limit): the
    window holds the commits written in the last ``history_months``, by the date a
    commit is shown and filtered by, wherever a rebase or ``git am`` put them."""
    if not config.history_months:
        return None
    return (now or datetime.now(UTC)) - timedelta(days=round(config.history_months * 30.44))


def list_git_items(config: GitSourceConfig, repo: GitRepository) -> Iterator[GitItem]:
    """Every item of the source: the selected files of the ref's tree (those skipped by
    rule with their reason), then the commits of the history window, newest first.

    A file, folder or commit whose object is damaged is listed as an error item that
    keeps what the index holds for it (a folder as ``path/``); a damaged ref commit
    or root tree makes the source unavailable (``SourceUnavailableError``)."""
    head = resolve_head(config, repo)
    if head is None:
        return  # no commits yet: nothing to index
    try:
        yield from _tree_items(config, repo, head)
        if not config.history:
            return
        damaged: dict[str, str] = {}
        for sha, _when in repo.commit_ids(
            head,
            max_count=config.history_max_commits or None,
            since=window_start(config),
            damaged=damaged,
        ):
            yield GitItem(commit_key(sha), sha)
    except RepositoryError as exc:
        raise SourceUnavailableError(f"source {config.name!r}: {exc}") from None
    for sha, problem in damaged.items():
        yield GitItem(commit_key(sha), sha, problem=problem, severity="error", unavailable=True)


def _tree_items(config: GitSourceConfig, repo: GitRepository, head: str) -> Iterator[GitItem]:
    for entry in repo.tree_entries(head):
        path = entry.path
        folder = path.endswith("/")  # a damaged folder: some of its files may be selected
        if not folder and not glob.globmatch(path, config.include, flags=_FLAGS):
            continue
        if config.exclude and glob.globmatch(path.rstrip("/"), config.exclude, flags=_FLAGS):
            continue
        if entry.problem is not None:
            yield GitItem(path, entry.blob_id, None, entry.problem, "error", unavailable=True)
            continue
        problem = entry_type_skip_reason(entry.type) or path_skip_reason(
            path, entry.size, config.max_file_bytes, repo.attributes(head, path)
        )
        yield GitItem(path, entry.blob_id, entry.size, problem)
