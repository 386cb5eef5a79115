"""The ``[[sources]]`` settings of a git source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from rag_sources.config import FileSourceConfig
from rag_sources.listing import ListedItem


def is_git_repository(folder: Path) -> bool:
    """Whether ``folder`` is a repository's top: it holds ``.git`` (a folder, or a
    file in a worktree or submodule), or it is a bare repository."""
    return (folder / ".git").exists() or (
        (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir()
    )


class GitSourceConfig(FileSourceConfig):
    """A git repository: the files of one ref's tree (code by syntax, other text with
    the text chunkers) and, with ``history``, its commits."""

    kind: Literal["git"]
    DETECT_ORDER: ClassVar[int] = 10

    @classmethod
    def detect_marker(cls, folder: Path) -> str | None:
        if (folder / ".git").exists():  # a folder, or a file in a worktree or submodule
            return "found .git: a git repository (its tracked files and commits)"
        return None

    SOURCE_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "git"
path = "{path}"
# ref = "main"            # a branch, tag or commit (default: HEAD)
include = ["**/*"]
exclude = []
history = true            # commits of the last history_months, at most history_max_commits
history_months = 24
history_max_commits = 5000
"""
    ref: str | None = None  # a branch, tag or commit; None: whatever HEAD is

    def listed_items(self, state_dir: Path | None) -> Iterator[ListedItem]:
        """The ref's files and the history window's commits, by object id."""
        from rag_sources.kinds.git.listing import list_git_items, open_source_repository

        for item in list_git_items(self, open_source_repository(self)):
            yield ListedItem(
                item.key, item.fingerprint, item.size, problem=item.problem,
                severity=item.severity, unavailable=item.unavailable,
            )  # fmt: skip

    def folder_problem(self, folder: Path) -> str | None:
        if is_git_repository(folder):
            return None
        return (
            "is not a git repository (no .git in it); give the repository's top folder, "
            'or use kind = "documents" for a plain folder'
        )

    # Not used: the tree of ``ref`` holds no ignored or untracked files (and no .git).
    ignore_dirs: list[str] = []
    max_file_bytes: int = Field(default=1_000_000, ge=1_000)  # larger files are skipped
    history: bool = True  # index commits (message, author, date, changed files)
    # The window: commits of the last this many months, at most this many (0: no limit).
    history_months: int = Field(default=24, ge=0)
    history_max_commits: int = Field(default=5_000, ge=0)
    # A commit's diff text is indexed when it changes at most this many lines (bigger
    # commits get their per-file summary only).
    diff_max_lines: int = Field(default=400, ge=0)

    @field_validator("ref")
    @classmethod
    def _ref(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c in value for c in " :?*[\\")):
            raise ValueError(
                f"{value!r} is not a git ref name; give a branch, tag or commit id, "
                "or leave `ref` out for HEAD"
            )
        return value
