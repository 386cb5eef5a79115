"""Listing a source's files (include/exclude globs and ignored folders, stat only), and
opening them safely.

The walker holds the security rules of the file-based kinds:

- nothing outside the source root is listed or read: symbolic links are resolved
  and checked. A link to a file inside the root is followed when the file it points
  to is itself selected by the source's globs (so a link cannot bypass ``exclude``);
  links to folders are never followed (no file indexed twice, no loops); links that
  leave the root, dangle or loop are listed as skipped, with the reason;
- every entry that cannot be indexed (a file name that is not valid UTF-8, a pipe
  or device named like a note) is listed as a problem with a one-line reason, never
  dropped silently and never failing the source;
- a folder or file that exists but cannot be read now (permissions, a sync tool
  holding it) is listed as *unavailable*: what the index holds for it, and under
  it, is kept until it can be read again. A source root that cannot be reached
  raises ``SourceUnavailableError``.

``open_source_file`` re-checks at read time, so a file replaced by a link between
listing and reading is refused.
"""

from __future__ import annotations

import atexit
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wcmatch import glob

from rag_sources.config import FileSourceConfig
from rag_sources.errors import ConfigError, SourceUnavailableError

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB

SKIPPED = "skipped"  # not indexed, by rule: whatever the index held for it is removed
ERROR = "error"  # cannot be read now: whatever the index holds for it is kept


@dataclass(frozen=True)
class FileStat:
    """One entry of a source's listing: a file to index, or a problem entry.

    A problem entry (``problem`` set) is a file, link or folder (its path ends with
    ``/``) that cannot be indexed; ``unavailable`` says it exists but cannot be read
    now, so what the index holds for it (and, for a folder, under it) is kept.
    """

    path: str  # relative POSIX path inside the source root
    size: int | None
    mtime_ns: int | None
    problem: str | None = None  # why it cannot be indexed, on one line
    severity: str = SKIPPED  # of the problem: SKIPPED or ERROR
    unavailable: bool = False


class OutsideSourceError(OSError):
    """A path that resolves outside its source root (or to something not a file)."""


def display_path(path: str) -> str:
    """``path`` as valid text: bytes that are not UTF-8 (kept by the OS as surrogate
    escapes) shown as ``\\xff``, so the name can be stored, printed and sent as JSON."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_valid_text(path: str) -> bool:
    """Whether ``path`` encodes as UTF-8 (a name decoded with surrogate escapes does not)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def source_root(source: FileSourceConfig) -> Path:
    """The real (symlink-free) path of the source's folder.

    Raises ``SourceUnavailableError`` when it cannot be reached (an unplugged disk):
    the index keeps what it holds for the source. A path that is a file is a
    ``ConfigError``.
    """
    root = Path(source.path)
    try:
        real = Path(os.path.realpath(root, strict=True))
    except OSError as exc:
        raise _unavailable(source, exc) from None
    if not real.is_dir():
        raise ConfigError(
            f"source {source.name!r}: {root} is not a folder; fix `path` in the config"
        )
    return real


def _unavailable(source: FileSourceConfig, exc: OSError) -> SourceUnavailableError:
    reason = "does not exist" if isinstance(exc, FileNotFoundError) else _reason(exc)
    return SourceUnavailableError(
        f"source {source.name!r}: folder {source.path} {reason}; reconnect the disk or fix "
        "`path` in the config (what the index holds for the source is kept until then)"
    )


def _reason(exc: OSError) -> str:
    return f"cannot be read ({_strerror(exc)})"


def _strerror(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def iter_source_files(source: FileSourceConfig) -> Iterator[FileStat]:
    """Every file of ``source`` that its globs (or its attachment types) select, and
    every entry that cannot be indexed as a problem entry, in a stable order."""
    yield from _Walker(source, source_root(source)).walk()


@dataclass(frozen=True)
class PathsListing:
    """The listing of some paths of a source (the paths file-system events named)."""

    stats: list[FileStat]  # what ``iter_source_files`` lists at and under those paths
    # The keys it speaks for: each path, and each path as a folder prefix (ending with
    # "/"). What the index holds at a covered key that ``stats`` lacks is gone.
    covered: list[str]


def list_source_paths(
    source: FileSourceConfig, root: Path, paths: list[Path]
) -> PathsListing | None:
    """What ``iter_source_files`` lists at and under ``paths`` (under ``root``, the
    watched folder), without walking the rest of the source: a file is looked at
    alone, a folder walked, a path gone lists nothing. None when only a whole listing
    can tell: a path outside ``root``, the root itself, a path through a linked or
    unreadable folder, a name the events could not carry."""
    real_root = source_root(source)
    walker = _Walker(source, real_root)
    stats: list[FileStat] = []
    covered: list[str] = []
    for path in sorted(set(paths)):
        try:
            rel = Path(path).relative_to(root).as_posix()
        except ValueError:
            return None
        parts = rel.split("/")
        if rel in ("", ".") or "\ufffd" in rel or not is_valid_text(rel) or ".." in parts:
            return None
        covered.extend([rel, rel + "/"])
        inside = walker.folders_on_the_way(parts[:-1])
        if inside is None:
            return None
        if not inside:
            continue  # under an ignored folder, or gone: nothing listed
        try:
            st = os.lstat(real_root / rel)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
        found, folder = walker._entry(_PathEntry(str(real_root / rel), parts[-1], st), rel)
        if folder is not None:
            stats.extend(walker.walk(folder[0]))
        elif found is not None:
            stats.append(found)
    return PathsListing(stats, covered)


class _PathEntry:
    """One path as ``os.scandir`` would show it (from its ``lstat``)."""

    def __init__(self, path: str, name: str, st: os.stat_result):
        self.path, self.name, self._st = path, name, st

    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self._st.st_mode)

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return stat.S_ISDIR(self._st.st_mode)

    def is_file(self, follow_symlinks: bool = True) -> bool:
        return stat.S_ISREG(self._st.st_mode)

    def stat(self, follow_symlinks: bool = True) -> os.stat_result:
        return self._st


def may_change_source(source: FileSourceConfig, root: Path, path: Path) -> bool:
    """Whether a file-system event at ``path`` (under ``root``) may change what
    ``source`` lists: a file its globs select, or a folder (or a path gone that may
    have been one); never anything in an ignored folder (``.obsidian``, ``.git``)."""
    try:
        rel = Path(path).relative_to(root).as_posix()
    except ValueError:
        return False
    if rel == ".":
        return True
    walker = _Walker(source, root)
    *folders, name = rel.split("/")
    if any(part in walker.ignored for part in folders) or name in walker.ignored:
        return False
    if walker._selected(rel):
        return True
    if os.path.isdir(path):
        return walker._folder_selected(rel)
    # A folder moved away or deleted is reported under its own name only.
    return not os.path.exists(path) and "." not in name


class _Walker:
    def __init__(self, source: FileSourceConfig, root: Path):
        self.source = source
        self.root = root
        self.ignored = set(source.ignore_dirs)
        self.extra = source.extra_suffixes()
        self.reported: set[str] = set()  # folders with a bad name, reported once
        self.visited: dict[tuple[int, int], str] = {}  # folders by identity (bind mounts)
        # Compiled once: matching a precompiled pattern is ~7x cheaper per file.
        self.include = glob.compile(source.include, flags=_FLAGS)
        self.exclude = glob.compile(source.exclude, flags=_FLAGS) if source.exclude else None

    def walk(self, start: str = "") -> Iterator[FileStat]:
        """The listing of the root, or of its folder ``start`` (ending with ``/``)."""
        stack: list[tuple[str, str]] = [
            (start, str(self.root / start) if start else str(self.root))
        ]
        while stack:
            rel_dir, real_dir = stack.pop()
            try:
                info = os.stat(real_dir)
                with os.scandir(real_dir) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                if not rel_dir:
                    raise _unavailable(self.source, exc) from None
                yield self._folder_unavailable(rel_dir, exc)
                continue
            first = self.visited.setdefault((info.st_dev, info.st_ino), rel_dir)
            if first != rel_dir:
                yield self._problem(
                    rel_dir, f"the same folder as {first or '.'!r} (a bind mount); not listed twice"
                )
                continue
            folders: list[tuple[str, str]] = []
            for entry in entries:
                found, folder = self._entry(entry, rel_dir + entry.name)
                if folder is not None:
                    folders.append(folder)
                elif found is not None:
                    yield found
            stack.extend(reversed(folders))

    def folders_on_the_way(self, parts: list[str]) -> bool | None:
        """Whether the walk reaches into the folder ``parts`` (relative to the root):
        False when one of them is ignored or gone, None when one is a link (never
        followed: only a whole listing says what it holds) or cannot be listed."""
        here = self.root
        for name in parts:
            if name in self.ignored:
                return False
            here = here / name
            try:
                st = os.lstat(here)
            except (FileNotFoundError, NotADirectoryError):
                return False
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode) or not os.access(here, os.R_OK | os.X_OK):
                return None
            if not stat.S_ISDIR(st.st_mode):
                return False
        return True

    def _entry(
        self, entry: os.DirEntry[str] | _PathEntry, rel: str
    ) -> tuple[FileStat | None, tuple[str, str] | None]:
        """What the listing holds for one entry: a file or problem entry, or a folder
        to walk (its relative path with ``/`` and its path), or neither."""
        try:
            if entry.is_symlink():
                found = self._link(entry, rel)
            elif entry.is_dir(follow_symlinks=False):
                if entry.name not in self.ignored:
                    return None, (rel + "/", entry.path)
                return None, None
            elif not self._selected(rel):
                return None, None
            elif entry.is_file(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                found = FileStat(rel, st.st_size, st.st_mtime_ns)
            else:
                found = self._problem(rel, "not a regular file (a pipe, socket or device)")
        except OSError as exc:
            if not self._selected(rel):
                return None, None
            found = FileStat(
                rel, None, None, f"cannot read the file ({_strerror(exc)}); check its "
                "permissions (what the index holds for it is kept)", ERROR, True,
            )  # fmt: skip
        return (self._named(found) if found is not None else None), None

    def _selected(self, rel: str) -> bool:
        """Whether the file at ``rel`` is one the source indexes (globs, attachments)."""
        if not self.include.match(rel) and not (self.extra and rel.lower().endswith(self.extra)):
            return False
        return not (self.exclude is not None and self.exclude.match(rel))

    def _selected_target(self, rel: str) -> bool:
        """Whether a file inside the root, reached through a link, is itself selected."""
        folders = PurePosixPath(rel).parts[:-1]
        return self._selected(rel) and not any(part in self.ignored for part in folders)

    def _folder_selected(self, rel: str) -> bool:
        name = PurePosixPath(rel).name
        excluded = self.exclude is not None and self.exclude.match(rel + "/")
        return name not in self.ignored and not excluded

    def _link(self, entry: os.DirEntry[str], rel: str) -> FileStat | None:
        try:
            target = os.path.realpath(entry.path, strict=True)
        except OSError as exc:
            if not self._selected(rel):
                return None
            if isinstance(exc, FileNotFoundError):
                return self._problem(rel, "a symbolic link to nothing (its target is missing)")
            if exc.errno == errno.ELOOP:
                return self._problem(rel, "a symbolic link loop; remove or fix the link")
            raise
        inside = _inside(target, self.root)
        if os.path.isdir(target):
            if not self._folder_selected(rel):
                return None
            if not inside:
                return self._problem(
                    rel + "/",
                    "a symbolic link to a folder outside the source; not followed (only what "
                    "is inside the source folder is indexed)",
                )
            where = Path(target).relative_to(self.root).as_posix()
            return self._problem(
                rel + "/",
                f"a symbolic link to the folder {where!r} of this source; folder links are "
                "not followed (each file is indexed once, under its own path)",
            )
        if not self._selected(rel):
            return None
        if not inside:
            return self._problem(
                rel,
                "a symbolic link to a file outside the source; not followed (only files "
                "inside the source folder are indexed)",
            )
        where = Path(target).relative_to(self.root).as_posix()
        if not self._selected_target(where):
            return self._problem(
                rel, f"a symbolic link to {display_path(where)!r}, which this source excludes"
            )
        st = os.stat(target)
        if not stat.S_ISREG(st.st_mode):
            return self._problem(rel, "a symbolic link to something that is not a regular file")
        return FileStat(rel, st.st_size, st.st_mtime_ns)

    def _named(self, found: FileStat) -> FileStat | None:
        """``found``, or a problem entry when its path is not valid UTF-8 text (it
        could not be stored or shown); a folder with such a name is reported once."""
        if is_valid_text(found.path):
            return found
        parts = found.path.rstrip("/").split("/")
        for depth, part in enumerate(parts[:-1], start=1):
            if not is_valid_text(part):
                folder = display_path("/".join(parts[:depth])) + "/"
                if folder in self.reported:
                    return None
                self.reported.add(folder)
                return FileStat(
                    folder, None, None,
                    "folder name is not valid UTF-8; rename it (its files are not indexed)",
                )  # fmt: skip
        return FileStat(
            display_path(found.path), None, None, "file name is not valid UTF-8; rename it"
        )

    def _problem(self, rel: str, message: str) -> FileStat:
        return FileStat(rel, None, None, message)

    def _folder_unavailable(self, rel_dir: str, exc: OSError) -> FileStat:
        return FileStat(
            display_path(rel_dir), None, None,
            f"cannot list the folder ({_strerror(exc)}); check its permissions or that its "
            "disk is mounted (what the index holds under it is kept until it can be read)",
            ERROR, True,
        )  # fmt: skip


def _inside(path: str, root: Path) -> bool:
    root_text = str(root)
    return path == root_text or path.startswith(root_text.rstrip("/") + "/")


def open_source_file(root: Path, rel: str) -> int:
    """A read-only descriptor of the file ``rel`` of the source whose real root is
    ``root``; raises ``OutsideSourceError`` for anything outside the root or not a
    regular file (and ``OSError`` when it cannot be read).

    The path is resolved and checked, then opened without following a link in its
    last part (``O_NOFOLLOW``: a file replaced by a link after the check is
    refused); on Linux the opened file's own path is checked again, which also
    catches a folder swapped for a link between the check and the open.
    """
    real = os.path.realpath(root / rel)
    if not _inside(real, root):
        raise OutsideSourceError(
            errno.EXDEV, "the file now leads outside the source (a symbolic link); not read"
        )
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutsideSourceError(
                errno.ELOOP, "the file was replaced by a symbolic link while indexing; not read"
            ) from None
        raise
    try:
        opened = _fd_path(fd)
        if opened is not None and not _inside(opened.removesuffix(" (deleted)"), root):
            raise OutsideSourceError(errno.EXDEV, "the file now leads outside the source; not read")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutsideSourceError(errno.EINVAL, "not a regular file; not read")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None  # no /proc (macOS): the realpath check and O_NOFOLLOW stand


@contextmanager
def pinned_source_file(root: Path, rel: str) -> Iterator[Path]:
    """A path that opens exactly the file ``open_source_file`` checked, for parsers
    that take a path (and may open it more than once, or hand it to a subprocess).

    On Linux it is a link to ``/proc/<pid>/fd/<n>``, named like the file (so parser
    messages name it) in a private folder of this process: whatever happens to the
    source folder meanwhile, it reaches the checked file. Elsewhere it is the checked
    real path.
    """
    fd = open_source_file(root, rel)
    try:
        pinned = Path(f"/proc/{os.getpid()}/fd/{fd}")
        if not pinned.exists():
            yield Path(os.path.realpath(root / rel))
            return
        folder = _pin_folder() / str(fd)  # an open descriptor's number is unique
        folder.mkdir(exist_ok=True)
        link = folder / (PurePosixPath(rel).name or "file")
        try:
            link.symlink_to(pinned)
        except FileExistsError:  # left by a process killed mid-parse
            link.unlink()
            link.symlink_to(pinned)
        try:
            yield link
        finally:
            link.unlink(missing_ok=True)
    finally:
        os.close(fd)


_pin_folders: dict[int, Path] = {}  # process id -> its private folder


def _pin_folder() -> Path:
    pid = os.getpid()  # a forked process makes its own
    folder = _pin_folders.get(pid)
    if folder is None or not folder.is_dir():
        # In memory where possible (/dev/shm): a link made and removed per parse
        # costs ~30 µs there, ~260 µs on a journaled disk.
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None
        _remove_stale_pin_folders(Path(shm or tempfile.gettempdir()))
        folder = Path(tempfile.mkdtemp(prefix=f"{_PIN_PREFIX}{pid}-", dir=shm))
        _pin_folders[pid] = folder
        atexit.register(_remove_pin_folder, pid, folder)
    return folder


_PIN_PREFIX = "ragline-open-"


def _remove_pin_folder(pid: int, folder: Path) -> None:
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def _remove_stale_pin_folders(parent: Path) -> None:
    """Folders of processes that ended without their exit handlers (killed)."""
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith(_PIN_PREFIX)]
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(_PIN_PREFIX) :].partition("-")[0]
        try:
            if not pid.isdigit() or entry.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


@dataclass(frozen=True)
class PendingChanges:
    """Files whose stat differs from what the index last saw."""

    new: int
    changed: int
    deleted: int

    @property
    def total(self) -> int:
        return self.new + self.changed + self.deleted


def pending_changes(
    stats: list[FileStat], indexed: dict[str, tuple[int | None, int | None]]
) -> PendingChanges:
    """Compare a fresh listing with ``indexed`` (path → (size, mtime_ns)).

    What the index holds under an unavailable folder, or for an unavailable file,
    is kept by the next run: it is not a pending deletion or change.
    """
    seen = {s.path for s in stats}
    kept = tuple(s.path for s in stats if s.unavailable and s.path.endswith("/"))
    new = sum(1 for s in stats if s.path not in indexed)
    changed = sum(
        1
        for s in stats
        if s.path in indexed and not s.unavailable and indexed[s.path] != (s.size, s.mtime_ns)
    )
    deleted = sum(1 for p in indexed if p not in seen and not (kept and p.startswith(kept)))
    return PendingChanges(new, changed, deleted)
