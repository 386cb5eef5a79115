"""``kind = "git"``: a git repository — the files of one ref's tree and its commits.

Items are read from git's object database, never from the working tree, so ignored
and untracked files are out and a checkout in progress is never half-read:

- a **file** of the ref's tree: key = its path, fingerprint and content hash = its
  blob id. A blob the index has seen (in this source, at any path) is not read,
  parsed or embedded again: a rename, a branch switch or a rebase costs only the
  blobs that are new. Code is chunked by syntax (``rag_sources.code``), Markdown and
  other documents by their parsers, other text in line windows;
- a **commit** (with ``history``): key = ``.git/commits/<sha>`` (a path no tree can
  hold), fingerprint = its sha. Its message, author, date and changed files (with
  the diff's text for a small commit) make one document that links to the files it
  changed. Commits outside the window, or no longer reachable after a force-push,
  are not listed, so the scan removes them.

A commit's date is its **author date**, as ``git log`` shows it: the hit's date, the
``--after`` / ``--before`` filters and the history window all use it. A commit
applied later (a rebase, ``git am``, a cherry-pick) shows its committer and commit
date too, in its text.

The sensor's change signal is the ref's commit id: one lookup, no tree walk.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cached_property
from pathlib import PurePosixPath
from typing import Any

from rag_sources.chunking import Chunk, CountTokens, cap_heading
from rag_sources.code.chunker import CODE_CHUNKER_VERSION, chunk_code, parse_problem
from rag_sources.code.languages import CODE_LANGUAGES, language_for
from rag_sources.formats import router
from rag_sources.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    Link,
    ParsedDocument,
    ParseOptions,
)
from rag_sources.formats.text import cap_text, decode_text
from rag_sources.kinds.base import DocumentView, ItemStat, SourceKind
from rag_sources.kinds.git.config import GitSourceConfig
from rag_sources.kinds.git.listing import (
    COMMIT_PREFIX,
    commit_sha,
    list_git_items,
    open_source_repository,
    resolve_head,
)
from rag_sources.kinds.git.repository import CommitInfo, GitRepository, RepositoryError
from rag_sources.kinds.git.rules import content_skip_reason

# 2: subject capped as title and heading, message at max_chars; 3: dated by the author
# date everywhere, the committer and commit date shown when they differ
COMMIT_PARSER = "commit/3"
TEXT_PARSER = "text/1"
CODE_PARSER = "code/1"
MAX_LINKED_FILES = 300  # changed files a commit links to (its summary lists them all)
_SAFE_SUFFIX = re.compile(r"^\.[a-z0-9]{1,10}$")
_DIFF_HEADER = re.compile(r"^diff --git a/(.*) b/(.*)$", re.MULTILINE)


class GitKind(SourceKind):
    name = "git"
    config_type = GitSourceConfig

    @cached_property
    def repo(self) -> GitRepository:
        """The repository (raises ``SourceUnavailableError`` when it cannot be opened)."""
        return open_source_repository(self.config)  # type: ignore[arg-type]

    # ---- list ----------------------------------------------------------------

    def list_items(self) -> Iterator[ItemStat]:
        for item in list_git_items(self.config, self.repo):  # type: ignore[arg-type]
            yield ItemStat(
                item.key, item.fingerprint, item.size, None, item.problem, item.severity,
                item.unavailable,
            )  # fmt: skip

    def change_signal(self) -> str:
        """The ref's commit id (and, with a history window in months, the day: commits
        leave the window as time passes)."""
        config: GitSourceConfig = self.config  # type: ignore[assignment]
        head = resolve_head(config, self.repo) or "empty"
        day = (
            datetime.now(UTC).date().isoformat() if config.history and config.history_months else ""
        )
        return f"{head}:{day}"

    # ---- load ----------------------------------------------------------------

    def content_hash(self, item: ItemStat) -> str:
        return item.fingerprint  # a blob id or a commit id: the content's own hash

    def file_type(self, key: str) -> str | None:
        if key.startswith(COMMIT_PREFIX):
            return "commit"
        language = language_for(key)
        if language is not None:
            return language
        known = router.file_type(key)
        if known is not None:
            return known
        suffix = PurePosixPath(key).suffix.lower()
        return suffix[1:] if _SAFE_SUFFIX.match(suffix) else "txt"

    def parser_version(self, key: str) -> str:
        file_type = self.file_type(key)
        if file_type == "commit":
            return f"{COMMIT_PARSER}:{self.config.diff_max_lines}"  # type: ignore[attr-defined]
        if file_type in CODE_LANGUAGES:
            return CODE_PARSER
        return router.PARSER_VERSIONS.get(file_type or "", TEXT_PARSER)

    def chunker_version(self) -> str:
        return CODE_CHUNKER_VERSION

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        sha = commit_sha(key)
        if sha is not None:
            return self._parse_commit(sha, options)
        if not content_hash:
            raise ItemError("no blob id recorded for this file; run a full index")
        try:
            data = self.repo.read_blob(content_hash)
        except RepositoryError as exc:
            raise ItemError(str(exc)) from None
        reason = content_skip_reason(key, data)
        if reason is not None:
            raise ItemSkipped(reason)
        file_type = self.file_type(key)
        if file_type in router.PARSERS and file_type not in ("txt", "json", "yaml", "csv"):
            return router.parse_bytes(data, PurePosixPath(key).name, key, file_type, options)
        text = decode_text(data)
        if not text.strip():
            raise ItemSkipped("no text (the file holds only whitespace)")
        warnings: list[str] = []
        text = cap_text(text, options, warnings)
        metadata: dict[str, Any] = {}
        if file_type in CODE_LANGUAGES:
            metadata["language"] = file_type
            problem = parse_problem(text, file_type)
            if problem is not None:  # indexed all the same, without symbols
                warnings.append(problem)
        return ParsedDocument(body=text, metadata=metadata, warnings=tuple(warnings))

    def _parse_commit(self, sha: str, options: ParseOptions) -> ParsedDocument:
        config: GitSourceConfig = self.config  # type: ignore[assignment]
        try:
            commit = self.repo.commit(sha, patch_limit=config.diff_max_lines)
        except RepositoryError as exc:
            raise ItemError(str(exc)) from None
        return commit_document(commit, options)

    def facets(self, key: str, metadata: dict[str, Any]) -> list[str]:
        facets = super().facets(key, metadata)
        file_type = self.file_type(key)
        if file_type in CODE_LANGUAGES:
            facets.append(f"language:{file_type}")
        author = metadata.get("author") or {}
        if author:
            name, email = str(author.get("name") or ""), str(author.get("email") or "")
            facets += [f"author:{v}" for v in dict.fromkeys((_fold(name), _fold(email))) if v]
            if name:
                facets.append(f"author_name:{' '.join(name.split())}")
        return facets

    # ---- chunk ---------------------------------------------------------------

    def chunk(
        self, document: DocumentView, count_tokens: CountTokens, target: int, maximum: int
    ) -> list[Chunk]:
        file_type = document.file_type
        if file_type in CODE_LANGUAGES or (
            file_type not in router.PARSERS and file_type != "commit"
        ):  # code by syntax; other text (config, SQL, Makefiles) in line windows
            language = file_type if file_type in CODE_LANGUAGES else None
            return chunk_code(
                document.body, language, document.key, count_tokens, target, maximum,
                document.body_start_line,
            )  # fmt: skip
        return super().chunk(document, count_tokens, target, maximum)


def _fold(text: str) -> str:
    return " ".join(text.split()).lower()


def commit_document(commit: CommitInfo, options: ParseOptions | None = None) -> ParsedDocument:
    """A commit as a document: the message, who and when, the changed files, and
    the diff of a small commit, each a section; it links to the files it changed.

    Its subject (git's first paragraph, which can be megabytes) is its title and the
    heading of its sections only as far as ``max_heading_chars``; its message is
    kept up to ``max_document_chars``, with a warning when cut."""
    options = options or ParseOptions()
    warnings: list[str] = []
    short = commit.sha[:10]
    subject = cap_heading(commit.subject, options.limits.max_heading_chars)
    builder = BodyBuilder()
    when = commit.authored_at.isoformat(timespec="minutes")
    parents = ", ".join(p[:10] for p in commit.parents) or "none (the first commit)"
    author = f"{commit.author_name} <{commit.author_email}>"
    committer = f"{commit.committer_name} <{commit.committer_email}>"
    committed = commit.committed_at.isoformat(timespec="minutes")
    header = [
        cap_text(commit.message.strip(), options, warnings) or "(no message)",
        "",
        f"Author: {author}",
        f"Date: {when}",
    ]
    # Applied later or by someone else (a rebase, `git am`, a cherry-pick): both shown,
    # as `git log --format=fuller` does; the author date stays the commit's date.
    if committer != author:
        header.append(f"Committer: {committer}")
    if committed != when:
        header.append(f"Committed: {committed}")
    header.append(f"Commit: {commit.sha} (parents: {parents})")
    builder.add("commit", f"Commit {short}", "\n".join(header), (subject,))
    summary = [_change_line(change) for change in commit.changes]
    if commit.truncated_changes:
        summary.append(f"… and {commit.truncated_changes} more files")
    files = builder.add("files", "Changed files", "\n".join(summary), (subject,))
    links: list[Link] = []
    if files is not None:
        for offset, change in enumerate(commit.changes[:MAX_LINKED_FILES]):
            if change.status != "deleted":
                links.append(
                    Link("/" + change.path, None, None, None, False, files.line_start + offset)
                )
    for path, text in _patches(commit.patch or ""):
        builder.add(f"diff={path}", f"Diff of {path}", text, (subject, path))
    added = sum(c.additions for c in commit.changes)
    removed = sum(c.deletions for c in commit.changes)
    metadata = {
        "sha": commit.sha,
        "parents": list(commit.parents),
        "author": {"name": commit.author_name, "email": commit.author_email},
        "committer": commit.committer_name,
        "date": commit.authored_at.isoformat(),
        "committed": commit.committed_at.isoformat(),
        "files": len(commit.changes) + commit.truncated_changes,
        "additions": added,
        "deletions": removed,
        "diff_indexed": commit.patch is not None,
    }
    return builder.document(
        title=subject or short,
        metadata=metadata,
        links=tuple(links),
        created=commit.authored_at,
        updated=commit.committed_at,
        warnings=tuple(warnings),
    )


def _change_line(change: Any) -> str:
    if change.status in ("renamed", "copied") and change.old_path:
        what = f"{change.status} {change.old_path} → {change.path}"
    else:
        what = f"{change.status} {change.path}"
    if change.binary:
        return f"{what} (binary)"
    return f"{what} (+{change.additions} −{change.deletions})"


def _patches(patch: str) -> Iterator[tuple[str, str]]:
    """(path, that file's part of the patch) for each file of a patch."""
    matches = list(_DIFF_HEADER.finditer(patch))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(patch)
        yield match.group(2), patch[match.start() : end].rstrip("\n")
