"""A Calibre library, read-only: ``metadata.db`` through sqlite3, and the book files.

One book is one item. Its key is the path, relative to the library, of the format
file that is read: ``<books.path>/<data.name>.<format, lowercased>``, the format
being the first of the source's ``formats`` that the book has and that ragline
reads (``READABLE_FORMATS``). Its fingerprint is ``books.last_modified``, that
file's size and mtime, and a hash of the metadata that is indexed, so a tag edit
in Calibre re-indexes the book and nothing else.

``metadata.db`` is read inside one read transaction, so all tables are read from
the same snapshot, and nothing is ever written into the library (``_snapshot``):

- in rollback-journal mode (Calibre's default) it is opened with ``mode=ro``, which
  takes sqlite's read lock and writes nothing;
- in WAL mode a read-only open would still create ``metadata.db-wal`` and ``-shm``
  beside it and leave them there. Without a write-ahead log (Calibre closed) the
  file is whole and is opened ``immutable=1`` (no lock, no file made); with one
  (Calibre open: committed edits may be only in the log) metadata.db and its log
  are copied into a private temporary folder and the copy is read. Either way the
  files are stat-ed before and after: a library that changed meanwhile is read
  again (a checkpoint rewrites metadata.db in place). The copy is kept, and reused,
  while the files are unchanged: a run reads the database once per book.

Only the base tables are queried: the ``meta`` view and the triggers call SQL
functions that only Calibre registers. A database that is locked (Calibre writing)
is waited for briefly; a missing, locked or damaged one makes the whole source
unavailable (``SourceUnavailableError``: the run fails and what the index holds is
kept). Messages name the library's files, never its path: they reach remote MCP
callers (``last_failure``, ``pending_error``).

Book files are stat-ed only here; they are read by the indexing side through the
walker's safe helpers. A file whose real path leaves the library (a symbolic link,
a ``..`` in the database) is listed as skipped and never read.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from wcmatch import glob

from rag_sources.errors import ConfigError, SourceUnavailableError
from rag_sources.listing import ListedItem

if TYPE_CHECKING:
    # the config only names a type here: the config imports this module to list items
    from rag_sources.kinds.calibre.config import CalibreSourceConfig

METADATA_DB = "metadata.db"
WAL_SUFFIX = "-wal"
# sqlite's busy timeout per attempt, and attempts, while Calibre holds a write lock.
LOCK_WAIT_SECONDS = 2.0
LOCK_ATTEMPTS = 2

# Calibre format (a lowercased file extension) -> the file type whose parser reads it
# (rag_sources.formats.router; tests check the two agree). Calibre's own formats with
# no parser here (MOBI, AZW3, RTF, HTMLZ, CBZ, FB2…) are not read: a book with only
# those is listed as skipped, saying so.
READABLE_FORMATS: dict[str, str] = {
    "epub": "epub",
    "pdf": "pdf",
    "docx": "docx",
    "pptx": "pptx",
    "html": "html",
    "htm": "html",
    "xhtml": "html",
    "txt": "txt",
    "text": "txt",
    "md": "md",
    "markdown": "md",
    "rst": "rst",
}
_UNDEFINED_YEAR = 101  # Calibre's "no date" is 0101-01-01
_GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB


@dataclass(frozen=True)
class Book:
    """One book of ``metadata.db``: what is indexed of it, as Calibre stores it."""

    id: int
    title: str
    path: str  # books.path: the book's folder, relative to the library
    last_modified: str  # as stored (it is part of the fingerprint)
    uuid: str | None = None
    authors: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    series: str | None = None
    series_index: float | None = None
    publisher: str | None = None
    rating: float | None = None  # 0-5 stars (Calibre stores 0-10)
    comments: str | None = None  # HTML, as Calibre stores it
    identifiers: dict[str, str] = field(default_factory=dict)
    languages: tuple[str, ...] = ()
    pubdate: datetime | None = None
    formats: tuple[tuple[str, str], ...] = ()  # (format lowercased, data.name), as added

    @property
    def modified(self) -> datetime | None:
        """``last_modified`` as a datetime (None when Calibre's value is unreadable)."""
        return _timestamp(self.last_modified)

    def file_key(self, fmt: str) -> str:
        """The key (path relative to the library) of the book's ``fmt`` file."""
        name = dict(self.formats)[fmt]
        folder = self.path.strip("/")
        return f"{folder}/{name}.{fmt}" if folder else f"{name}.{fmt}"

    def format_of(self, key: str) -> str | None:
        """Which of the book's formats ``key`` is the file of (None: none)."""
        return next((fmt for fmt, _ in self.formats if self.file_key(fmt) == key), None)

    def choose_format(self, preferred: list[str]) -> str | None:
        """The first format of ``preferred`` that the book has and ragline reads."""
        have = dict(self.formats)
        return next((f for f in preferred if f in have and f in READABLE_FORMATS), None)

    def fields(self) -> dict[str, Any]:
        """The book's metadata as indexed (JSON-safe; comments still HTML)."""
        return {
            "calibre_id": self.id,
            "title": self.title,
            "authors": list(self.authors),
            "series": self.series,
            "series_index": self.series_index if self.series else None,
            "tags": list(self.tags),
            "publisher": self.publisher,
            "rating": self.rating,
            "comments": self.comments,
            "identifiers": dict(self.identifiers),
            "languages": list(self.languages),
            "pubdate": self.pubdate.date().isoformat() if self.pubdate else None,
            "uuid": self.uuid,
            "formats": [fmt for fmt, _ in self.formats],
        }

    def metadata_hash(self) -> str:
        """A short hash of ``fields()``: part of the fingerprint and the content hash."""
        raw = json.dumps(self.fields(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


def database_path(config: CalibreSourceConfig) -> Path:
    return Path(config.path) / METADATA_DB


def library_root(config: CalibreSourceConfig) -> Path:
    """The real (symlink-free) path of the library folder; ``SourceUnavailableError``
    when it cannot be reached (an unplugged disk), a ``ConfigError`` for a file."""
    try:
        real = Path(os.path.realpath(config.path, strict=True))
    except OSError as exc:
        reason = (
            "does not exist"
            if isinstance(exc, FileNotFoundError)
            else f"cannot be read ({(exc.strerror or str(exc)).lower()})"
        )
        raise SourceUnavailableError(
            f"source {config.name!r}: the library folder {reason}; reconnect the disk or fix "
            "`path` in the config (what the index holds for the source is kept)"
        ) from None
    if not real.is_dir():
        raise ConfigError(
            f"source {config.name!r}: `path` is a file, not a Calibre library folder; fix it"
        )
    return real


def read_books(config: CalibreSourceConfig) -> list[Book]:
    """Every book of the library, by id (raises ``SourceUnavailableError``)."""
    return _read(config, None)


def read_book(config: CalibreSourceConfig, book_id: int) -> Book | None:
    """One book's metadata (None when the library no longer has it)."""
    found = _read(config, book_id)
    return found[0] if found else None


def find_book(config: CalibreSourceConfig, key: str) -> Book | None:
    """The book one of whose format files is ``key`` (None: no such book now)."""
    folder = str(PurePosixPath(key).parent)
    folder = "" if folder == "." else folder
    ids = _run(config, lambda db: [r[0] for r in db.execute(_BOOK_BY_PATH, (folder, folder + "/"))])
    for book_id in ids:
        book = read_book(config, book_id)
        if book is not None and book.format_of(key) is not None:
            return book
    return None


def list_books(config: CalibreSourceConfig) -> Iterator[ListedItem]:
    """Every book of the library as one item, by key (see the module docstring);
    books that cannot be indexed are listed with their problem."""
    resolver = _Resolver(library_root(config))
    items: dict[str, ListedItem] = {}
    for book in read_books(config):
        item = _book_item(config, resolver, book)
        if item is not None and _selected(config, item.key):
            items.setdefault(item.key, item)
    for key in sorted(items):
        yield items[key]


def change_signal(config: CalibreSourceConfig) -> str:
    """metadata.db's (and its write-ahead log's) size and mtime: Calibre writes the
    database on every change it makes. A book file replaced behind Calibre's back is
    seen by the next full listing (a run), not by this signal."""
    parts = []
    for name in (METADATA_DB, METADATA_DB + WAL_SUFFIX):
        try:
            info = os.stat(Path(config.path) / name)
            parts.append(f"{info.st_size}:{info.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


# ---------------------------------------------------------------------------
# listing


def _book_item(config: CalibreSourceConfig, resolver: _Resolver, book: Book) -> ListedItem | None:
    if not book.formats:
        folder = book.path.strip("/") or f"book {book.id}"
        return ListedItem(
            folder, "skipped:no formats", problem=f"{_name(book)} has no book file in Calibre "
            "(no formats); add an EPUB or PDF to it to index it",
        )  # fmt: skip
    fmt = book.choose_format(config.formats)
    if fmt is None:
        have = ", ".join(f.upper() for f, _ in book.formats)
        key = book.file_key(book.formats[0][0])
        readable = ", ".join(f for f, t in READABLE_FORMATS.items() if f == t)
        problem = (
            f"{_name(book)}: none of its formats ({have}) is read by this source "
            f"(`formats`: {', '.join(config.formats)}); convert it to EPUB in Calibre "
            f"(Convert books), or list in `formats` one it has that ragline reads ({readable})"
        )
        return ListedItem(key, f"skipped:{have}", problem=problem)
    key = book.file_key(fmt)
    try:
        real = resolver.real(key)
        if not _inside(real, resolver.root):
            return ListedItem(
                key, "skipped:outside", problem="the book file leads outside the library "
                "(a symbolic link or a '..' path in metadata.db); not read",
            )  # fmt: skip
        info = os.stat(real)
    except FileNotFoundError:
        others = [f.upper() for f, _ in book.formats if f != fmt]
        also = f" (it also has {', '.join(others)})" if others else ""
        return ListedItem(
            key, "error:missing", problem=f"{_name(book)}: its {fmt.upper()} file is missing "
            f"from the library folder{also}; run Calibre's Check library, or remove the "
            "format from the book", severity="error",
        )  # fmt: skip
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return ListedItem(
            key, "error:unreadable", problem=f"cannot read the book file ({reason.lower()}); "
            "check its permissions (what the index holds for it is kept)", severity="error",
            unavailable=True,
        )  # fmt: skip
    if not stat.S_ISREG(info.st_mode):
        return ListedItem(key, "skipped:not a file", problem="not a regular file; not read")
    fingerprint = f"{book.last_modified}|{info.st_size}:{info.st_mtime_ns}|{book.metadata_hash()}"
    return ListedItem(key, fingerprint, info.st_size, info.st_mtime_ns)


def _name(book: Book) -> str:
    return f"book {book.id} ({book.title!r})"


def _selected(config: CalibreSourceConfig, key: str) -> bool:
    if not config.exclude and config.include == ["**/*"]:
        return True  # the default: every book (and no glob matching per book)
    if not glob.globmatch(key, config.include, flags=_GLOB_FLAGS):
        return False
    return not (config.exclude and glob.globmatch(key, config.exclude, flags=_GLOB_FLAGS))


class _Resolver:
    """Real paths of book files, each folder resolved once: a library has a folder
    per author and per book, and ``os.path.realpath`` would check every part of
    every path (half the time of listing a 10,000-book library)."""

    def __init__(self, root: Path):
        self.root = root
        self._folders: dict[str, str] = {"": str(root)}

    def real(self, key: str) -> str:
        parts = key.split("/")
        if any(part in ("", ".", "..") for part in parts):
            return os.path.realpath(os.path.join(self.root, key))
        folder = self._folder("/".join(parts[:-1]))
        return self._resolve(os.path.join(folder, parts[-1]))

    def _folder(self, rel: str) -> str:
        found = self._folders.get(rel)
        if found is None:
            parent, _, name = rel.rpartition("/")
            found = self._folders[rel] = self._resolve(os.path.join(self._folder(parent), name))
        return found

    @staticmethod
    def _resolve(path: str) -> str:
        """``path``'s real path, given that its folder's path is real."""
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except (OSError, ValueError):
            return path  # missing: stat-ing it says so
        return os.path.realpath(path) if is_link else path


def _inside(path: str, root: Path) -> bool:
    root_text = str(root)
    return path == root_text or path.startswith(root_text.rstrip(os.sep) + os.sep)


# ---------------------------------------------------------------------------
# metadata.db

_BOOK_BY_PATH = "SELECT id FROM books WHERE path = ? OR path = ? ORDER BY id"
_BOOKS = "SELECT id, title, path, last_modified, uuid, series_index, pubdate FROM books"
# (table, query): one row per (book, value), in Calibre's order for that field.
_LINKED: dict[str, str] = {
    "authors": "SELECT l.book, a.name FROM books_authors_link l "
    "JOIN authors a ON a.id = l.author{where} ORDER BY l.id",
    "tags": "SELECT l.book, t.name FROM books_tags_link l "
    "JOIN tags t ON t.id = l.tag{where} ORDER BY t.name COLLATE NOCASE",
    "series": "SELECT l.book, s.name FROM books_series_link l "
    "JOIN series s ON s.id = l.series{where} ORDER BY l.id",
    "publisher": "SELECT l.book, p.name FROM books_publishers_link l "
    "JOIN publishers p ON p.id = l.publisher{where} ORDER BY l.id",
    "rating": "SELECT l.book, r.rating FROM books_ratings_link l "
    "JOIN ratings r ON r.id = l.rating{where} ORDER BY l.id",
    "comments": "SELECT l.book, l.text FROM comments l{where} ORDER BY l.id",
    "identifiers": "SELECT l.book, l.type || ':' || l.val FROM identifiers l{where} "
    "ORDER BY l.type",
    "languages": "SELECT l.book, g.lang_code FROM books_languages_link l "
    "JOIN languages g ON g.id = l.lang_code{where} ORDER BY l.item_order, l.id",
    "formats": "SELECT l.book, lower(l.format) || ':' || l.name FROM data l{where} ORDER BY l.id",
}
_REQUIRED = ("books", "formats")  # without these it is no Calibre library


def _read(config: CalibreSourceConfig, book_id: int | None) -> list[Book]:
    return _run(config, lambda db: _books(db, book_id))


def _books(db: sqlite3.Connection, book_id: int | None) -> list[Book]:
    where, args = ("", ()) if book_id is None else (" WHERE l.book = ?", (book_id,))
    linked: dict[str, dict[int, list[Any]]] = {}
    for name, query in _LINKED.items():
        values: dict[int, list[Any]] = {}
        try:
            rows = db.execute(query.format(where=where), args).fetchall()
        except sqlite3.OperationalError as exc:
            if name in _REQUIRED or "no such table" not in str(exc):
                raise
            rows = []  # an optional table an old library lacks
        for book, value in rows:
            if value is not None:
                values.setdefault(book, []).append(value)
        linked[name] = values
    books_query = _BOOKS + ("" if book_id is None else " WHERE id = ?") + " ORDER BY id"
    found = []
    for row in db.execute(books_query, args).fetchall():
        found.append(_book(row, {name: values.get(row[0], []) for name, values in linked.items()}))
    return found


def _book(row: tuple[Any, ...], linked: dict[str, list[Any]]) -> Book:
    book_id, title, path, last_modified, uuid, series_index, pubdate = row
    rating = next((int(r) for r in linked["rating"] if r), None)
    series = _text(next(iter(linked["series"]), None))
    identifiers: dict[str, str] = {}
    for value in linked["identifiers"]:
        kind, _, val = str(value).partition(":")
        identifiers[kind] = val
    formats: dict[str, str] = {}
    for value in linked["formats"]:
        fmt, _, name = str(value).partition(":")
        formats.setdefault(fmt, name)
    comments = next(iter(linked["comments"]), None)
    return Book(
        id=int(book_id),
        title=_text(title) or "Unknown",
        path=str(path or ""),
        last_modified=str(last_modified or ""),
        uuid=str(uuid) if uuid else None,
        authors=tuple(dict.fromkeys(t for t in map(_text, linked["authors"]) if t)),
        tags=tuple(dict.fromkeys(t for t in map(_text, linked["tags"]) if t)),
        series=series,
        series_index=float(series_index) if series and series_index is not None else None,
        publisher=_text(next(iter(linked["publisher"]), None)),
        rating=None if not rating else (rating // 2 if rating % 2 == 0 else rating / 2),
        comments=str(comments) if comments and str(comments).strip() else None,
        identifiers=identifiers,
        languages=tuple(str(v) for v in linked["languages"]),
        pubdate=_date(pubdate),
        formats=tuple(formats.items()),
    )


def _text(value: Any) -> str | None:
    text = " ".join(str(value).split()) if value is not None else ""
    return text or None


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).strip())
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _date(value: Any) -> datetime | None:
    parsed = _timestamp(value)
    return None if parsed is None or parsed.year <= _UNDEFINED_YEAR else parsed


def _run(config: CalibreSourceConfig, read: Any) -> Any:
    """``read(connection)`` inside one read-only transaction on metadata.db (see the
    module docstring: nothing is written into the library), waiting briefly while it is
    locked; every failure is a one-line ``SourceUnavailableError``."""
    db_path = database_path(config)
    try:
        real = Path(os.path.realpath(db_path, strict=True))
        if not real.is_file():
            raise IsADirectoryError(21, "not a file")
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            library_root(config)  # a library folder that is gone says so itself
            what = f"the library folder has no {METADATA_DB}"
        else:
            what = f"{METADATA_DB} cannot be read ({(exc.strerror or str(exc)).lower()})"
        raise SourceUnavailableError(
            f"source {config.name!r}: {what}; point `path` at the Calibre library folder "
            "(the one holding metadata.db)"
        ) from None
    for attempt in range(LOCK_ATTEMPTS):
        last = attempt + 1 == LOCK_ATTEMPTS
        try:
            with _snapshot(real) as uri:
                db = sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_SECONDS)
                try:
                    db.execute("BEGIN")  # one snapshot for every table
                    return read(db)
                finally:
                    db.close()
        except _Changed:
            if not last:
                continue
            raise SourceUnavailableError(
                f"source {config.name!r}: {METADATA_DB} changed while it was read (Calibre "
                "writing to it); it is read on the next run, and what the index holds for "
                "the source is kept"
            ) from None
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if "locked" in message or "busy" in message:
                if not last:
                    time.sleep(0.2)
                    continue
                raise SourceUnavailableError(
                    f"source {config.name!r}: {METADATA_DB} is locked by another program "
                    f"(Calibre writing to it: {message}); it is read on the next run, and what "
                    "the index holds for the source is kept"
                ) from None
            raise _damaged(config, exc) from None
        except sqlite3.DatabaseError as exc:
            raise _damaged(config, exc) from None
        except OSError as exc:  # copying the database and its log
            what = f"{METADATA_DB} cannot be copied to be read ({exc.strerror or exc})"
            raise SourceUnavailableError(f"source {config.name!r}: {what}") from None
    raise AssertionError("unreachable")


def _damaged(config: CalibreSourceConfig, exc: Exception) -> SourceUnavailableError:
    reason = " ".join(str(exc).split())
    return SourceUnavailableError(
        f"source {config.name!r}: {METADATA_DB} cannot be read as a Calibre library "
        f"({reason}); open the library in Calibre (Library maintenance → Check library) or "
        "restore metadata.db from a backup (what the index holds for the source is kept)"
    )


class _Changed(Exception):
    """metadata.db (or its log) changed while it was read or copied."""


def _uri(path: Path, mode: str) -> str:
    return "file:" + quote(str(path)) + "?" + mode


def _wal_mode(database: Path) -> bool:
    """Whether the file header says the database is in WAL mode (bytes 18-19: 2, 2)."""
    with open(database, "rb") as handle:
        header = handle.read(20)
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino


@contextmanager
def _snapshot(database: Path) -> Iterator[str]:
    """The URI of a read of ``database`` that writes nothing beside it (module
    docstring); raises ``_Changed`` when the library changed while it was read."""
    if not _wal_mode(database):
        yield _uri(database, "mode=ro")
        return
    wal = database.with_name(database.name + WAL_SUFFIX)
    before = (_stat(database), _stat(wal))
    if before[1] is None or before[1][0] == 0:  # no log: metadata.db holds everything
        yield _uri(database, "immutable=1")
        if (_stat(database), _stat(wal)) != before:
            raise _Changed
        return
    with _copies_lock:  # a copy is replaced only when no thread is reading it
        yield _uri(_copy(database, wal, before), "mode=ro")


# metadata.db → (the stats it was copied at, the folder holding the copy)
_copies: dict[str, tuple[object, str]] = {}
_copies_lock = threading.Lock()


def _copy(database: Path, wal: Path, stats: object) -> Path:
    """A private copy of metadata.db and its log (made again once they change)."""
    key = str(database)
    kept = _copies.get(key)
    if kept is not None and kept[0] == stats and os.path.isdir(kept[1]):
        return Path(kept[1]) / METADATA_DB
    if kept is not None:
        shutil.rmtree(kept[1], ignore_errors=True)
        del _copies[key]
    folder = tempfile.mkdtemp(prefix="ragline-calibre-")
    try:
        shutil.copyfile(database, os.path.join(folder, METADATA_DB))
        shutil.copyfile(wal, os.path.join(folder, METADATA_DB + WAL_SUFFIX))
        if (_stat(database), _stat(wal)) != stats:
            raise _Changed
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _copies[key] = (stats, folder)
    return Path(folder) / METADATA_DB


@atexit.register
def _remove_copies() -> None:
    for _, folder in _copies.values():
        shutil.rmtree(folder, ignore_errors=True)
    _copies.clear()
