"""Real git repositories for tests, built with the ``git`` program.

Every call runs ``git`` with its global and system configuration switched off
(``GIT_CONFIG_GLOBAL=/dev/null``, ``GIT_CONFIG_NOSYSTEM=1``): a developer's own
settings (signing, hooks paths, default branch) cannot change what is built, and
nothing here writes to them. Authors, committers and dates come from the
environment of each call, so every sha is the same on every machine.

- ``make_repo``: several languages, eight commits by three authors in three time
  zones, a rename, a deletion, a branch merged with a merge commit, and files the
  skip rules catch (vendored, minified, lock, binary, a symbolic link).
- ``make_many_commits``: thousands of commits in about a second (``git fast-import``).
- ``force_push_rewrite``: drop the last commits of a branch and commit new ones, as a
  rebase or a force-push leaves it; ``prune`` also deletes the dropped objects.
- ``bare_clone``, ``shallow_clone``, ``add_submodule``, ``make_empty_repo``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

ALICE = ("Alice Martin", "alice@example.com")
BOB = ("Bob Chen", "bob@example.com")
CAROL = ("Carol Díaz", "carol@example.com")

_BASE_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": ALICE[0],
    "GIT_AUTHOR_EMAIL": ALICE[1],
    "GIT_COMMITTER_NAME": ALICE[0],
    "GIT_COMMITTER_EMAIL": ALICE[1],
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
    "LC_ALL": "C",
}
# Variables that would point git at another repository than the one given.
_DROPPED_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CEILING_DIRECTORIES",
)


def git(
    path: Path, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
) -> str:
    """Run ``git args`` in ``path`` and return its standard output (raises on failure)."""
    full_env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    full_env.update(_BASE_ENV)
    full_env.update(env or {})
    proc = subprocess.run(
        ["git", *args], cwd=path, env=full_env, input=input, capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed in {path} ({proc.returncode}): "
            + proc.stderr.decode("utf-8", "replace").strip()
        )
    return proc.stdout.decode("utf-8", "replace")


def identity_env(
    author: tuple[str, str], date: str, committer: tuple[str, str] | None = None
) -> dict[str, str]:
    """The environment that makes a commit by ``author`` at ``date`` (ISO 8601 with offset)."""
    who = committer or author
    return {
        "GIT_AUTHOR_NAME": author[0],
        "GIT_AUTHOR_EMAIL": author[1],
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": who[0],
        "GIT_COMMITTER_EMAIL": who[1],
        "GIT_COMMITTER_DATE": date,
    }


def init_repo(path: Path, branch: str = "main") -> Path:
    """A new empty repository (no commits) at ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    return path


make_empty_repo = init_repo


def write_files(path: Path, files: Mapping[str, str | bytes | None]) -> None:
    """Write (str or bytes) or delete (None) files of the work tree."""
    for rel, content in files.items():
        target = path / rel
        if content is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def commit_files(
    path: Path,
    message: str,
    files: Mapping[str, str | bytes | None] | None = None,
    author: tuple[str, str] = ALICE,
    date: str = "2024-01-01T00:00:00+00:00",
    committer: tuple[str, str] | None = None,
) -> str:
    """Write ``files`` (None deletes), stage everything and commit; returns the new sha."""
    write_files(path, files or {})
    git(path, "add", "-A")
    git(
        path,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        message,
        env=identity_env(author, date, committer),
    )
    return head_sha(path)


def head_sha(path: Path, ref: str = "HEAD") -> str:
    return git(path, "rev-parse", "--verify", f"{ref}^{{commit}}").strip()


def sha_of(path: Path, subject: str) -> str:
    """The sha of the commit reachable from any ref whose subject is ``subject``."""
    out = git(path, "log", "--all", "--format=%H %s")
    for line in out.splitlines():
        sha, _, text = line.partition(" ")
        if text == subject:
            return sha
    raise KeyError(subject)


# --- make_repo ---------------------------------------------------------------

RETRY_PY_V1 = '''"""Uploading files to the storage service."""

import time


class UploadClient:
    """Sends files to the storage service over HTTP."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def upload(self, path: str) -> bool:
        """Send one file; True when the service stored it."""
        return bool(path) and bool(self.endpoint)


def retry_upload(client: UploadClient, path: str, attempts: int = 3) -> bool:
    """Try an upload a few times."""
    for _ in range(attempts):
        if client.upload(path):
            return True
    return False
'''

RETRY_PY_V2 = RETRY_PY_V1.replace(
    '''def retry_upload(client: UploadClient, path: str, attempts: int = 3) -> bool:
    """Try an upload a few times."""
    for _ in range(attempts):
        if client.upload(path):
            return True
    return False
''',
    '''def backoff_delay(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Seconds to wait before retry number ``attempt``: doubles each time, up to ``cap``."""
    return min(cap, base * (2**attempt))


def retry_upload(client: UploadClient, path: str, attempts: int = 5) -> bool:
    """Retry a failed upload with exponential backoff between the attempts."""
    for attempt in range(attempts):
        if client.upload(path):
            return True
        time.sleep(backoff_delay(attempt))
    return False
''',
)

HELPERS_PY = '''"""Small text helpers."""


def slugify(title: str) -> str:
    """Lower-case ``title`` and join its words with dashes."""
    return "-".join(title.lower().split())


def truncate(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
'''

MAIN_GO = """package main

import (
	"fmt"
	"os"
	"strconv"
)

// Config holds the server settings read from the environment.
type Config struct {
	Port    int
	Verbose bool
}

// parseConfig reads the listening port and verbosity from environment variables.
func parseConfig() (Config, error) {
	port, err := strconv.Atoi(os.Getenv("PORT"))
	if err != nil {
		return Config{}, fmt.Errorf("PORT: %w", err)
	}
	return Config{Port: port, Verbose: os.Getenv("VERBOSE") != ""}, nil
}

func main() {
	cfg, err := parseConfig()
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("listening on", cfg.Port)
}
"""

APP_JS = """// Front-end helpers for the upload page.

export function formatBytes(bytes) {
  // Human-readable file size: 1536 -> "1.5 KB".
  const units = ["B", "KB", "MB", "GB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

export class ProgressBar {
  constructor(element) {
    this.element = element;
  }

  update(fraction) {
    this.element.style.width = `${Math.round(fraction * 100)}%`;
  }
}
"""

LIB_RS = """//! Tokenizer for the search index.

/// Split `text` into lower-case words, dropping punctuation.
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(|word| word.to_lowercase())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words() {
        assert_eq!(tokenize("Hello, World"), vec!["hello", "world"]);
    }
}
"""

README_V1 = """# Uploader

A small service that stores uploaded files.
"""

README_V2 = """# Uploader

A small service that stores uploaded files.

## Retry policy

Failed uploads are retried five times with exponential backoff (0.5 s, doubling,
at most 30 s between attempts). See docs/retry.md.

## Search

The `search` crate tokenizes file names for the search index.
"""

RETRY_MD = """# Retry policy

Uploads fail for transient reasons (timeouts, a restarting storage node). The client
waits `backoff_delay(attempt)` seconds between attempts: 0.5 s, 1 s, 2 s, … capped at
30 s. After five failed attempts the upload is reported as failed.
"""

# A PNG signature and header: NUL bytes, as any binary file has.
LOGO_PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"
    + bytes(64)
)
APP_MIN_JS = (
    "!function(){"
    + ";".join(f"var a{i}=function(b){{return b*{i}}}" for i in range(400))
    + "}();\n"
)
VENDOR_GO = 'package lib\n\n// Hello is vendored code.\nfunc Hello() string { return "hello" }\n'
PACKAGE_LOCK = '{\n  "name": "uploader",\n  "lockfileVersion": 3,\n  "packages": {}\n}\n'
CARGO_LOCK = '# This file is automatically @generated by Cargo.\nversion = 3\n\n[[package]]\nname = "search"\nversion = "0.1.0"\n'

# Subjects of make_repo's commits, oldest first ("feature/search" is merged by the 6th).
MAKE_REPO_SUBJECTS = (
    "Initial commit: upload client, Go server and web page",
    "Retry uploads with exponential backoff",
    "Rename helpers module to text_utils",
    "Add a tokenizer for the search index in Rust",  # on feature/search
    "Remove obsolete notes",
    "Merge branch 'feature/search'",
    "Document the retry policy and the search tokenizer",
    "Add logo, lock files, minified bundle and a vendored Go module",
)

# Files of make_repo's HEAD tree, with how the skip rules see them (None: indexed).
MAKE_REPO_HEAD_FILES: dict[str, str | None] = {
    ".gitignore": None,
    "README.md": None,
    "assets/logo.png": "binary",
    "docs/latest.md": "link",  # a symbolic link to retry.md
    "docs/retry.md": None,
    "package-lock.json": "generated",
    "search/Cargo.lock": "generated",
    "search/Cargo.toml": None,
    "search/src/lib.rs": None,
    "server/main.go": None,
    "src/app/__init__.py": None,
    "src/app/retry.py": None,
    "src/app/text_utils.py": None,
    "vendor/github.com/acme/lib/lib.go": "vendored",
    "web/app.js": None,
    "web/app.min.js": "generated",
}


def make_repo(path: Path) -> Path:
    """A repository with eight commits on ``main`` (see ``MAKE_REPO_SUBJECTS``).

    1. Alice, 2024-01-10 +01:00: retry.py (``retry_upload`` without backoff),
       helpers.py, server/main.go (``parseConfig``), web/app.js (``formatBytes``),
       README.md, notes/old.md, .gitignore.
    2. Bob, 2024-02-03 -05:00: retry.py gains ``backoff_delay`` (exponential backoff).
    3. Alice, 2024-02-20: ``git mv src/app/helpers.py src/app/text_utils.py`` (a pure rename).
    4. Carol, 2024-03-01 +05:30, on branch ``feature/search``: search/ (Rust ``tokenize``).
    5. Bob, 2024-03-02 -05:00, on main: deletes notes/old.md.
    6. Alice, 2024-03-05: ``Merge branch 'feature/search'`` (--no-ff, two parents).
    7. Carol, 2024-03-10 +05:30: README.md rewritten, docs/retry.md added.
    8. Bob, 2024-03-12 -05:00: logo.png, package-lock.json, search/Cargo.lock,
       web/app.min.js, vendor/github.com/acme/lib/lib.go, docs/latest.md (symlink).

    Branches left: ``main`` (HEAD) and ``feature/search``; ``MAKE_REPO_HEAD_FILES``
    lists HEAD's files.
    """
    init_repo(path)
    commit_files(
        path,
        MAKE_REPO_SUBJECTS[0],
        {
            ".gitignore": "__pycache__/\n*.log\n",
            "README.md": README_V1,
            "src/app/__init__.py": "",
            "src/app/retry.py": RETRY_PY_V1,
            "src/app/helpers.py": HELPERS_PY,
            "server/main.go": MAIN_GO,
            "web/app.js": APP_JS,
            "notes/old.md": "# Old notes\n\nThese notes are obsolete.\n",
        },
        ALICE,
        "2024-01-10T09:00:00+01:00",
    )
    commit_files(
        path,
        MAKE_REPO_SUBJECTS[1]
        + "\n\nTransient storage errors made uploads fail; wait longer between tries.",
        {"src/app/retry.py": RETRY_PY_V2},
        BOB,
        "2024-02-03T14:30:00-05:00",
    )
    git(path, "mv", "src/app/helpers.py", "src/app/text_utils.py")
    commit_files(path, MAKE_REPO_SUBJECTS[2], {}, ALICE, "2024-02-20T11:00:00+01:00")
    git(path, "checkout", "-q", "-b", "feature/search")
    commit_files(
        path,
        MAKE_REPO_SUBJECTS[3],
        {
            "search/Cargo.toml": '[package]\nname = "search"\nversion = "0.1.0"\nedition = "2021"\n',
            "search/src/lib.rs": LIB_RS,
        },
        CAROL,
        "2024-03-01T10:00:00+05:30",
    )
    git(path, "checkout", "-q", "main")
    commit_files(
        path, MAKE_REPO_SUBJECTS[4], {"notes/old.md": None}, BOB, "2024-03-02T16:00:00-05:00"
    )
    git(
        path,
        "merge",
        "-q",
        "--no-ff",
        "-m",
        MAKE_REPO_SUBJECTS[5],
        "feature/search",
        env=identity_env(ALICE, "2024-03-05T12:00:00+01:00"),
    )
    commit_files(
        path,
        MAKE_REPO_SUBJECTS[6],
        {"README.md": README_V2, "docs/retry.md": RETRY_MD},
        CAROL,
        "2024-03-10T09:15:00+05:30",
    )
    write_files(
        path,
        {
            "assets/logo.png": LOGO_PNG,
            "package-lock.json": PACKAGE_LOCK,
            "search/Cargo.lock": CARGO_LOCK,
            "web/app.min.js": APP_MIN_JS,
            "vendor/github.com/acme/lib/lib.go": VENDOR_GO,
        },
    )
    os.symlink("retry.md", path / "docs" / "latest.md")
    commit_files(path, MAKE_REPO_SUBJECTS[7], {}, BOB, "2024-03-12T08:00:00-05:00")
    return path


# --- many commits --------------------------------------------------------------

_LANGS = (
    ("py", 'def {name}(value):\n    """Step {k} of the pipeline."""\n    return value + {k}\n\n'),
    (
        "go",
        "func {name}(value int) int {{\n\t// step {k} of the pipeline\n\treturn value + {k}\n}}\n\n",
    ),
    (
        "js",
        "export function {name}(value) {{\n  // step {k} of the pipeline\n  return value + {k};\n}}\n\n",
    ),
    (
        "rs",
        "pub fn {name}(value: i64) -> i64 {{\n    // step {k} of the pipeline\n    value + {k}\n}}\n\n",
    ),
    ("md", "## Step {k}\n\nThe function `{name}` adds {k} to its input.\n\n"),
)
_AUTHORS = (ALICE, BOB, CAROL, ("Dmitri Ivanov", "dmitri@example.com"))


def make_many_commits(
    path: Path,
    n: int,
    files: int = 120,
    start: datetime = datetime(2022, 1, 1, tzinfo=UTC),
    step: timedelta = timedelta(hours=5),
    branch: str = "main",
) -> Path:
    """A repository whose ``branch`` has ``n`` linear commits, written by one
    ``git fast-import`` (3,000 commits take about a second).

    Commit ``k`` (1-based) appends one small function to one of ``files`` files in
    five languages (py, go, js, rs, md) under ``pkg<i>/``; every 50th also adds a
    file, every 97th deletes one and every 211th renames one. Dates start at
    ``start`` and advance by ``step``; four authors take turns. The work tree is
    checked out at the end.
    """
    if not (path / ".git").exists():
        init_repo(path, branch)
    contents: dict[str, str] = {}
    stream: list[bytes] = []

    def data(text: str) -> None:
        raw = text.encode()
        stream.append(b"data %d\n" % len(raw) + raw + b"\n")

    def file_name(i: int) -> str:
        ext = _LANGS[i % len(_LANGS)][0]
        return f"pkg{i % 12}/module_{i}.{ext}"

    next_file = files
    live = [file_name(i) for i in range(files)]
    for k in range(1, n + 1):
        name, email = _AUTHORS[k % len(_AUTHORS)]
        when = int((start + step * k).timestamp())
        ops: list[str] = []
        targets = list(live) if k == 1 else [live[k * 7 % len(live)]]
        if k % 50 == 0:
            live.append(file_name(next_file))
            targets.append(live[-1])
            next_file += 1
        for target in targets:
            ext = target.rsplit(".", 1)[1]
            template = next(t for e, t in _LANGS if e == ext)
            contents[target] = contents.get(target, "") + template.format(name=f"step_{k}", k=k)
        stream.append(f"commit refs/heads/{branch}\n".encode())
        stream.append(f"mark :{k}\n".encode())
        stream.append(f"author {name} <{email}> {when} +0000\n".encode())
        stream.append(f"committer {name} <{email}> {when} +0000\n".encode())
        subject = f"Step {k}: update {targets[-1]}"
        data(f"{subject}\n\nChange number {k} of the generated history.\n")
        if k > 1:
            stream.append(f"from :{k - 1}\n".encode())
        for target in targets:
            stream.append(f"M 100644 inline {target}\n".encode())
            data(contents[target])
        if k % 97 == 0 and len(live) > 10:
            gone = live.pop((k * 3) % len(live))
            contents.pop(gone)
            ops.append(f"D {gone}\n")
        if k % 211 == 0:
            old = live[(k * 5) % len(live)]
            new = old.replace("module_", "renamed_")
            if old != new and old not in targets:
                live[live.index(old)] = new
                contents[new] = contents.pop(old)
                ops.append(f"R {old} {new}\n")
        stream.extend(op.encode() for op in ops)
        stream.append(b"\n")
    git(path, "fast-import", "--quiet", "--force", input=b"".join(stream))
    git(path, "reset", "-q", "--hard", branch)
    return path


# --- rewriting history and other shapes ---------------------------------------------


def force_push_rewrite(
    path: Path,
    drop: int = 2,
    new: int = 2,
    prune: bool = False,
    date: str = "2024-06-01T12:00:00+00:00",
) -> tuple[list[str], list[str]]:
    """Replace the last ``drop`` commits of the current branch with ``new`` other
    ones (``reset --hard HEAD~drop`` and commits), as a rebase or a force-push leaves
    the branch. With ``prune`` the dropped commits are deleted from the object store
    (reflogs expired, ``gc --prune=now``). Returns (dropped shas, new shas), newest first.

    Other branches that still reach the dropped commits keep them reachable.
    """
    dropped = git(path, "rev-list", f"-{drop}", "HEAD").split()
    git(path, "reset", "-q", "--hard", f"HEAD~{drop}")
    added = []
    for i in range(new):
        added.append(
            commit_files(
                path,
                f"Rewritten commit {i + 1} of {new}",
                {f"rewritten/change_{i + 1}.txt": f"rewritten change {i + 1}\n"},
                BOB,
                date,
            )
        )
    if prune:
        git(path, "reflog", "expire", "--expire=now", "--all")
        git(path, "gc", "-q", "--prune=now")
    return dropped, added[::-1]


def bare_clone(source: Path, dest: Path) -> Path:
    """``git clone --bare source dest``."""
    git(dest.parent, "clone", "-q", "--bare", str(source), str(dest))
    return dest


def shallow_clone(source: Path, dest: Path, depth: int = 2, branch: str | None = None) -> Path:
    """A shallow clone of ``source`` with ``depth`` commits (``file://`` so that
    git honours ``--depth``; ``--no-single-branch`` is not given: one branch)."""
    args = ["clone", "-q", "--depth", str(depth)]
    if branch:
        args += ["--branch", branch]
    git(dest.parent, *args, source.resolve().as_uri(), str(dest))
    return dest


def add_submodule(
    path: Path, source: Path, at: str, date: str = "2024-04-01T10:00:00+00:00"
) -> str:
    """Add ``source`` as a submodule of ``path`` at ``at`` and commit; returns the sha."""
    git(path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), at)
    git(path, "commit", "-q", "-m", f"Add submodule {at}", env=identity_env(ALICE, date))
    return head_sha(path)
