"""Hostile inputs for the pipeline (issue 26 items 9, 10, 14 and 17) for
``benchmarks/hostile_inputs.py``, at the issue's sizes.

- a git repository with a committed ``node_modules/`` of 100,000 files (each one a
  skipped item: the parse step logged one Dagster event per file, > 8.5 min);
- a 5 MB one-line note starting with ``# `` (its heading was copied into each of its
  thousands of chunks: 5.5 GB, still chunking after 9 min);
- Calibre libraries in WAL mode, without and with a write-ahead log (a read-only
  open left ``metadata.db-wal``/``-shm`` in the library; nothing may be written);
- a git repository with damaged loose objects (a truncated one made libgit2 loop
  forever; a damaged one was an "unexpected parser error").

Repositories are built with the ``git`` program (its global configuration off), the
100,000 files with one ``git fast-import``; libraries with Calibre's ``calibredb``
where it is installed (``tests/calibre_library.py``), from the EPUBs of
../shared/data/corpora/epub.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from benchmarks.hostile import HostileCase, HttpFixture

REPO = Path(__file__).resolve().parents[2]
EPUB = REPO.parent / "shared" / "data" / "corpora" / "epub"
NODE_MODULES_FILES = 100_000
HEADING_BYTES = 5 * 2**20
_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Ann Example",
    "GIT_AUTHOR_EMAIL": "ann@example.org",
    "GIT_COMMITTER_NAME": "Ann Example",
    "GIT_COMMITTER_EMAIL": "ann@example.org",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}
GOOD_FILES = {
    "app.py": "def greet(name):\n    return f'hello {name}'\n",
    "README.md": "# Greeter\n\nSays hello to whoever asks, politely and at once.\n",
}


def git(path: Path, *args: str, data: bytes | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | _GIT_ENV
    done = subprocess.run(
        ["git", *args], cwd=path, env=env, input=data, capture_output=True, check=True
    )
    return done.stdout.decode()


def git_source(repo: Path, **settings: Any) -> dict[str, Any]:
    return {"kind": "git", "path": str(repo), "history_months": 0, **settings}


def _blob(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


# ---- item 9: one Dagster event per skipped file --------------------------------------


def node_modules(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """One commit of 100,000 files under ``node_modules/`` (skipped as vendored code)
    and the two good files, written by one ``git fast-import``."""
    repo = folder / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    stream = [
        b"commit refs/heads/main\n",
        b"committer Ann Example <ann@example.org> 1704067200 +0000\n",
        _blob("Add the app, with its dependencies committed"),
    ]
    for path, text in GOOD_FILES.items():
        stream += [f"M 100644 inline {path}\n".encode(), _blob(text)]
    for i in range(NODE_MODULES_FILES):
        package = f"node_modules/pkg-{i // 100}/lib/file{i}.js"
        stream += [f"M 100644 inline {package}\n".encode(), _blob(f"module.exports = {i};\n")]
    stream.append(b"\n")
    git(repo, "fast-import", "--quiet", data=b"".join(stream))
    return git_source(repo)


# ---- item 10: a huge heading line ----------------------------------------------------


def huge_heading(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A 5 MB note that is one line starting with ``# ``, beside a good note."""
    notes = folder / "notes"
    notes.mkdir()
    words = " ".join(f"glacier{i}" for i in range(HEADING_BYTES // 12))
    (notes / "huge.md").write_text("# " + words[: HEADING_BYTES - 3] + "\n", encoding="utf-8")
    (notes / "good.md").write_text(
        "# Sourdough\n\nA sourdough starter needs flour, water and a warm kitchen.\n",
        encoding="utf-8",
    )
    return {"kind": "markdown", "path": str(notes)}


def long_line(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """The twin of ``huge_heading``: the same 5 MB line without ``# ``."""
    notes = folder / "notes"
    notes.mkdir()
    words = " ".join(f"glacier{i}" for i in range(HEADING_BYTES // 12))
    (notes / "huge.md").write_text(words[: HEADING_BYTES - 3] + "\n", encoding="utf-8")
    (notes / "good.md").write_text(
        "# Sourdough\n\nA sourdough starter needs flour, water and a warm kitchen.\n",
        encoding="utf-8",
    )
    return {"kind": "markdown", "path": str(notes)}


# ---- item 14: Calibre in WAL mode -------------------------------------------------------


def _wal_library(root: Path) -> Path:
    """A library of two books (calibredb where installed), switched to WAL mode."""
    from tests.calibre_library import BookSpec, make_library

    library = make_library(root)
    library.add(BookSpec(EPUB / "wasteland.epub", "The Waste Land", ("T. S. Eliot",)))
    library.add(BookSpec(EPUB / "trees.epub", "Trees", ("Joyce Kilmer",), tags=("Nature",)))
    db = sqlite3.connect(root / "metadata.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.close()  # the last connection: the log is checkpointed and removed
    return root


def calibre_wal(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A WAL-mode library as Calibre leaves it once closed (no log beside it)."""
    return {"kind": "calibre", "path": str(_wal_library(folder / "Calibre Library"))}


def calibre_wal_live(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A WAL-mode library as Calibre leaves it open (or killed): an edit committed only
    to ``metadata.db-wal`` (a copy of the library taken while it was open)."""
    staging = _wal_library(folder / "staging")
    calibre = sqlite3.connect(staging / "metadata.db")
    try:
        calibre.execute("PRAGMA wal_autocheckpoint=0")
        calibre.create_function("title_sort", 1, lambda title: title)  # Calibre's triggers
        calibre.execute("UPDATE books SET title = 'Trees (annotated)' WHERE title = 'Trees'")
        calibre.commit()
        live = folder / "Calibre Library"
        shutil.copytree(staging, live)
    finally:
        calibre.close()
    shutil.rmtree(staging)
    return {"kind": "calibre", "path": str(live)}


# ---- item 17: damaged git objects ----------------------------------------------------------


def damaged_objects(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A repository whose loose objects of two files are damaged: one truncated (libgit2
    1.9 loops forever inflating it), one replaced by bytes that are not zlib."""
    repo = folder / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    noise = "\n".join(f"{i * 7919 % 100_003:x} {i * 104729 % 99_991:x}" for i in range(20_000))
    for path, text in {**GOOD_FILES, "data/table.txt": noise, "notes.md": noise[:9000]}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Add the app and its data")
    for path, keep in (("data/table.txt", 200), ("notes.md", 0)):
        oid = git(repo, "rev-parse", f"HEAD:{path}").strip()
        loose = repo / ".git" / "objects" / oid[:2] / oid[2:]
        loose.chmod(0o644)
        loose.write_bytes(loose.read_bytes()[:keep] if keep else b"not a zlib stream")
    return git_source(repo)


CASES = [
    HostileCase(
        "git repository with a committed node_modules/ of 100,000 files",
        9,
        node_modules,
        "vendored code (under node_modules/)",
        good_items=2,
    ),
    HostileCase(
        "5 MB one-line note starting with '# '",
        10,
        huge_heading,
        "",
        good_items=2,
        twin=long_line,
    ),
    HostileCase("Calibre library in WAL mode (closed)", 14, calibre_wal, "", good_items=2),
    HostileCase(
        "Calibre library in WAL mode, an edit only in its log", 14, calibre_wal_live, "", 2
    ),
    HostileCase(
        "git repository with a truncated and a junk loose object",
        17,
        damaged_objects,
        "is damaged",
        good_items=2,
    ),
]
