"""The walker's security rules on an adversarial vault, through the real stack:
nothing outside a source root is read, every entry that cannot be indexed is
recorded with its reason, and folders or roots that cannot be read keep their rows.

The tests often run as root, and root reads a ``chmod 000`` folder anyway. To get a
real EACCES, ``unprivileged_reads`` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
from the *effective* set of the calling thread (``capset``) and raises them again
afterwards; as any other user ``chmod 000`` is enough and nothing is dropped. The
indexing run executes in this thread (Dagster's in-process executor), so the
walker meets the same EACCES a user would.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_assets.sources import ItemStat, source_kind
from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.index.store import IndexStore
from rag_serving.search import SearchEngine, SearchFilters
from rag_serving.status import index_status
from rag_sources import scanning
from rag_sources.errors import SourceUnavailableError
from rag_sources.formats.model import ItemSkipped, ParseOptions
from rag_sources.kinds.markdown.config import MarkdownSourceConfig
from rag_sources.scanning import (
    OutsideSourceError,
    iter_source_files,
    open_source_file,
    pinned_source_file,
)
from ragline.cli import cli
from ragline.indexing import index_sources
from tests.conftest import build_index, write_config

BAD_NAME = os.fsencode("badname_") + b"\xff\xfe.md"


# ---- helpers -----------------------------------------------------------------


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_CAP_DAC = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


@contextmanager
def unprivileged_reads() -> Iterator[None]:
    """File permissions apply to this thread even when it runs as root."""
    if os.geteuid() != 0:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (_CapData * 2)()
    assert libc.capget(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())
    saved = data[0].effective
    data[0].effective = saved & ~_CAP_DAC
    assert libc.capset(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        data[0].effective = saved
        assert libc.capset(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())


def _index(config: RaglineConfig) -> list:
    return index_sources(parse_config_file(config.config_path), [], full=False)


def _paths(config: RaglineConfig, source: str) -> set[str]:
    store = IndexStore(config.data_dir)
    rows = store.read("documents", where=f"source = '{source}'", columns=["path"])
    return set(rows.column("path").to_pylist())


def _hits(config: RaglineConfig, query: str, source: str | None = None) -> list[tuple[str, str]]:
    engine = SearchEngine(config)
    filters = SearchFilters(sources=(source,)) if source else None
    result = engine.search(query, k=20, filters=filters, mode="bm25")
    return [(h.source, h.path) for h in result.hits]


def _issues(config: RaglineConfig, source: str) -> dict[str, tuple[str, str]]:
    store = IndexStore(config.data_dir)
    rows = store.read("file_issues", where=f"source = '{source}'").to_pylist()
    return {r["path"]: (r["severity"], r["message"]) for r in rows}


def _adversarial_vault(base: Path) -> Path:
    """``notes`` (with every kind of link and a bad name), ``secret`` beside it, and
    files outside both."""
    notes, secret, outside = base / "notes", base / "secret", base / "outside"
    for folder in (notes / "sub", secret, outside / "folder"):
        folder.mkdir(parents=True)
    (notes / "Good.md").write_text("# Good\n\nThe heron waits in the reeds.\n")
    (notes / "sub" / "Deep.md").write_text("# Deep\n\nKingfishers nest in river banks.\n")
    (notes / "Fine name.md").write_text("# Fine\n\nA note beside the bad name: otters.\n")
    (secret / "Passwords.md").write_text("# Passwords\n\nvaultword zebra-quartz-7731\n")
    (outside / "private.md").write_text("# Private\n\noutsideword mango-basalt-4410\n")
    (outside / "folder" / "inner.md").write_text("# Inner\n\nfolderword cobalt-lynx-2291\n")
    with open(os.fsencode(notes) + b"/" + BAD_NAME, "wb") as handle:
        handle.write(b"# Bad name\n\nbadnameword walrus-3391\n")
    (notes / "passwd_link.md").symlink_to("/etc/passwd")
    (notes / "private_link.md").symlink_to(outside / "private.md")
    (notes / "xref.md").symlink_to("../secret/Passwords.md")
    (notes / "alias.md").symlink_to("Good.md")  # inside the root: followed
    (notes / "loop_a.md").symlink_to("loop_b.md")
    (notes / "loop_b.md").symlink_to("loop_a.md")
    (notes / "dangling.md").symlink_to("missing.md")
    (notes / "outdir").symlink_to(outside / "folder")
    (notes / "indir").symlink_to("sub")
    return base


@pytest.fixture(scope="module")
def adversarial(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    base = _adversarial_vault(tmp_path_factory.mktemp("adversarial"))
    config_path = write_config(
        base / "config",
        [
            {"name": "notes", "kind": "markdown", "path": str(base / "notes")},
            {"name": "secret", "kind": "markdown", "path": str(base / "secret")},
        ],
    )
    return build_index(config_path)


# ---- what is indexed and what is recorded ------------------------------------


def test_only_files_inside_the_source_are_indexed(adversarial: RaglineConfig) -> None:
    # A bad file name no longer fails the source: every good note is there.
    assert _paths(adversarial, "notes") == {"Good.md", "sub/Deep.md", "Fine name.md", "alias.md"}
    assert _hits(adversarial, "otters") == [("notes", "Fine name.md")]
    # Outside content is not searchable, under any source.
    for word in ("outsideword", "folderword", "badnameword", "root"):
        assert _hits(adversarial, word) == [], word
    # The secret note is found in its own source only, never through the link in notes.
    assert _hits(adversarial, "vaultword") == [("secret", "Passwords.md")]
    assert _hits(adversarial, "vaultword", source="notes") == []


def test_every_skipped_entry_says_why(adversarial: RaglineConfig) -> None:
    issues = _issues(adversarial, "notes")
    expected = {
        "badname_\\xff\\xfe.md": "not valid UTF-8; rename it",
        "passwd_link.md": "a file outside the source",
        "private_link.md": "a file outside the source",
        "xref.md": "a file outside the source",
        "loop_a.md": "symbolic link loop",
        "loop_b.md": "symbolic link loop",
        "dangling.md": "target is missing",
        "outdir/": "a folder outside the source",
        "indir/": "folder links are not followed",
    }
    assert set(issues) == set(expected)
    for path, words in expected.items():
        severity, message = issues[path]
        assert severity == "skipped" and words in message, (path, message)
        assert "\n" not in message
    # ...and `ragline status --json` shows them, valid JSON (the bad name escaped).
    result = CliRunner().invoke(cli, ["--config", str(adversarial.config_path), "status", "--json"])
    assert result.exit_code == 0, result.output
    notes = next(s for s in json.loads(result.output)["sources"] if s["name"] == "notes")
    assert {s["path"] for s in notes["skipped"]} == set(expected)
    assert notes["pending_changes"]["total"] == 0


def test_a_second_run_changes_nothing(adversarial: RaglineConfig) -> None:
    (outcome,) = index_sources(parse_config_file(adversarial.config_path), ["notes"], full=False)
    assert outcome.success, outcome.error
    files = outcome.metadata["raw_files"]
    assert (files["new"], files["changed"], files["deleted"]) == (0, 0, 0)
    assert _paths(adversarial, "notes") == {"Good.md", "sub/Deep.md", "Fine name.md", "alias.md"}
    assert len(_issues(adversarial, "notes")) == 9


def test_the_walker_never_lists_a_name_that_is_not_text(tmp_path: Path) -> None:
    base = _adversarial_vault(tmp_path)
    folder = os.fsencode(base / "notes") + b"/bad\xffdir"
    os.mkdir(folder)
    for name in (b"/one.md", b"/two.md"):
        with open(folder + name, "wb") as handle:
            handle.write(b"# x\n")
    config = MarkdownSourceConfig(name="notes", kind="markdown", path=base / "notes")
    entries = list(iter_source_files(config))
    for entry in entries:
        entry.path.encode("utf-8")  # never a surrogate escape
    folders = [e for e in entries if e.path == "bad\\xffdir/"]
    assert len(folders) == 1 and "folder name is not valid UTF-8" in (folders[0].problem or "")


# ---- reading re-checks what listing checked ----------------------------------


def test_a_file_replaced_by_a_link_after_listing_is_not_read(tmp_path: Path) -> None:
    base = _adversarial_vault(tmp_path)
    notes = base / "notes"
    kind = source_kind(MarkdownSourceConfig(name="notes", kind="markdown", path=notes))
    listed = {item.key: item for item in kind.list_items()}
    item: ItemStat = listed["Good.md"]
    assert item.problem is None
    # A link inside the root reads the file it points to...
    assert "heron" in kind.parse("alias.md", ParseOptions()).body
    (notes / "Good.md").unlink()
    (notes / "Good.md").symlink_to(base / "outside" / "private.md")
    with pytest.raises(ItemSkipped, match="symbolic link"):
        kind.content_hash(item)
    with pytest.raises(ItemSkipped, match="symbolic link"):
        kind.parse("Good.md", ParseOptions())
    with pytest.raises(ItemSkipped, match="outside the source"):
        kind.parse("alias.md", ParseOptions())  # ...but not once that file leads outside
    # A folder on the way swapped for a link is refused too.
    shutil.rmtree(notes / "sub")
    (notes / "sub").symlink_to(base / "outside" / "folder")
    (base / "outside" / "folder" / "Deep.md").write_text("# outside\n")
    with pytest.raises(ItemSkipped, match="outside the source"):
        kind.content_hash(listed["sub/Deep.md"])
    with pytest.raises(OutsideSourceError):
        open_source_file(notes.resolve(), "../secret/Passwords.md")
    # Parsers get a path pinned to the checked file; the pin folders of processes
    # that died are removed by the next process.
    stale = Path(tempfile.gettempdir(), "ragline-open-4194305-test")  # above pid_max
    shm = Path("/dev/shm")
    if os.access(shm, os.W_OK):
        stale = shm / stale.name
    stale.mkdir(exist_ok=True)
    scanning._pin_folders.clear()
    with pinned_source_file(notes.resolve(), "Fine name.md") as pinned:
        assert pinned.name == "Fine name.md" and b"otters" in pinned.read_bytes()
    assert not pinned.exists() and not stale.exists()
    os.mkfifo(notes / "pipe.md")
    with pytest.raises(OutsideSourceError, match="not a regular file"):
        open_source_file(notes.resolve(), "pipe.md")  # never blocks on a pipe


# ---- unreadable folders and vanished roots keep their rows -------------------


def test_unreadable_folder_and_file_keep_their_rows_until_readable(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / "Private").mkdir(parents=True)
    (vault / "Top.md").write_text("# Top\n\ntopword ember-falcon-5512\n")
    (vault / "Other.md").write_text("# Other\n\notherword slate-wren-8830\n")
    (vault / "Private" / "Plan.md").write_text("# Plan\n\nplanword amber-gecko-1907\n")
    config = build_index(
        write_config(
            tmp_path / "config", [{"name": "notes", "kind": "markdown", "path": str(vault)}]
        )
    )
    everything = {"Top.md", "Other.md", "Private/Plan.md"}
    assert _paths(config, "notes") == everything

    # An edited file that cannot be read: what it held stays searchable until it can.
    (vault / "Other.md").write_text("# Other\n\notherword edited pine-marten-4471\n")
    (vault / "Private").chmod(0)
    (vault / "Other.md").chmod(0)
    try:
        with unprivileged_reads():
            with pytest.raises(PermissionError):
                os.listdir(vault / "Private")  # the EACCES is real
            (outcome,) = _index(config)
            status = index_status(config)
    finally:
        (vault / "Private").chmod(0o755)
        (vault / "Other.md").chmod(0o644)
    assert outcome.success, outcome.error
    assert outcome.metadata["raw_files"]["deleted"] == 0
    assert _paths(config, "notes") == everything  # nothing pruned
    assert ("notes", "Private/Plan.md") in _hits(config, "planword")
    assert ("notes", "Other.md") in _hits(config, "slate")
    issues = _issues(config, "notes")
    assert issues["Private/"][0] == "error" and "cannot list the folder" in issues["Private/"][1]
    assert issues["Other.md"][0] == "error" and "cannot read the file" in issues["Other.md"][1]
    (source,) = status.sources
    assert source.pending is not None and source.pending.deleted == 0
    assert {i.path for i in source.issues if i.severity == "error"} == {"Private/", "Other.md"}

    # Readable again: changes inside are picked up, the problems are cleared.
    (vault / "Private" / "Plan.md").write_text("# Plan\n\nplanword renewed cedar-heron-6604\n")
    (outcome,) = _index(config)
    assert outcome.success, outcome.error
    assert _paths(config, "notes") == everything
    assert ("notes", "Private/Plan.md") in _hits(config, "cedar")
    assert ("notes", "Other.md") in _hits(config, "marten")
    assert _issues(config, "notes") == {}


def test_a_vanished_source_root_fails_its_run_and_keeps_the_index(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Disk.md").write_text("# Disk\n\ndiskword quartz-otter-3318\n")
    config = build_index(
        write_config(tmp_path / "config", [{"name": "usb", "kind": "markdown", "path": str(vault)}])
    )
    vault.rename(tmp_path / "unplugged")
    with pytest.raises(SourceUnavailableError, match=r"source 'usb': folder .* does not exist"):
        list(iter_source_files(config.sources[0]))
    (outcome,) = _index(config)
    assert not outcome.success
    assert outcome.error is not None and "\n" not in outcome.error
    assert "'usb'" in outcome.error and "does not exist" in outcome.error
    assert _hits(config, "diskword") == [("usb", "Disk.md")]  # still answered
    # An unmounted disk's mount point, left empty, is not every note deleted.
    vault.mkdir()
    (outcome,) = _index(config)
    assert not outcome.success and "lists nothing" in (outcome.error or ""), outcome.error
    assert "--full usb" in (outcome.error or "")
    assert _paths(config, "usb") == {"Disk.md"}
    vault.rmdir()
    (tmp_path / "unplugged").rename(vault)
    (outcome,) = _index(config)
    assert outcome.success, outcome.error
    files = outcome.metadata["raw_files"]
    assert (files["new"], files["changed"], files["deleted"]) == (0, 0, 0)
    # A full run empties the index of a source that really is empty.
    (vault / "Disk.md").unlink()
    (outcome,) = index_sources(parse_config_file(config.config_path), ["usb"], full=True)
    assert outcome.success, outcome.error
    assert _paths(config, "usb") == set()
