"""Hostile inputs for the pipeline (issue 26): each test indexes a real source (a git
repository built with git, a Markdown vault, a Calibre library made by calibredb)
through the Dagster job into LanceDB and Tantivy, and checks that the hostile item
costs a bounded amount and is recorded as a problem, never failing its source.
"""

from __future__ import annotations

import logging
from pathlib import Path

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.search.engine import SearchEngine
from rag_sources.where import sql_string
from ragline.indexing import InProcessIndexer
from tests.conftest import write_config
from tests.git_repos import commit_files, git, init_repo

SKIPPED_FILES = 2_000


def run_source(config: RaglineConfig, name: str) -> tuple[InProcessIndexer, str, dict]:
    """One run of the indexing job for ``name``: (indexer, run id, metadata)."""
    indexer = InProcessIndexer(config)
    indexer.add_partitions([name])
    outcome = indexer.run(name)
    assert outcome.success, outcome.error
    return indexer, outcome.run_id, outcome.metadata


def rows(config: RaglineConfig, table: str, source: str) -> list[dict]:
    store = SearchEngine(config).store
    return store.read(table, where=f"source = {sql_string(source)}").to_pylist()


# ---- item 9: one Dagster event per skipped file ------------------------------------


def test_a_committed_node_modules_logs_one_summary_not_an_event_per_file(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "repo")
    files: dict[str, str | bytes | None] = {
        f"node_modules/pkg{i // 100}/file{i}.js": f"module.exports = {i};\n"
        for i in range(SKIPPED_FILES)
    }
    files["app.py"] = "def greet(name):\n    return f'hello {name}'\n"
    files["README.md"] = "# Greeter\n\nSays hello to whoever asks.\n"
    commit_files(repo, "app with its dependencies committed", files)
    source = {"name": "code", "kind": "git", "path": str(repo), "history": False}
    config = parse_config_file(write_config(tmp_path, [source], tmp_path / "data"))

    indexer, run_id, metadata = run_source(config, "code")

    assert metadata["raw_files"]["skipped"] == SKIPPED_FILES
    assert {r["path"] for r in rows(config, "documents", "code")} == {"app.py", "README.md"}
    logs = indexer.instance.all_logs(run_id)
    messages = [e for e in logs if e.dagster_event is None]
    warnings = [e for e in messages if e.level >= logging.WARNING]
    # One summary, whatever the number of skipped files; a run's own events are ~100.
    assert len(warnings) == 1, len(warnings)
    assert len(logs) < 300, len(logs)
    [summary] = warnings
    text = summary.user_message
    assert f"{SKIPPED_FILES} skipped" in text and "vendored code (under node_modules/)" in text
    assert "node_modules/pkg0/file0.js" in text  # a few examples
    assert len(text) < 3_000
    # Every problem is still recorded, one per item.
    assert len(rows(config, "file_issues", "code")) == SKIPPED_FILES


# ---- item 10: a huge heading line -------------------------------------------------


def test_a_huge_heading_line_names_every_chunk_by_its_capped_start(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    heading = " ".join(f"w{i}" for i in range(3_000))  # one 17 kB heading line
    (vault / "huge.md").write_text(f"# {heading}\n", encoding="utf-8")
    (vault / "good.md").write_text("# Tomatoes\n\nThey need sun and water.\n", encoding="utf-8")
    repo = init_repo(tmp_path / "repo")
    subject = "Fix " + " ".join(f"s{i}" for i in range(8_000))  # a 50 kB commit subject
    commit_files(repo, subject, {"app.py": "def main():\n    return 0\n"})
    sources = [
        {"name": "notes", "kind": "markdown", "path": str(vault)},
        {
            "name": "code",
            "kind": "git",
            "path": str(repo),
            "history_months": 0,
            "limits": {"max_heading_chars": 40},
        },
    ]
    config = parse_config_file(write_config(tmp_path, sources, tmp_path / "data"))

    run_source(config, "notes")
    chunks = rows(config, "staged_chunks", "notes")
    huge = [c for c in chunks if c["doc_id"] != _doc(config, "notes", "good.md")]
    assert len(huge) > 20
    for chunk in huge:
        [part] = chunk["heading_path"]
        assert len(part) <= 300 and heading.startswith(part)
        assert chunk["anchor"] == part
    # The whole line is still text: its last word is found.
    assert "w2999" in huge[-1]["text"]

    run_source(config, "code")
    commit = [c for c in rows(config, "staged_chunks", "code") if c["heading_path"]]
    assert commit and all(len(p) <= 40 for c in commit for p in c["heading_path"])
    [document] = [d for d in rows(config, "documents", "code") if d["path"].startswith(".git/")]
    assert len(document["title"]) <= 40 and subject.startswith(document["title"])
    assert "s7999" in document["body"]  # the message is indexed whole


def _doc(config: RaglineConfig, source: str, path: str) -> str:
    [row] = [r for r in rows(config, "documents", source) if r["path"] == path]
    return row["doc_id"]


# ---- item 17: a damaged git object --------------------------------------------------


def damage(repo: Path, path: str, how: str) -> str:
    """Damage the loose object of ``path`` at HEAD (``how``: "middle" flips bytes in
    the middle of its zlib stream, "junk" replaces it, "truncate" cuts it short);
    returns its id."""
    oid = git(repo, "rev-parse", f"HEAD:{path}").strip()
    loose = repo / ".git" / "objects" / oid[:2] / oid[2:]
    data = bytearray(loose.read_bytes())
    loose.chmod(0o644)
    if how == "middle":
        for i in range(len(data) // 2, len(data) // 2 + 64):
            data[i] ^= 0x5A
    elif how == "junk":
        data = bytearray(b"this is not a zlib stream")
    else:
        data = data[:100]
    loose.write_bytes(bytes(data))
    return oid


def noise(seed: int, size: int) -> str:
    """Text that compresses badly (a loose object larger than its header)."""
    words = [f"{(seed * 7919 + i * 104729) % 1_000_003:x}" for i in range(size // 6)]
    return "\n".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12)) + "\n"


def test_damaged_git_objects_are_recorded_with_git_fsck_and_the_rest_indexes(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "repo")
    files = {
        "good.py": "def tomato_soup():\n    return 'simmer for an hour'\n",
        "notes.txt": noise(1, 40_000),
        "junk.md": noise(2, 5_000),
        "lib/inner.py": "def inner():\n    return 1\n",
    }
    commit_files(repo, "first", files)
    middle = damage(repo, "notes.txt", "middle")  # reads its header, not its content
    junk = damage(repo, "junk.md", "junk")  # not even its header
    tree = damage(repo, "lib", "junk")  # a folder's tree
    source = {"name": "code", "kind": "git", "path": str(repo), "history": False}
    config = parse_config_file(write_config(tmp_path, [source], tmp_path / "data"))

    run_source(config, "code")  # the source indexes: nothing fails it

    assert {r["path"] for r in rows(config, "documents", "code")} == {"good.py"}
    issues = {r["path"]: r for r in rows(config, "file_issues", "code")}
    for path, oid in (("notes.txt", middle), ("junk.md", junk), ("lib/", tree)):
        message = issues[path]["message"]
        assert issues[path]["severity"] == "error"
        assert f"object {oid} is damaged" in message and "`git fsck`" in message, message
        assert str(tmp_path) not in message and "please report" not in message


# ---- item 3 (the pipeline's part): no server path in a stored problem ---------------


def test_a_problem_message_keeps_no_absolute_path_and_stays_short() -> None:
    from rag_assets.stages.parse import MESSAGE_CHARS, problem_message

    crash = (
        "unexpected parser error (FileNotFoundError: [Errno 2] No such file or directory: "
        "'/usr/share/tesseract-ocr/5/tessdata/eng.traineddata'); please report it"
    )
    assert problem_message(crash) == (
        "unexpected parser error (FileNotFoundError: [Errno 2] No such file or directory: "
        "'…/eng.traineddata'); please report it"
    )
    pinned = "not a PDF (cannot open '/dev/shm/ragline-open-7-x/9/a.pdf'); see https://x.org/a/b"
    assert problem_message(pinned) == "not a PDF (cannot open '…/a.pdf'); see https://x.org/a/b"
    assert len(problem_message("word " * 10_000)) == MESSAGE_CHARS
    assert problem_message("two\nlines\tof  text") == "two lines of text"


# ---- the git kind parses its blobs and commits under its source's [limits] ------------


def test_git_blobs_and_commit_messages_are_parsed_under_the_sources_limits(
    tmp_path: Path,
) -> None:
    repo = init_repo(tmp_path / "repo")
    nested = "<div>" * 40 + "<p>Deep inside the page.</p>" + "</div>" * 40
    page = f"<html><head><title>Deep</title></head><body>{nested}</body></html>"
    message = "Import the pages\n\n" + "A very long explanation of the change. " * 1_000
    commit_files(repo, message, {"docs/page.html": page, "app.py": "x = 1\n"})
    limits = {"max_nesting_depth": 16, "max_document_chars": 10_000}
    source = {"name": "code", "kind": "git", "path": str(repo), "history_months": 0,
              "limits": limits}  # fmt: skip
    config = parse_config_file(write_config(tmp_path, [source], tmp_path / "data"))

    run_source(config, "code")

    documents = {d["path"]: d for d in rows(config, "documents", "code")}
    assert "Deep inside the page." in documents["docs/page.html"]["body"]
    assert any("deeper than 16 levels" in w for w in documents["docs/page.html"]["warnings"])
    [commit] = [d for p, d in documents.items() if p.startswith(".git/commits/")]
    assert len(commit["body"]) < 12_000 and commit["title"] == "Import the pages"
    assert any("text cut to 10,000 characters" in w for w in commit["warnings"])
