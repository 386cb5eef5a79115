"""Watch runs of the changed paths only: the scan lists just the paths the events
named, the later stages touch only their documents, and the index they leave is the
one a whole-source run leaves (a full run afterwards finds nothing to do). Real
watcher code, Dagster instance, LanceDB, Tantivy and the bundled model."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_serving.config import RaglineConfig
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from ragline.watching import CHANGED_PATHS_TAG, MAX_CHANGED_PATHS, SourceWatcher
from tests.conftest import build_index, write_config

SOURCE = "notes"
# Python-level opens and folder listings while ``_AUDIT["on"]``: what a run reads.
_AUDIT: dict[str, object] = {"on": False, "events": []}


def _audit(event: str, args: tuple) -> None:
    if _AUDIT["on"] and event in ("open", "os.scandir", "os.listdir") and args:
        path = args[0]
        if isinstance(path, str | bytes | os.PathLike):
            _AUDIT["events"].append((event, os.fsdecode(path)))  # type: ignore[union-attr]


sys.addaudithook(_audit)


class Vault:
    def __init__(self, config: RaglineConfig, root: Path):
        self.config = config
        self.root = root
        self.watcher = SourceWatcher(config)
        self.store = IndexStore(config.data_dir)

    def run(self, *paths: Path) -> dict:
        """One watch run for ``paths`` (as the events name them); its metadata."""
        run = self.watcher.index(SOURCE, list(paths), time.monotonic())
        assert run.outcome.success, run.outcome.error
        self.last_run_id = run.outcome.run_id
        return run.outcome.metadata

    def checks(self) -> dict[str, tuple[bool, dict]]:
        """The last run's asset checks: name → (passed, metadata)."""
        found = {}
        for entry in self.watcher.indexer.instance.all_logs(self.last_run_id):
            event = entry.dagster_event
            if event is not None and event.event_type_value == "ASSET_CHECK_EVALUATION":
                data = event.event_specific_data
                metadata = {k: getattr(v, "value", v) for k, v in data.metadata.items()}
                found[data.check_name] = (data.passed, metadata)
        return found

    def whole(self) -> dict:
        """A watch run without changed paths (catch-up, fallback): the whole source."""
        run = self.watcher.index(SOURCE, None, time.monotonic())
        assert run.outcome.success, run.outcome.error
        return run.outcome.metadata

    def files_row(self, path: str) -> dict:
        self.store.refresh()
        [row] = self.store.read("files", where=f"path = '{path}'").to_pylist()
        row.pop("seen_at")
        return row

    def full(self) -> dict:
        outcome = self.watcher.indexer.run(SOURCE)
        assert outcome.success, outcome.error
        return outcome.metadata

    def state(self) -> dict[str, object]:
        """What the index holds for the source, without times of writing."""
        self.store.refresh()
        scope = f"source = '{SOURCE}'"
        generation = read_manifest(self.store.layout.manifest_path).active
        assert generation is not None

        def rows(table: str, columns: list[str]) -> list[tuple]:
            data = self.store.read(table, where=scope, columns=columns).to_pylist()
            return sorted(tuple(json.dumps(r[c], default=str) for c in columns) for r in data)

        tantivy = FulltextIndex(self.store.layout.fulltext_dir(generation.key))
        return {
            "files": rows("files", ["doc_id", "path", "size", "mtime_ns", "fingerprint",
                                    "content_hash", "error"]),
            "documents": rows("documents", ["doc_id", "path", "content_hash", "title", "tags",
                                            "body", "parser"]),
            "issues": rows("file_issues", ["doc_id", "path", "severity", "message"]),
            "staged": rows("staged_chunks", ["chunk_id", "doc_id", "text", "embed_hash"]),
            "served": rows(generation.table, ["chunk_id", "doc_id", "text", "row_hash", "path"]),
            "tantivy": sorted(tantivy.row_hashes(SOURCE).items()),
        }  # fmt: skip


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory, sample_vault: Path) -> Iterator[Vault]:
    root = tmp_path_factory.mktemp("watch-changed")
    notes = root / "vault"
    shutil.copytree(sample_vault / "notes", notes)
    config = build_index(
        write_config(root, [{"name": SOURCE, "kind": "markdown", "path": str(notes)}])
    )
    yield Vault(config, notes)


def _no_work_left(vault: Vault) -> None:
    """The index the changed-path runs left is the one a whole-source run leaves."""
    before = vault.state()
    metadata = vault.full()
    assert vault.state() == before
    for asset in ("raw_files", "parsed_documents", "chunks", "embeddings", "fulltext_index"):
        counts = metadata[asset]
        assert (counts["new"], counts["changed"], counts["deleted"]) == (0, 0, 0), asset


def test_edit_create_delete_and_renames_match_a_full_run(vault: Vault) -> None:
    root = vault.root
    edited = root / "gardening" / "Tomatoes.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n\nzqedited tomato line\n")
    metadata = vault.run(edited)
    assert metadata["raw_files"]["changed"] == 1
    assert metadata["raw_files"]["scope"] == "1 item(s) at the changed paths"
    assert metadata["embeddings"]["embedded"] >= 1
    # The blocking integrity checks ran on the run's own documents.
    checked = vault.checks()
    for name in ("tantivy_matches_lancedb", "chunks_have_documents",
                 "vectors_have_recorded_dimension"):  # fmt: skip
        passed, values = checked[name]
        assert passed and values["checked_documents"] == 1, (name, values)
    assert checked["tantivy_matches_lancedb"][1]["lancedb_chunks"] >= 1
    _no_work_left(vault)

    created = root / "ideas" / "New idea.md"
    created.parent.mkdir()
    created.write_text("# New idea\n\nzqcreated something new.\n", encoding="utf-8")
    assert vault.run(created.parent)["raw_files"]["new"] == 1  # a new folder: one event
    _no_work_left(vault)

    renamed = root / "ideas" / "Renamed idea.md"
    created.rename(renamed)
    metadata = vault.run(created, renamed)
    assert (metadata["raw_files"]["new"], metadata["raw_files"]["deleted"]) == (1, 1)
    assert metadata["embeddings"]["embedded"] == 0  # a rename re-embeds nothing
    _no_work_left(vault)

    (root / "ideas").rename(root / "moved ideas")  # a folder renamed: two folder paths
    metadata = vault.run(root / "ideas", root / "moved ideas")
    assert (metadata["raw_files"]["new"], metadata["raw_files"]["deleted"]) == (1, 1)
    _no_work_left(vault)

    shutil.rmtree(root / "moved ideas")  # a folder deleted: one path, gone
    assert vault.run(root / "moved ideas")["raw_files"]["deleted"] == 1
    (root / "finance" / "Budget.md").unlink()
    assert vault.run(root / "finance" / "Budget.md")["fulltext_index"]["deleted"] >= 1
    _no_work_left(vault)


def test_problems_at_changed_paths_are_recorded_as_a_full_run_does(vault: Vault) -> None:
    broken = vault.root / "Broken again.md"
    broken.write_bytes(b"# Title\n\nCaf\xe9 \xff\xfe\n")  # not UTF-8
    pipe = vault.root / "pipe.md"
    os.mkfifo(pipe)  # listed as a problem, never opened
    try:
        metadata = vault.run(broken, pipe)
        assert metadata["raw_files"]["new"] + metadata["raw_files"]["skipped"] >= 1
        _no_work_left(vault)
    finally:
        pipe.unlink()
        broken.unlink()
    vault.run(broken, pipe)
    _no_work_left(vault)


def test_a_changed_path_run_reads_nothing_else(vault: Vault) -> None:
    edited = vault.root / "Kubernetes.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n\nzqonly this one\n")
    # An unchanged note that a whole-source scan would record as broken (a pipe named
    # like a note: "not a regular file"); its files row must stay as it is.
    compost = vault.root / "gardening" / "Compost.md"
    saved = compost.read_bytes(), compost.stat()
    before = vault.files_row("gardening/Compost.md")
    compost.unlink()
    os.mkfifo(compost)
    _AUDIT["events"] = []
    _AUDIT["on"] = True
    try:
        metadata = vault.run(edited)
    finally:
        _AUDIT["on"] = False
        compost.unlink()
        compost.write_bytes(saved[0])
        os.utime(compost, ns=(saved[1].st_atime_ns, saved[1].st_mtime_ns))
    touched = {
        Path(path).resolve()
        for event, path in _AUDIT["events"]  # type: ignore[union-attr]
        if Path(path).resolve().is_relative_to(vault.root.resolve())
    }
    assert touched == {edited.resolve()}  # hashed and parsed; no folder listed
    assert metadata["raw_files"]["failed"] == 0 and metadata["raw_files"]["skipped"] == 0
    assert metadata["parsed_documents"]["failed"] == 0
    assert vault.files_row("gardening/Compost.md") == before
    issues = vault.store.read("file_issues", where="path = 'gardening/Compost.md'")
    assert issues.num_rows == 0
    _no_work_left(vault)


def test_paths_it_cannot_list_alone_make_a_whole_source_run(vault: Vault) -> None:
    # A change no event named is picked up when the events name the source's root.
    silent = vault.root / "Sourdough starter.md"
    silent.write_text(silent.read_text(encoding="utf-8") + "\n\nzqsilent change\n")
    metadata = vault.run(vault.root)
    assert "scope" not in metadata["raw_files"]
    assert metadata["raw_files"]["changed"] == 1
    # Too many paths in one batch: no changed paths in the run's tags.
    many = [vault.root / f"missing-{i}.md" for i in range(MAX_CHANGED_PATHS + 1)]
    run = vault.watcher.index(SOURCE, many, time.monotonic())
    tags = vault.watcher.indexer.instance.get_run_by_id(run.outcome.run_id).tags
    assert CHANGED_PATHS_TAG not in tags and tags["ragline/changed"] == str(len(many))
    _no_work_left(vault)


def test_missed_events_are_found_when_quiet_and_the_signal_recorded(vault: Vault) -> None:
    from rag_assets.sensors.source_changes import settings_fingerprint
    from rag_assets.sources import source_kind

    watcher = vault.watcher
    signal_file = watcher.layout.watched_signal(SOURCE)
    note = vault.root / "gardening" / "Tomatoes.md"
    note.write_text(note.read_text(encoding="utf-8") + "\n\nzqseen\n")
    signal_file.unlink(missing_ok=True)
    vault.run(note)
    assert not signal_file.exists()  # a changed-path run lists nothing else
    # A change no event reported (the watcher missed it): found at the quiet moment,
    # and the watch loop runs the whole source.
    missed = vault.root / "Kubernetes.md"
    missed.write_text(missed.read_text(encoding="utf-8") + "\n\nzqmissed\n")
    assert watcher.settle((), quiet=1) == [SOURCE]
    assert vault.whole()["raw_files"]["changed"] == 1
    assert signal_file.exists()  # recorded before a whole-source run, as before
    # Quiet and indexed: listed once, recorded when the next batch does not touch it.
    signal_file.unlink()
    note.write_text(note.read_text(encoding="utf-8") + "\n\nzqagain\n")
    vault.run(note)
    assert watcher.settle((), quiet=1) == []
    assert not signal_file.exists()
    watcher.settle((), quiet=1)
    kind = source_kind(vault.config.source(SOURCE), vault.config.data_dir)
    expected = f"{kind.change_signal()}-{settings_fingerprint(vault.config)}"
    assert json.loads(signal_file.read_text())["fingerprint"] == expected
    # A batch that touches the source after it was listed: nothing recorded.
    signal_file.unlink()
    note.write_text(note.read_text(encoding="utf-8") + "\n\nzqthird\n")
    vault.run(note)
    assert watcher.settle((), quiet=1) == []
    assert watcher.settle({SOURCE}, quiet=1) == []
    assert not signal_file.exists()
    _no_work_left(vault)


def test_a_source_not_whole_in_the_target_generation_is_not_scoped(vault: Vault) -> None:
    # No record of a full run into the generation the run writes to (a generation
    # being built for a new embedder, a source never indexed whole): the scan looks
    # at the changed path only, the later stages reconcile the whole source.
    vault.store.delete("source_state", f"source = '{SOURCE}'")
    note = vault.root / "Kubernetes.md"
    note.write_text(note.read_text(encoding="utf-8") + "\n\nzqnot scoped\n")
    metadata = vault.run(note)
    tags = vault.watcher.indexer.instance.get_run_by_id(vault.last_run_id).tags
    assert metadata["raw_files"]["scope"] == "1 item(s) at the changed paths"
    assert "ragline/scope" not in tags and CHANGED_PATHS_TAG in tags
    assert metadata["parsed_documents"]["unchanged"] > 1  # it looked at every document
    assert "checked_documents" not in vault.checks()["tantivy_matches_lancedb"][1]
    # That run recorded the source whole: the next one is scoped again.
    note.write_text(note.read_text(encoding="utf-8") + "\n\nzqscoped again\n")
    vault.run(note)
    tags = vault.watcher.indexer.instance.get_run_by_id(vault.last_run_id).tags
    assert json.loads(tags["ragline/scope"]) and len(json.loads(tags["ragline/scope"])) == 1
    _no_work_left(vault)


def test_a_linked_folder_is_listed_as_a_full_run_lists_it(vault: Vault) -> None:
    link = vault.root / "linked"
    link.symlink_to(vault.root / "gardening", target_is_directory=True)
    try:
        metadata = vault.run(link)  # the link itself: a problem entry, as a full run has it
        assert metadata["raw_files"]["scope"] == "1 item(s) at the changed paths"
        _no_work_left(vault)
        # A path through the link: only a whole listing says what it holds.
        assert "scope" not in vault.run(link / "Tomatoes.md")["raw_files"]
    finally:
        link.unlink()
    vault.run(link)
    _no_work_left(vault)
