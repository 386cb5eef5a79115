"""Calibre libraries for tests, made two ways:

- ``CalibredbLibrary``: with Calibre's own ``calibredb`` (Debian's ``calibre``
  package, installed by ``scripts/setup.sh --dev``): exactly what a user's library
  holds. About 0.3-1 s a command, no display needed.
- ``SqliteLibrary``: where ``calibredb`` is missing, ``metadata.db`` written here with
  the base tables of Calibre's schema (``/usr/share/calibre/metadata_sqlite.sql``:
  the columns the kind reads, without the triggers and views that need Calibre's
  SQL functions), and the book files laid out as Calibre lays them out
  (``<Author>/<Title> (<id>)/<Title> - <Author>.<ext>``).

``make_library`` picks ``calibredb`` when it is on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

CALIBREDB = shutil.which("calibredb")


@dataclass(frozen=True)
class BookSpec:
    """A book to add: its file (None: a book with no format) and its metadata."""

    file: Path | None
    title: str
    authors: tuple[str, ...]
    tags: tuple[str, ...] = ()
    series: str | None = None
    series_index: float | None = None
    publisher: str | None = None
    rating: int | None = None  # stars, 1-5
    comments: str | None = None  # HTML
    identifiers: dict[str, str] = field(default_factory=dict)
    pubdate: str | None = None  # YYYY-MM-DD


class CalibreLibrary:
    """What a test does to a library; ``builder`` names how it is made."""

    builder: str
    root: Path

    def add(self, spec: BookSpec) -> int:
        raise NotImplementedError

    def add_format(self, book_id: int, file: Path) -> None:
        raise NotImplementedError

    def set_tags(self, book_id: int, tags: tuple[str, ...]) -> None:
        raise NotImplementedError

    def remove(self, book_id: int) -> None:
        raise NotImplementedError

    def book_folder(self, book_id: int) -> Path:
        with sqlite3.connect(f"file:{self.root / 'metadata.db'}?mode=ro", uri=True) as db:
            (path,) = db.execute("SELECT path FROM books WHERE id = ?", (book_id,)).fetchone()
        return self.root / path


class CalibredbLibrary(CalibreLibrary):
    builder = "calibredb"

    def __init__(self, root: Path, home: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        home.mkdir(parents=True, exist_ok=True)
        # calibredb keeps settings under HOME; it needs no display (Qt offscreen).
        self.env = {
            **os.environ,
            "HOME": str(home),
            "CALIBRE_CONFIG_DIRECTORY": str(home / "calibre-config"),
            "QT_QPA_PLATFORM": "offscreen",
        }

    def _run(self, *args: str) -> str:
        assert CALIBREDB is not None
        done = subprocess.run(
            [CALIBREDB, "--with-library", str(self.root), *args],
            env=self.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def add(self, spec: BookSpec) -> int:
        args = ["add", "--duplicates", "--title", spec.title, "--authors", " & ".join(spec.authors)]
        if spec.tags:
            args += ["--tags", ",".join(spec.tags)]
        if spec.series:
            args += ["--series", spec.series]
        if spec.series_index is not None:
            args += ["--series-index", str(spec.series_index)]
        for kind, value in spec.identifiers.items():
            args += ["--identifier", f"{kind}:{value}"]
        args += [str(spec.file)] if spec.file is not None else ["--empty"]
        out = self._run(*args)
        found = re.search(r"Added book ids: (\d+)", out)
        assert found, out
        book_id = int(found.group(1))
        fields = []
        if spec.publisher:
            fields.append(f"publisher:{spec.publisher}")
        if spec.rating:
            fields.append(f"rating:{spec.rating}")
        if spec.comments:
            fields.append(f"comments:{spec.comments}")
        if spec.pubdate:
            fields.append(f"pubdate:{spec.pubdate}")
        if fields:
            self._run("set_metadata", str(book_id), *(a for f in fields for a in ("--field", f)))
        return book_id

    def add_format(self, book_id: int, file: Path) -> None:
        self._run("add_format", str(book_id), str(file))

    def set_tags(self, book_id: int, tags: tuple[str, ...]) -> None:
        self._run("set_metadata", str(book_id), "--field", f"tags:{','.join(tags)}")

    def remove(self, book_id: int) -> None:
        self._run("remove", "--permanent", str(book_id))


# The base tables of Calibre's schema (metadata_sqlite.sql), as Calibre declares them.
SCHEMA = """
CREATE TABLE authors ( id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE,
    sort TEXT COLLATE NOCASE, link TEXT NOT NULL DEFAULT "", UNIQUE(name));
CREATE TABLE books ( id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL DEFAULT 'Unknown' COLLATE NOCASE, sort TEXT COLLATE NOCASE,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, pubdate TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    series_index REAL NOT NULL DEFAULT 1.0, author_sort TEXT COLLATE NOCASE,
    isbn TEXT DEFAULT "" COLLATE NOCASE, lccn TEXT DEFAULT "" COLLATE NOCASE,
    path TEXT NOT NULL DEFAULT "", flags INTEGER NOT NULL DEFAULT 1, uuid TEXT,
    has_cover BOOL DEFAULT 0,
    last_modified TIMESTAMP NOT NULL DEFAULT "2000-01-01 00:00:00+00:00");
CREATE TABLE books_authors_link ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    author INTEGER NOT NULL, UNIQUE(book, author));
CREATE TABLE books_languages_link ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    lang_code INTEGER NOT NULL, item_order INTEGER NOT NULL DEFAULT 0, UNIQUE(book, lang_code));
CREATE TABLE books_publishers_link ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    publisher INTEGER NOT NULL, UNIQUE(book));
CREATE TABLE books_ratings_link ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    rating INTEGER NOT NULL, UNIQUE(book, rating));
CREATE TABLE books_series_link ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    series INTEGER NOT NULL, UNIQUE(book));
CREATE TABLE books_tags_link ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    tag INTEGER NOT NULL, UNIQUE(book, tag));
CREATE TABLE comments ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    text TEXT NOT NULL COLLATE NOCASE, UNIQUE(book));
CREATE TABLE data ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    format TEXT NOT NULL COLLATE NOCASE, uncompressed_size INTEGER NOT NULL,
    name TEXT NOT NULL, UNIQUE(book, format));
CREATE TABLE identifiers ( id INTEGER PRIMARY KEY, book INTEGER NOT NULL,
    type TEXT NOT NULL DEFAULT "isbn" COLLATE NOCASE, val TEXT NOT NULL COLLATE NOCASE,
    UNIQUE(book, type));
CREATE TABLE languages ( id INTEGER PRIMARY KEY, lang_code TEXT NOT NULL COLLATE NOCASE,
    UNIQUE(lang_code));
CREATE TABLE publishers ( id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE,
    sort TEXT COLLATE NOCASE, UNIQUE(name));
CREATE TABLE ratings ( id INTEGER PRIMARY KEY,
    rating INTEGER CHECK(rating > -1 AND rating < 11), UNIQUE (rating));
CREATE TABLE series ( id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE,
    sort TEXT COLLATE NOCASE, UNIQUE (name));
CREATE TABLE tags ( id INTEGER PRIMARY KEY, name TEXT NOT NULL COLLATE NOCASE, UNIQUE (name));
"""

_UNSAFE = re.compile(r'[\\/:*?"<>|]')


def _now() -> str:
    return datetime.now(UTC).isoformat(sep=" ")


class SqliteLibrary(CalibreLibrary):
    builder = "sqlite"

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.executescript(SCHEMA)

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.root / "metadata.db")

    @staticmethod
    def _named(db: sqlite3.Connection, table: str, column: str, value: object) -> int:
        db.execute(f"INSERT OR IGNORE INTO {table} ({column}) VALUES (?)", (value,))
        (found,) = db.execute(f"SELECT id FROM {table} WHERE {column} = ?", (value,)).fetchone()
        return int(found)

    def add(self, spec: BookSpec) -> int:
        with self._db() as db:
            cursor = db.execute(
                "INSERT INTO books (title, sort, pubdate, series_index, author_sort, uuid, "
                "last_modified) VALUES (?, ?, ?, ?, ?, lower(hex(randomblob(16))), ?)",
                (
                    spec.title, spec.title, f"{spec.pubdate or '0101-01-01'} 00:00:00+00:00",
                    spec.series_index or 1.0, spec.authors[0], _now(),
                ),
            )  # fmt: skip
            book_id = int(cursor.lastrowid or 0)
            author = _UNSAFE.sub("_", spec.authors[0])
            path = f"{author}/{_UNSAFE.sub('_', spec.title)} ({book_id})"
            db.execute("UPDATE books SET path = ? WHERE id = ?", (path, book_id))
            for name in spec.authors:
                author_id = self._named(db, "authors", "name", name)
                db.execute(
                    "INSERT INTO books_authors_link (book, author) VALUES (?, ?)",
                    (book_id, author_id),
                )
            for tag in spec.tags:
                db.execute(
                    "INSERT INTO books_tags_link (book, tag) VALUES (?, ?)",
                    (book_id, self._named(db, "tags", "name", tag)),
                )
            for table, link, column, value in (
                ("series", "books_series_link", "series", spec.series),
                ("publishers", "books_publishers_link", "publisher", spec.publisher),
            ):
                if value:
                    db.execute(
                        f"INSERT INTO {link} (book, {column}) VALUES (?, ?)",
                        (book_id, self._named(db, table, "name", value)),
                    )
            if spec.rating:
                rating_id = self._named(db, "ratings", "rating", spec.rating * 2)
                db.execute(
                    "INSERT INTO books_ratings_link (book, rating) VALUES (?, ?)",
                    (book_id, rating_id),
                )
            if spec.comments:
                db.execute(
                    "INSERT INTO comments (book, text) VALUES (?, ?)", (book_id, spec.comments)
                )
            for kind, value in spec.identifiers.items():
                db.execute(
                    "INSERT INTO identifiers (book, type, val) VALUES (?, ?, ?)",
                    (book_id, kind, value),
                )
        (self.root / path).mkdir(parents=True, exist_ok=True)
        if spec.file is not None:
            self.add_format(book_id, spec.file)
        return book_id

    def add_format(self, book_id: int, file: Path) -> None:
        folder = self.book_folder(book_id)
        with self._db() as db:
            title, author = db.execute(
                "SELECT title, author_sort FROM books WHERE id = ?", (book_id,)
            ).fetchone()
            name = _UNSAFE.sub("_", f"{title} - {author}")
            fmt = file.suffix.lstrip(".").upper()
            shutil.copyfile(file, folder / f"{name}.{fmt.lower()}")
            db.execute(
                "INSERT INTO data (book, format, uncompressed_size, name) VALUES (?, ?, ?, ?)",
                (book_id, fmt, file.stat().st_size, name),
            )
            db.execute("UPDATE books SET last_modified = ? WHERE id = ?", (_now(), book_id))

    def set_tags(self, book_id: int, tags: tuple[str, ...]) -> None:
        with self._db() as db:
            db.execute("DELETE FROM books_tags_link WHERE book = ?", (book_id,))
            for tag in tags:
                db.execute(
                    "INSERT INTO books_tags_link (book, tag) VALUES (?, ?)",
                    (book_id, self._named(db, "tags", "name", tag)),
                )
            db.execute("UPDATE books SET last_modified = ? WHERE id = ?", (_now(), book_id))

    def remove(self, book_id: int) -> None:
        folder = self.book_folder(book_id)
        with self._db() as db:
            for table in (
                "books_authors_link", "books_tags_link", "books_series_link",
                "books_publishers_link", "books_ratings_link", "books_languages_link",
                "comments", "identifiers", "data",
            ):  # fmt: skip
                db.execute(f"DELETE FROM {table} WHERE book = ?", (book_id,))
            db.execute("DELETE FROM books WHERE id = ?", (book_id,))
        shutil.rmtree(folder)


def make_library(root: Path, use_calibredb: bool | None = None) -> CalibreLibrary:
    """A new, empty library at ``root``: made by calibredb when it is installed (or
    when ``use_calibredb`` says so), else by writing metadata.db here."""
    if use_calibredb is None:
        use_calibredb = CALIBREDB is not None
    if use_calibredb:
        return CalibredbLibrary(root, root.parent / f"{root.name}-calibre-home")
    return SqliteLibrary(root)


def library_digest(root: Path) -> dict[str, str]:
    """Every file of a library (relative path → SHA-256): to prove nothing changed it."""
    import hashlib

    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
