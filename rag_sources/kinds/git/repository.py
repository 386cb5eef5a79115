"""Reading a git repository in-process with pygit2 (libgit2): refs, trees, blobs, commits.

Why pygit2 (../shared/notes/libraries.md, "Git history"): no ``git`` program is
needed, bare repositories open like any other, and nothing in a repository's
configuration is executed (libgit2 has no fsmonitor, textconv, hooks or filters on
this path). Its object API lists 3,000 commits with their changed paths in 0.48 s.

Conventions:

- Object ids are 40-character hex strings (``str``), dates are aware datetimes in
  the time zone the author or committer wrote.
- Paths are git's bytes decoded as UTF-8; bytes that are not UTF-8 become surrogate
  escapes (as ``os.fsdecode`` does on Linux), so such a path still round-trips to its
  bytes and ``rules.path_skip_reason`` reports it ("file name is not valid UTF-8").
  ``rag_sources.scanning.display_path`` turns it into printable text.
- A path with a ``.git`` component (which git itself refuses to check out) is never
  listed.
- One ``GitRepository`` is for one thread at a time (libgit2 objects are not shared
  safely across threads); open one per thread.
- Loose objects are read by ``_CheckedLooseObjects`` (Python's zlib, first in line
  before libgit2's own reader): libgit2 1.9 loops forever on a truncated loose object
  (libgit2#7342). A damaged object (loose or packed) raises ``RepositoryError``
  saying so and naming ``git fsck``; a file or folder whose object is damaged is
  listed with that problem, and the rest of the tree is read.
- Messages name objects and refs, never the repository's path (they reach remote
  MCP callers through ``file_issues``), except those of ``open_repository``.
"""

from __future__ import annotations

import difflib
import heapq
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

import pygit2
from pygit2.enums import AttrCheck, DeltaStatus, DiffFind, ObjectType, RepositoryOpenFlag

from rag_sources.kinds.git.rules import NO_ATTRIBUTES, PathAttributes

PATCH_MAX_LINES = 400  # a commit's patch text is kept when it changes at most this many lines
PATCH_MAX_BYTES = 32_768  # ...and its text is at most this long
MAX_FILES = 300  # changed files listed per commit; the rest are counted
RENAME_LIMIT = 1000  # as git's diff.renameLimit: rename detection gives up on bigger diffs
# Commits older than ``since`` seen in a row before the walk stops: a commit with a wrong
# clock does not end the window early (plain `git log --since` stops at the first one).
SINCE_SLACK = 5
# Git's object types, as loose objects name them, and libgit2's numbers for them.
_LOOSE_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_LOOSE_HEADER_BYTES = 64  # "blob 123456789\0" and room to spare
_FSCK = "check the repository with `git fsck`"
_QUOTED_PATH = re.compile(r"""['"]?/[^'"\s]*['"]?""")
# What libgit2 says of an object it cannot read (as opposed to one that is not there,
# or is not what was asked for).
_DAMAGE_WORDS = (
    "inflat", "zlib", "corrupt", "hash mismatch", "failed to read", "header", "packfile",
    "truncated", "malformed", "invalid object", "damaged", "decompress", "short read",
)  # fmt: skip
_OID = re.compile(r"\b(?:[0-9a-f]{64}|[0-9a-f]{40})\b")

_LINK_MODE = 0o120000
_SUBMODULE_MODE = 0o160000
_STATUS = {
    DeltaStatus.ADDED: "added",
    DeltaStatus.DELETED: "deleted",
    DeltaStatus.MODIFIED: "modified",
    DeltaStatus.RENAMED: "renamed",
    DeltaStatus.COPIED: "copied",
    DeltaStatus.TYPECHANGE: "type changed",
}
_ATTR_FLAGS = AttrCheck.INDEX_ONLY | AttrCheck.INCLUDE_COMMIT | AttrCheck.NO_SYSTEM


class RepositoryError(Exception):
    """A repository, ref or object that cannot be read; ``str()`` is one line saying what
    is wrong and what to do."""


class DamagedObjectError(pygit2.GitError):
    """Raised by ``_CheckedLooseObjects`` for a loose object that does not inflate."""


def damaged_message(oid: object, reason: str) -> str:
    """One line for an object that cannot be read: which, why, and ``git fsck``."""
    reason = " ".join(_QUOTED_PATH.sub("a file", reason).split())[:200]
    return f"the repository's object {oid} is damaged ({reason}); {_FSCK}"


def _damage_error(exc: BaseException) -> RepositoryError:
    """``RepositoryError`` for a libgit2 error on an object that cannot be read."""
    if isinstance(exc, DamagedObjectError):
        return RepositoryError(str(exc))
    text = str(exc)
    found = _OID.search(text)
    oid = found.group(0) if found else "(unknown)"
    return RepositoryError(damaged_message(oid, text.replace(f"{oid}: ", "")))


def _is_damage(exc: BaseException) -> bool:
    """Whether a libgit2 error says an object cannot be read (rather than not found)."""
    if isinstance(exc, DamagedObjectError):
        return True
    if not isinstance(exc, pygit2.GitError) or isinstance(exc, KeyError):
        return False
    text = str(exc).lower()
    return any(word in text for word in _DAMAGE_WORDS)


def _inflate(oid: object, raw: bytes, header_only: bool = False) -> tuple[int, int, bytes]:
    """(type, size, content) of a loose object's bytes; only what the header says with
    ``header_only`` (content b""). Raises ``DamagedObjectError``: the output is bounded
    by the size the header declares, a stream that ends early or runs on is damage."""
    stream = zlib.decompressobj()
    try:
        head = stream.decompress(raw, _LOOSE_HEADER_BYTES)
        kind, sep, rest = head.partition(b"\0")
        name, _, size_text = kind.partition(b" ")
        if not sep or name not in _LOOSE_TYPES or not size_text.isdigit():
            raise DamagedObjectError(damaged_message(oid, "no object header"))
        size = int(size_text)
        if header_only:
            return _LOOSE_TYPES[name], size, b""
        body = rest + stream.decompress(stream.unconsumed_tail, size - len(rest) + 1)
    except zlib.error as exc:
        raise DamagedObjectError(damaged_message(oid, f"zlib: {exc}")) from None
    if len(body) != size or not stream.eof or stream.unconsumed_tail:
        what = "truncated" if not stream.eof and len(body) < size else "wrong size"
        raise DamagedObjectError(damaged_message(oid, what))
    return _LOOSE_TYPES[name], size, body


class _CheckedLooseObjects(pygit2.OdbBackend):
    """The loose objects of one objects folder, read with Python's zlib before libgit2's
    own loose backend is asked (which loops forever on a truncated one): a damaged
    object raises ``DamagedObjectError``; any other object is "not found" here and
    read by libgit2 (packs) as before."""

    def __init__(self, objects: str) -> None:
        super().__init__()
        self._objects = objects

    def _raw(self, oid: object, limit: int = -1) -> bytes:
        hexid = str(oid)
        try:
            with open(os.path.join(self._objects, hexid[:2], hexid[2:]), "rb") as handle:
                return handle.read(limit)
        except FileNotFoundError:
            raise KeyError(hexid) from None
        except OSError as exc:
            reason = f"cannot be read: {exc.strerror or exc}"
            raise DamagedObjectError(damaged_message(hexid, reason)) from None

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        kind, _, body = _inflate(oid, self._raw(oid))
        return kind, body

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        kind, size, _ = _inflate(oid, self._raw(oid, 4096), header_only=True)
        return kind, size

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        hexid = str(oid)
        return os.path.isfile(os.path.join(self._objects, hexid[:2], hexid[2:]))

    def _find(self, prefix: str) -> pygit2.Oid:
        try:
            names = os.listdir(os.path.join(self._objects, prefix[:2]))
        except OSError:
            names = []
        found = [n for n in names if n.startswith(prefix[2:]) and len(n) == 38]
        if not found:
            raise KeyError(prefix)
        if len(found) > 1:
            raise ValueError(f"{prefix} is ambiguous")
        return pygit2.Oid(hex=prefix[:2] + found[0])

    def read_prefix_cb(self, prefix: str) -> tuple[int, bytes, pygit2.Oid]:
        oid = self._find(prefix)
        kind, body = self.read_cb(oid)
        return kind, body, oid

    def exists_prefix_cb(self, prefix: str) -> pygit2.Oid:
        return self._find(prefix)

    def refresh_cb(self) -> None:
        return None


def _object_folders(git_dir: str) -> list[str]:
    """The repository's objects folder (a linked worktree's is its main one's) and the
    folders ``objects/info/alternates`` adds, recursively as git reads them."""
    common = os.path.join(git_dir, "commondir")
    if os.path.isfile(common):
        with open(common, encoding="utf-8", errors="replace") as handle:
            git_dir = os.path.join(git_dir, handle.read().strip())
    folders: list[str] = []
    todo = [os.path.normpath(os.path.join(git_dir, "objects"))]
    while todo and len(folders) < 16:  # git follows 5 levels of alternates
        folder = todo.pop(0)
        if folder in folders:
            continue
        folders.append(folder)
        try:
            with open(os.path.join(folder, "info", "alternates"), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            if line.strip() and not line.startswith("#"):
                todo.append(os.path.normpath(os.path.join(folder, line.strip())))
    return folders


def _checked(repo: pygit2.Repository) -> pygit2.Repository:
    """``repo`` with its loose objects read by ``_CheckedLooseObjects`` first."""
    odb = repo.odb
    for folder in _object_folders(repo.path):
        odb.add_backend(_CheckedLooseObjects(folder), 1000)
    return repo


@dataclass(frozen=True)
class RepoInfo:
    """The state of a repository when ``GitRepository.info`` was read."""

    path: Path  # the work tree's top folder, or the repository folder when bare
    git_dir: Path  # the .git folder (the repository folder itself when bare)
    bare: bool
    shallow: bool  # a shallow clone: history stops at its oldest fetched commits
    empty: bool  # no commits at all
    detached: bool  # HEAD is a commit, not a branch
    head_ref: str | None  # "refs/heads/main"; None when detached, empty or unborn


@dataclass(frozen=True)
class TreeEntry:
    """One file of a commit's tree."""

    path: str  # relative, "/"-separated; see the module doc for undecodable names
    blob_id: str  # the blob's id; for a submodule, the commit it pins
    mode: int  # git's file mode: 0o100644, 0o100755, 0o120000 (link), 0o160000 (submodule)
    size: int | None  # bytes of the blob (a link: its target's length); None for a submodule
    # "damaged": an object that cannot be read (``problem`` says which and what to do):
    # a file, or a folder (its path ends with "/") whose files cannot be listed.
    type: Literal["blob", "link", "submodule", "damaged"]
    problem: str | None = None


@dataclass(frozen=True)
class FileChange:
    """One file changed by a commit, compared with its first parent."""

    path: str  # the new path (the old one when deleted)
    old_path: str | None  # set when renamed or copied
    status: str  # "added", "modified", "deleted", "renamed", "copied" or "type changed"
    additions: int  # lines; 0 for a binary file
    deletions: int
    binary: bool


@dataclass(frozen=True)
class CommitInfo:
    """A commit with its changes against its first parent (the empty tree for a root)."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: datetime
    committer_name: str
    committer_email: str
    committed_at: datetime
    message: str  # full message; bytes that do not decode are replaced (U+FFFD)
    subject: str  # the first paragraph on one line, as git's %s
    changes: tuple[FileChange, ...]  # at most max_files, in git's path order
    patch: str | None  # the diff text when the commit is small enough, else None
    truncated_changes: int  # changed files not listed in ``changes`` (past max_files)
    # A shallow clone's oldest commit: its parents are not in the clone, so its changes
    # are unknown (``changes`` is empty) and ``parents`` are read from the commit itself.
    shallow_boundary: bool = False

    @property
    def additions(self) -> int:
        return sum(c.additions for c in self.changes)

    @property
    def deletions(self) -> int:
        return sum(c.deletions for c in self.changes)


def open_repository(path: Path | str) -> GitRepository:
    """The repository whose top folder (or bare repository folder, or ``.git``
    folder) is ``path``. Parent folders are never searched: a folder inside a
    repository is refused with the top folder named, so a subfolder never silently
    indexes the repository around it. Raises ``RepositoryError``."""
    path = Path(path).expanduser().absolute()
    try:
        if not path.is_dir():
            if path.exists():
                raise RepositoryError(
                    f"{path} is a file, not a folder; give the repository's folder as `path`"
                )
            raise RepositoryError(f"{path} does not exist; fix `path` in the config")
        os.listdir(path)
    except PermissionError as exc:
        raise RepositoryError(
            f"{path} cannot be read ({exc.strerror.lower()}); check its permissions"
        ) from None
    try:
        repo = pygit2.Repository(str(path), RepositoryOpenFlag.NO_SEARCH)
    except pygit2.GitError as exc:
        raise _open_error(path, str(exc)) from None
    return GitRepository(_checked(repo))


def _open_error(path: Path, text: str) -> RepositoryError:
    if "not owned by current user" in text:
        return RepositoryError(
            f"{path} belongs to another user, and git refuses repositories owned by someone "
            'else ("dubious ownership"); run ragline as its owner, or trust it with '
            f"`git config --global --add safe.directory {path}`"
        )
    if "permission denied" in text.lower():
        return RepositoryError(f"{path} cannot be read ({text}); check its permissions")
    if "not found" not in text.lower():
        return RepositoryError(f"{path}: the git repository cannot be opened ({text})")
    dot_git = path / ".git"
    if dot_git.exists():
        return RepositoryError(
            f"{dot_git} is not a valid git repository ({text}); check it with `git status` "
            f"in {path}"
        )
    top = _enclosing_top(path)
    if top is not None:
        rel = path.relative_to(top).as_posix() if path.is_relative_to(top) else None
        hint = f' and include = ["{rel}/**"] to index only this folder' if rel else ""
        return RepositoryError(
            f"{path} is inside the git repository {top}, not its top folder; give {top} as "
            f"`path`{hint}"
        )
    return RepositoryError(
        f"{path} is not a git repository (no .git folder); give the repository's folder, or "
        'use kind = "documents"'
    )


def _enclosing_top(path: Path) -> Path | None:
    """The top folder of the repository around ``path``, for the error message only."""
    try:
        found = pygit2.discover_repository(str(path))
    except pygit2.GitError:
        return None
    if not found:
        return None
    git_dir = Path(found.rstrip("/"))
    return git_dir.parent if git_dir.name == ".git" else git_dir


def _decode(raw: bytes, encoding: str | None = None) -> str:
    if encoding:
        try:
            return raw.decode(encoding, "replace")
        except LookupError:
            pass
    return raw.decode("utf-8", "replace")


def _path(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _when(seconds: int, offset_minutes: int) -> datetime:
    """An aware datetime; a malformed offset or time (possible in old or crafted
    commits) falls back to UTC or the epoch rather than failing the commit."""
    try:
        tz = timezone(timedelta(minutes=offset_minutes))
    except ValueError:
        tz = UTC
    try:
        return datetime.fromtimestamp(seconds, tz)
    except (OverflowError, OSError, ValueError):
        return datetime.fromtimestamp(0, UTC)


def _subject(message: str) -> str:
    """Git's subject: the first paragraph, its lines joined by spaces."""
    lines: list[str] = []
    for line in message.lstrip("\n").splitlines():
        if not line.strip():
            if lines:
                break
            continue
        lines.append(line.strip())
    return " ".join(lines)


def _is_dot_git(raw_name: bytes) -> bool:
    # Case-insensitive (as on macOS and Windows) and with NTFS's trailing dots/spaces.
    return raw_name.rstrip(b". ").lower() == b".git"


class GitRepository:
    """An open repository. Use ``open_repository`` to get one; ``close()`` (or a
    ``with`` block) releases its files."""

    def __init__(self, repo: pygit2.Repository):
        self._repo = repo
        # commit -> the blob ids of its tree's .gitattributes files
        self._attributes_in: dict[str, tuple[str, ...]] = {}
        # For ``get_attr`` only: a handle without the Python backend (libgit2 calls it
        # through cffi), used once the .gitattributes blobs it reads are checked.
        self._plain: pygit2.Repository | None = None
        self._checked_attributes: dict[str, bool] = {}  # commit -> they all read

    def __enter__(self) -> GitRepository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._repo.free()
        if self._plain is not None:
            self._plain.free()

    # --- the repository and its refs -------------------------------------------

    @property
    def info(self) -> RepoInfo:
        """The repository's state now (read again at each access: HEAD may move)."""
        repo = self._repo
        git_dir = Path(repo.path.rstrip("/"))
        bare = repo.is_bare
        empty = self._empty()
        detached = repo.head_is_detached
        head_ref = None
        if not (detached or repo.head_is_unborn):
            head_ref = repo.references["HEAD"].target
            head_ref = head_ref if isinstance(head_ref, str) else None
        return RepoInfo(
            path=git_dir if bare or not repo.workdir else Path(repo.workdir.rstrip("/")),
            git_dir=git_dir,
            bare=bare,
            shallow=repo.is_shallow,
            empty=empty,
            detached=detached,
            head_ref=head_ref,
        )

    @property
    def path(self) -> Path:
        return self.info.path

    def resolve(self, ref: str | None) -> str | None:
        """The commit id that ``ref`` names (a branch, tag, remote branch, commit id or
        any revision git understands; tags are peeled); ``None`` means HEAD. Returns
        None for a repository without commits. An unknown ref raises
        ``RepositoryError`` naming the closest branches and tags."""
        repo = self._repo
        if self._empty():
            return None
        if ref is None:
            if repo.head_is_unborn:
                target = repo.references["HEAD"].target
                branch = str(target).removeprefix("refs/heads/")
                raise RepositoryError(
                    f"HEAD is the branch {branch!r}, which has no commits yet; "
                    f"set `ref` to one of: {', '.join(self._branch_names()[:10]) or '(none)'}"
                )
            try:
                return str(repo.head.peel(pygit2.Commit).id)
            except pygit2.GitError as exc:
                raise RepositoryError(self._damaged_ref("HEAD", exc)) from None
        try:
            found = repo.revparse_single(ref)
        except (KeyError, ValueError, pygit2.GitError) as exc:
            if _is_damage(exc):
                raise RepositoryError(self._damaged_ref(ref, exc)) from None
            raise self._unknown_ref(ref, exc) from None
        try:
            return str(found.peel(pygit2.Commit).id)
        except (ValueError, pygit2.GitError) as exc:
            if _is_damage(exc):
                raise RepositoryError(self._damaged_ref(ref, exc)) from None
            kind = found.type_str if hasattr(found, "type_str") else type(found).__name__
            raise RepositoryError(
                f"{ref!r} is a {kind}, not a commit; set `ref` to a branch, tag or commit"
            ) from None

    @staticmethod
    def _damaged_ref(ref: str, exc: BaseException) -> str:
        return f"{ref} cannot be read: {_damage_error(exc)}"

    def _empty(self) -> bool:
        # Not libgit2's is_empty: that also wants HEAD on init.defaultBranch (or
        # "master"), so a new repository made with `git init -b main` is "not empty".
        return self._repo.head_is_unborn and not self._repo.listall_references()

    def _branch_names(self) -> list[str]:
        return sorted(self._repo.branches.local)

    def _unknown_ref(self, ref: str, exc: Exception) -> RepositoryError:
        text = str(exc).strip("'\"")
        if "ambiguous" in text.lower():
            return RepositoryError(
                f"{ref!r} is ambiguous (several objects start with it); give "
                "more characters of the commit id, or a branch or tag"
            )
        names = self._branch_names() + sorted(self._repo.branches.remote)
        names += [
            r.removeprefix("refs/tags/")
            for r in self._repo.references
            if r.startswith("refs/tags/")
        ]
        short = ref.removeprefix("refs/heads/").removeprefix("refs/tags/")
        close = difflib.get_close_matches(short, names, n=5, cutoff=0.5)
        if close:
            hint = f"did you mean {', '.join(close)}?"
        elif names:
            hint = f"its branches and tags: {', '.join(names[:10])}"
        else:
            hint = "it has no branches or tags"
        return RepositoryError(
            f"ref {ref!r} not found in the repository; {hint} (set `ref` to a branch, tag or "
            "commit, or leave it out for HEAD)"
        )

    def has_commit(self, sha: str) -> bool:
        """Whether the commit ``sha`` is still in the object store (it can be gone after
        a force-push and a garbage collection)."""
        try:
            return self._repo[sha].type == ObjectType.COMMIT
        except (KeyError, ValueError, pygit2.GitError):
            return False

    # --- files of a commit ----------------------------------------------------------

    def tree_entries(self, commit: str) -> Iterator[TreeEntry]:
        """Every file of ``commit``'s tree, through all folders, in git's order (sorted by
        the bytes of the path). Submodules are listed (type "submodule"), symbolic links
        too (type "link"); paths with a ``.git`` component are not. A file or folder
        whose object cannot be read is listed as "damaged" (a folder as ``path/``), and
        the rest is read; a damaged commit or root tree raises ``RepositoryError``."""
        try:
            root = self._commit(commit).tree
        except pygit2.GitError as exc:
            raise _damage_error(exc) from None
        attributes: list[str] = []
        odb = self._repo.odb
        stack: list[tuple[str, Iterator[pygit2.Object]]] = [("", iter(root))]
        while stack:
            prefix, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                continue
            raw = entry.raw_name
            if _is_dot_git(raw):
                continue
            path = prefix + _path(raw)
            mode = int(entry.filemode)
            if entry.type == ObjectType.TREE:
                try:
                    stack.append((path + "/", iter(self._repo[entry.id])))
                except (KeyError, pygit2.GitError) as exc:
                    yield self._damaged_entry(path + "/", entry, mode, exc)
                continue
            if mode == _SUBMODULE_MODE or entry.type == ObjectType.COMMIT:
                yield TreeEntry(path, str(entry.id), mode, None, "submodule")
                continue
            try:
                size = odb.read_header(entry.id)[1]
            except (KeyError, pygit2.GitError) as exc:
                yield self._damaged_entry(path, entry, mode, exc)
                continue
            if raw == b".gitattributes":
                attributes.append(str(entry.id))
            kind: Literal["blob", "link"] = "link" if mode == _LINK_MODE else "blob"
            yield TreeEntry(path, str(entry.id), mode, size, kind)
        self._attributes_in[commit] = tuple(attributes)

    @staticmethod
    def _damaged_entry(path: str, entry: pygit2.Object, mode: int, exc: Exception) -> TreeEntry:
        if isinstance(exc, KeyError):
            problem = f"the repository's object {entry.id} is missing; {_FSCK}"
        else:
            problem = str(_damage_error(exc))
        if path.endswith("/"):
            problem += " (the folder's files cannot be listed; what the index holds is kept)"
        return TreeEntry(path, str(entry.id), mode, None, "damaged", problem)

    def read_blob(self, blob_id: str) -> bytes:
        """The content of a blob."""
        try:
            obj = self._repo[blob_id]
            if not isinstance(obj, pygit2.Blob):
                raise RepositoryError(f"object {blob_id} is a {obj.type_str}, not a file")
            return obj.data
        except (KeyError, ValueError):
            raise RepositoryError(
                f"object {blob_id} is missing from the repository (the repository changed "
                f"during the run?); run again, or {_FSCK}"
            ) from None
        except pygit2.GitError as exc:
            raise _damage_error(exc) from None

    def blob_size(self, blob_id: str) -> int:
        """A blob's size in bytes, from the object's header (the content is not read)."""
        try:
            return self._repo.odb.read_header(pygit2.Oid(hex=blob_id))[1]
        except (KeyError, ValueError):
            raise RepositoryError(f"object {blob_id} is missing from the repository") from None
        except pygit2.GitError as exc:
            raise _damage_error(exc) from None

    def attributes(self, commit: str, path: str) -> PathAttributes:
        """What the ``.gitattributes`` files of ``commit`` (and the repository's
        ``info/attributes``) say of ``path``: linguist-vendored, linguist-generated,
        binary. Cheap: a commit whose tree has no ``.gitattributes`` is answered
        without a lookup (known once ``tree_entries`` has listed it). A damaged
        ``.gitattributes`` blob is read as none (the path rules still apply)."""
        blobs = self._attributes_in.get(commit)
        if blobs is None:
            for _ in self.tree_entries(commit):
                pass
            blobs = self._attributes_in[commit]
        if not blobs and not (Path(self._repo.path) / "info" / "attributes").is_file():
            return NO_ATTRIBUTES
        readable = self._checked_attributes.get(commit)
        if readable is None:
            readable = self._checked_attributes[commit] = all(map(self._readable, blobs))
        if not readable:
            return NO_ATTRIBUTES
        if self._plain is None:
            self._plain = pygit2.Repository(self._repo.path, RepositoryOpenFlag.NO_SEARCH)
        plain = self._plain

        def get(name: str) -> bool | None:
            value = plain.get_attr(path, name, _ATTR_FLAGS, commit)
            if isinstance(value, str):
                return value.lower() not in ("false", "0", "no")
            return value

        binary = get("binary")
        if binary is None and get("diff") is False:
            binary = True
        return PathAttributes(get("linguist-vendored"), get("linguist-generated"), binary)

    def _readable(self, oid: str) -> bool:
        try:
            self._repo.odb.read(oid)
        except (KeyError, ValueError, pygit2.GitError):
            return False
        return True

    # --- history --------------------------------------------------------------------

    def commit_ids(
        self,
        head: str,
        max_count: int | None = None,
        since: datetime | None = None,
        damaged: dict[str, str] | None = None,
    ) -> list[tuple[str, datetime]]:
        """The commits reachable from ``head`` (merged branches' commits included),
        newest first by commit date, with their **author** dates (the date a commit is
        shown and filtered by): at most ``max_count``, and none authored before
        ``since`` (a naive datetime is taken as UTC). Reads no diffs; a shallow
        clone's history ends at its oldest fetched commits without error. A parent
        that cannot be read (damaged or missing) ends the walk on that line of
        history: it goes into ``damaged`` (id → problem) when given, else raises
        ``RepositoryError``."""
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        if max_count is not None and max_count <= 0:
            return []
        # A walk by commit date of our own rather than libgit2's sorted walker: that one
        # reads the whole history before giving the first commit (113 ms for 20,000
        # commits), this one stops at the window (4 ms for the newest 500).
        try:
            start = self._commit(head)
        except pygit2.GitError as exc:
            raise _damage_error(exc) from None
        heap: list[tuple[int, int, pygit2.Commit]] = [(-start.commit_time, 0, start)]
        seen = {start.id}
        pushed = 0
        found: list[tuple[str, datetime]] = []
        older = 0
        since_time = since.timestamp() if since is not None else None
        while heap:
            commit = heapq.heappop(heap)[2]
            author = commit.author
            when = _when(author.time, author.offset)
            if since_time is None or author.time >= since_time:
                older = 0
                found.append((str(commit.id), when))
                if max_count is not None and len(found) >= max_count:
                    break
            elif commit.commit_time < since_time:
                # The walk (by commit date) is past the window. Old commits applied
                # lately (authored before it, committed in it) neither enter it nor
                # end it: a rebased branch would otherwise stop the walk early.
                older += 1
                if older >= SINCE_SLACK:
                    break
            else:
                older = 0
            # A shallow clone's oldest commits have no parents here (libgit2 grafts them).
            for parent_id in commit.parent_ids:
                if parent_id in seen:
                    continue
                seen.add(parent_id)
                try:
                    parent = self._repo[parent_id]
                except (KeyError, pygit2.GitError) as exc:
                    problem = (
                        f"the history cannot be read past commit {commit.id}: its parent "
                        f"{parent_id} is missing; {_FSCK}"
                        if isinstance(exc, KeyError)
                        else str(_damage_error(exc))
                    )
                    if damaged is None:
                        raise RepositoryError(problem) from None
                    damaged[str(parent_id)] = problem
                    continue
                pushed += 1
                heapq.heappush(heap, (-parent.commit_time, pushed, parent))
        return found

    def commit(
        self,
        sha: str,
        patch_limit: int = PATCH_MAX_LINES,
        patch_max_bytes: int = PATCH_MAX_BYTES,
        max_files: int = MAX_FILES,
    ) -> CommitInfo:
        """``sha`` with its author, dates, message and its changes against its first
        parent (renames detected; the root commit against the empty tree). The patch
        text is kept when the commit changes at most ``patch_limit`` lines in at
        most ``max_files`` files and the text is at most ``patch_max_bytes``. An
        object it needs that is damaged raises ``RepositoryError`` saying so."""
        try:
            return self._commit_info(sha, patch_limit, patch_max_bytes, max_files)
        except pygit2.GitError as exc:
            raise _damage_error(exc) from None

    def _commit_info(
        self, sha: str, patch_limit: int, patch_max_bytes: int, max_files: int
    ) -> CommitInfo:
        commit = self._commit(sha)
        encoding = commit.message_encoding
        message = _decode(commit.raw_message, encoding)
        author, committer = commit.author, commit.committer
        parents = tuple(str(p) for p in commit.parent_ids)
        boundary = not parents and self._is_shallow_boundary(commit)
        changes: list[FileChange] = []
        patch: str | None = None
        truncated = 0
        if boundary:
            parents = self._raw_parents(commit)
        else:
            changes, patch, truncated = self._changes(
                commit, patch_limit, patch_max_bytes, max_files
            )
        return CommitInfo(
            sha=str(commit.id),
            parents=parents,
            author_name=_decode(author.raw_name, encoding),
            author_email=_decode(author.raw_email, encoding),
            authored_at=_when(author.time, author.offset),
            committer_name=_decode(committer.raw_name, encoding),
            committer_email=_decode(committer.raw_email, encoding),
            committed_at=_when(committer.time, committer.offset),
            message=message,
            subject=_subject(message),
            changes=tuple(changes),
            patch=patch,
            truncated_changes=truncated,
            shallow_boundary=boundary,
        )

    def _changes(
        self, commit: pygit2.Commit, max_lines: int, max_bytes: int, max_files: int
    ) -> tuple[list[FileChange], str | None, int]:
        if commit.parent_ids:
            try:
                parent = self._repo[commit.parent_ids[0]]
            except KeyError:
                raise RepositoryError(
                    f"commit {commit.id}: its parent {commit.parent_ids[0]} is missing from "
                    f"the repository; {_FSCK}"
                ) from None
            diff = parent.tree.diff_to_tree(commit.tree)
        else:
            diff = commit.tree.diff_to_tree(swap=True)
        diff.find_similar(DiffFind.FIND_RENAMES, rename_limit=RENAME_LIMIT)
        total = len(diff)
        changes: list[FileChange] = []
        texts: list[bytes] = []
        size = lines = 0
        for index in range(min(total, max_files)):
            patch = diff[index]
            if patch is None:  # an unchanged entry: none in a tree-to-tree diff
                continue
            delta = patch.delta
            _, additions, deletions = patch.line_stats
            status = _STATUS.get(delta.status, delta.status.name.lower())
            new, old = _path(delta.new_file.raw_path), _path(delta.old_file.raw_path)
            changes.append(
                FileChange(
                    path=old if delta.status == DeltaStatus.DELETED else new,
                    old_path=old
                    if delta.status in (DeltaStatus.RENAMED, DeltaStatus.COPIED)
                    else None,
                    status=status,
                    additions=additions,
                    deletions=deletions,
                    binary=delta.is_binary,
                )
            )
            lines += additions + deletions
            if lines <= max_lines and size <= max_bytes:
                data = patch.data
                size += len(data)
                texts.append(data)
        text = None
        if total <= max_files and lines <= max_lines and size <= max_bytes:
            text = _decode(b"".join(texts))
        return changes, text, total - min(total, max_files)

    def _commit(self, sha: str) -> pygit2.Commit:
        try:
            obj = self._repo[sha]
        except (KeyError, ValueError):
            raise RepositoryError(
                f"commit {sha} is not in the repository (rewritten history, or a shallow "
                "clone?); run again to re-read the ref"
            ) from None
        try:
            return obj.peel(pygit2.Commit)
        except (ValueError, pygit2.GitError):
            raise RepositoryError(f"{sha} is a {obj.type_str}, not a commit") from None

    def _is_shallow_boundary(self, commit: pygit2.Commit) -> bool:
        if not self._repo.is_shallow:
            return False
        shallow = Path(self._repo.path) / "shallow"
        try:
            return str(commit.id) in shallow.read_text(encoding="ascii").split()
        except OSError:
            return False

    def _raw_parents(self, commit: pygit2.Commit) -> tuple[str, ...]:
        """The parents written in the commit object (libgit2 hides a shallow clone's)."""
        _, data = self._repo.odb.read(commit.id)
        parents = []
        for line in bytes(data).split(b"\n"):
            if not line:
                break
            if line.startswith(b"parent "):
                parents.append(line[7:].decode("ascii"))
        return tuple(parents)
