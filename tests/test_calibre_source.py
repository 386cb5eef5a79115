"""A `calibre` source through the real stack: a library made by Calibre's own
``calibredb`` (Debian's ``calibre``, installed by ``scripts/setup.sh --dev``) from
books of ../shared/data/corpora, indexed by the Dagster job into LanceDB and Tantivy
and searched with the bundled model.

Where ``calibredb`` is not installed the same library is made by writing metadata.db
with the base tables of Calibre's schema (``tests/calibre_library.py``);
``test_the_library_was_made_by_calibredb_where_it_is_installed`` says which path ran.
The fallback builder is tested on its own either way.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from rag_assets.sources import source_kind
from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.search import SearchFilters
from rag_serving.search.engine import SearchEngine
from rag_serving.status import index_status
from rag_sources.errors import SourceUnavailableError
from rag_sources.formats import router
from rag_sources.formats.model import ItemSkipped, ParseOptions
from rag_sources.kinds.calibre import library
from rag_sources.kinds.calibre.config import CalibreSourceConfig
from rag_sources.kinds.calibre.kind import CalibreKind
from rag_sources.kinds.calibre.library import READABLE_FORMATS, list_books, read_books
from rag_sources.listing import list_source_items
from rag_sources.where import sql_string
from ragline.indexing import index_sources
from tests.calibre_library import (
    CALIBREDB,
    BookSpec,
    CalibreLibrary,
    SqliteLibrary,
    library_digest,
    make_library,
)
from tests.conftest import SHARED_DATA, write_config

pytestmark = pytest.mark.shared_data

EPUB = SHARED_DATA / "corpora" / "epub"
PDF = SHARED_DATA / "corpora" / "pdf" / "docling-samples" / "multi_page.pdf"

WASTE_LAND = BookSpec(
    EPUB / "wasteland.epub",
    "The Waste Land",
    ("T. S. Eliot",),
    tags=("Poetry", "Modernism"),
    series="Modernist Poems",
    series_index=1,
    publisher="Faber & Gwyer",
    rating=5,
    comments="<p>A <b>long poem</b> in five parts, first printed in <i>The Criterion</i>.</p>",
    identifiers={"isbn": "9780571097128"},
)
TREES = BookSpec(
    EPUB / "trees.epub",
    "Trees",
    ("Joyce Kilmer", "Ada Greenleaf"),
    tags=("Nature", "Science"),
    publisher="Green Press",
    rating=3,
)
WORD_PROCESSOR = BookSpec(
    PDF,
    "The Evolution of the Word Processor",
    ("Jane Doe",),
    tags=("Technology",),
    series="Computing History",
    series_index=2,
)
HEFTY_WATER = BookSpec(EPUB / "hefty-water.epub", "Hefty Water", ("Water Writer",))
ONLY_MOBI = BookSpec(None, "Only Mobi", ("Mobi Author",), tags=("Poetry",))


def calibre_source(root: Path, name: str = "books") -> dict[str, object]:
    return {"name": name, "kind": "calibre", "path": str(root)}


def index(config: RaglineConfig, names: list[str] | None = None) -> dict:
    [outcome] = index_sources(config, names or [], full=False)
    assert outcome.success, outcome.error
    return outcome.metadata


def documents(config: RaglineConfig, source: str = "books") -> dict[str, dict]:
    store = SearchEngine(config).store
    rows = store.read("documents", where=f"source = {sql_string(source)}").to_pylist()
    return {row["path"]: row for row in rows}


def key_of(lib: CalibreLibrary, book_id: int, fmt: str) -> str:
    [book] = [b for b in read_books(config_for(lib.root)) if b.id == book_id]
    return book.file_key(fmt)


def config_for(root: Path, **extra: object) -> CalibreSourceConfig:
    return CalibreSourceConfig(name="books", kind="calibre", path=root, **extra)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def shelf(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The library (five books: EPUBs, a PDF, a book with only a MOBI, one whose file
    is gone), indexed once; the digest of its files before indexing."""
    root = tmp_path_factory.mktemp("calibre")
    started = time.monotonic()
    lib = make_library(root / "Calibre Library")
    ids = {spec.title: lib.add(spec) for spec in (WASTE_LAND, TREES, WORD_PROCESSOR, HEFTY_WATER)}
    ids[ONLY_MOBI.title] = lib.add(ONLY_MOBI)
    mobi = root / "only.mobi"
    mobi.write_bytes(b"BOOKMOBI not really a MOBI file")
    lib.add_format(ids[ONLY_MOBI.title], mobi)
    hefty = lib.root / key_of(lib, ids["Hefty Water"], "epub")
    hefty.unlink()  # gone from disk, still listed by Calibre
    built = time.monotonic() - started
    before = library_digest(lib.root)
    config = parse_config_file(write_config(root, [calibre_source(lib.root)], root / "data"))
    started = time.monotonic()
    metadata = index(config)
    print(f"\nlibrary made by {lib.builder} in {built:.1f}s, indexed in "
          f"{time.monotonic() - started:.1f}s")  # fmt: skip
    return {"lib": lib, "ids": ids, "config": config, "before": before, "metadata": metadata}


@pytest.fixture(scope="module")
def engine(shelf: dict) -> SearchEngine:
    return SearchEngine(shelf["config"])


def test_the_library_was_made_by_calibredb_where_it_is_installed(shelf: dict) -> None:
    # Which builder ran: calibredb (a real Calibre library) whenever it is on PATH.
    assert shelf["lib"].builder == ("calibredb" if CALIBREDB else "sqlite")


def test_a_book_is_found_by_its_chapter_text_with_the_chapter_anchor(
    shelf: dict, engine: SearchEngine
) -> None:
    lib, ids = shelf["lib"], shelf["ids"]
    key = key_of(lib, ids["Trees"], "epub")
    hits = engine.search("parts of a tree: roots, trunk, branches, twigs, xylem and phloem").hits
    top = hits[0]
    assert (top.path, top.location) == (key, f"{key}#chapter=2"), [h.location for h in hits]
    assert top.title == "Trees" and top.author == "Joyce Kilmer" and top.file_type == "epub"
    # The chunk's lines are inside the chapter's section, and hold its text.
    doc = documents(shelf["config"])[key]
    sections = {s["anchor"]: s for s in json.loads(doc["sections_json"])}
    chapter = sections["chapter=2"]
    assert chapter["line_start"] <= top.line_start <= top.line_end <= chapter["line_end"]
    lines = doc["body"].split("\n")
    assert lines[chapter["line_start"] - 1] == "Morphology"  # the chapter's first line
    assert "xylem" in "\n".join(lines[top.line_start - 1 : top.line_end])
    assert sections["chapter=1"]["label"] == "Classification"

    pdf_key = key_of(lib, ids[WORD_PROCESSOR.title], "pdf")
    # Page 3 is about WordPerfect and lawyers too: a query only page 2 answers.
    pdf = engine.search("notable software of this era: WordPerfect and Apple's Mac").hits[0]
    assert (pdf.location, pdf.author) == (f"{pdf_key}#page=2", "Jane Doe")
    assert pdf.title == WORD_PROCESSOR.title  # Calibre's title, not the file's


def test_the_cli_prints_a_book_hit_with_its_author_and_chapter(shelf: dict) -> None:
    from click.testing import CliRunner

    from ragline.cli import cli

    config_path = str(shelf["config"].config_path)
    query = "parts of a tree: roots, trunk, branches, twigs, xylem and phloem"
    result = CliRunner().invoke(cli, ["--config", config_path, "search", query, "--k", "1"])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0].strip()
    # the title, its author, the chapter (without the book's title again), then where
    assert first.startswith("1. Trees — Joyce Kilmer › Morphology"), result.output
    assert "books:Joyce Kilmer/Trees" in first  # the line wraps at the terminal's width


def test_the_metadata_section_comes_first_and_the_comments_are_text(shelf: dict) -> None:
    lib, ids = shelf["lib"], shelf["ids"]
    doc = documents(shelf["config"])[key_of(lib, ids["The Waste Land"], "epub")]
    about, first, chapter = json.loads(doc["sections_json"])[:3]
    assert (about["anchor"], about["line_start"]) == ("about", 1)
    # the book's title page, which no entry of its contents points at, then Chapter 1
    assert first["anchor"] == "file=wasteland-content.xhtml"
    assert first["line_start"] == about["line_end"] + 2 and chapter["anchor"] == "chapter=1"
    head = doc["body"].split("\n")[: about["line_end"]]
    assert head[:2] == ["The Waste Land", "by T. S. Eliot"]
    assert "Series: Modernist Poems #1" in head and "Rating: 5/5" in head
    assert "Publisher: Faber & Gwyer" in head and "Identifiers: isbn:9780571097128" in head
    assert head[-1] == "A long poem in five parts, first printed in The Criterion."
    meta = json.loads(doc["frontmatter_json"])
    assert meta["comments"] == head[-1]  # as text, not Calibre's HTML
    assert {k: meta[k] for k in ("title", "authors", "series", "series_index", "rating")} == {
        "title": "The Waste Land",
        "authors": ["T. S. Eliot"],
        "series": "Modernist Poems",
        "series_index": 1.0,
        "rating": 5,
    }
    assert (meta["format"], meta["formats"], meta["publisher"]) == (
        "epub",
        ["epub"],
        "Faber & Gwyer",
    )
    assert meta["calibre_id"] == ids["The Waste Land"]
    assert meta["identifiers"] == {"isbn": "9780571097128"}
    assert sorted(doc["tags"]) == ["modernism", "poetry"]
    assert "series:modernist poems" in doc["facets"] and "author:t. s. eliot" in doc["facets"]
    # The book's first chapter starts where its section says, after the metadata.
    assert doc["body"].split("\n")[first["line_start"] - 1] == "The Waste Land"
    # A search for the comments finds the book through its metadata section.
    hit = SearchEngine(shelf["config"]).search("long poem first printed in The Criterion").hits[0]
    assert hit.title == "The Waste Land" and hit.location.endswith("#about")


def test_filters_by_author_tag_and_series(shelf: dict, engine: SearchEngine) -> None:
    def titles(**filters: tuple[str, ...]) -> set[str]:
        return {
            h.title for h in engine.search("poem tree word", filters=SearchFilters(**filters)).hits
        }

    assert titles(authors=("ada greenleaf",)) == {"Trees"}  # a second author counts too
    assert titles(authors=("T. S.  Eliot",)) == {"The Waste Land"}
    assert titles(tags=("Poetry",)) == {"The Waste Land"}
    assert titles(tags=("science",)) == {"Trees"}
    assert titles(series=("Computing History",)) == {WORD_PROCESSOR.title}
    assert titles(series=("modernist poems",), authors=("jane doe",)) == set()
    assert titles(types=("pdf",)) == {WORD_PROCESSOR.title}


def test_unreadable_books_are_recorded_and_the_others_index(shelf: dict) -> None:
    lib, ids = shelf["lib"], shelf["ids"]
    issues = {i.path: i for i in index_status(shelf["config"]).sources[0].issues}
    mobi = issues[key_of(lib, ids["Only Mobi"], "mobi")]
    assert mobi.severity == "skipped" and "(MOBI)" in mobi.message
    assert "convert it to EPUB" in mobi.message
    missing = issues[key_of(lib, ids["Hefty Water"], "epub")]
    assert missing.severity == "error" and "EPUB file is missing" in missing.message
    assert "\n" not in missing.message + mobi.message
    indexed = {row["title"] for row in documents(shelf["config"]).values()}
    assert indexed == {"The Waste Land", "Trees", WORD_PROCESSOR.title}


def test_indexing_never_modifies_the_library(shelf: dict) -> None:
    lib = shelf["lib"]
    SearchEngine(shelf["config"]).search("tree")  # reads go through the index only
    list(source_kind(shelf["config"].sources[0]).list_items())
    assert library_digest(lib.root) == shelf["before"]  # no file added, changed or removed


def test_status_lists_the_same_items_as_the_kind(shelf: dict) -> None:
    source = shelf["config"].sources[0]
    listed = [(i.key, i.fingerprint, i.problem) for i in list_source_items(source, None)]
    kind = [(i.key, i.fingerprint, i.problem) for i in source_kind(source).list_items()]
    assert listed == kind and len(listed) == 5
    pending = index_status(shelf["config"]).sources[0].pending
    assert pending is not None and pending.total == 0


def test_a_metadata_edit_re_indexes_that_book_and_a_removed_book_disappears(
    tmp_path: Path,
) -> None:
    lib = make_library(tmp_path / "library")
    waste, trees = lib.add(WASTE_LAND), lib.add(TREES)
    config = parse_config_file(write_config(tmp_path, [calibre_source(lib.root)], tmp_path / "d"))
    index(config)
    kind = source_kind(config.sources[0])
    signal = kind.change_signal()
    again = index(config)
    assert again["raw_files"]["new"] == again["raw_files"]["changed"] == 0
    assert kind.change_signal() == signal  # nothing changed: the sensor stays quiet

    lib.set_tags(trees, ("Nature", "Botany"))
    assert kind.change_signal() != signal
    pending = index_status(config).sources[0].pending
    assert pending is not None and (pending.changed, pending.new, pending.deleted) == (1, 0, 0)
    before = documents(config)
    edited = index(config)
    assert edited["raw_files"]["changed"] == 1 and edited["raw_files"]["new"] == 0
    assert edited["parsed_documents"]["changed"] == 1, edited["parsed_documents"]
    # Only the metadata section's chunk (its Tags line) is embedded again: the
    # chapters' chunks keep their vectors.
    assert edited["embeddings"]["embedded"] == 1, edited["embeddings"]
    after = documents(config)
    trees_key = key_of(lib, trees, "epub")
    waste_key = key_of(lib, waste, "epub")
    assert sorted(after[trees_key]["tags"]) == ["botany", "nature"]
    assert after[waste_key]["indexed_at"] == before[waste_key]["indexed_at"]  # untouched
    assert after[trees_key]["indexed_at"] > before[trees_key]["indexed_at"]
    found = SearchEngine(config).search("tree", filters=SearchFilters(tags=("botany",))).hits
    assert found and {h.title for h in found} == {"Trees"}

    lib.remove(waste)
    removed = index(config)
    assert removed["raw_files"]["deleted"] == 1
    assert set(documents(config)) == {trees_key}
    hits = SearchEngine(config).search("April is the cruellest month", mode="bm25").hits
    assert all(h.title != "The Waste Land" for h in hits)


def test_a_locked_damaged_or_missing_database_fails_only_that_source(tmp_path: Path) -> None:
    lib = make_library(tmp_path / "library")
    lib.add(HEFTY_WATER)
    copy = tmp_path / "copy"
    shutil.copytree(lib.root, copy)
    config = parse_config_file(
        write_config(
            tmp_path, [calibre_source(lib.root), calibre_source(copy, "copy")], tmp_path / "d"
        )
    )
    outcomes = index_sources(config, [], full=False)
    assert all(o.success for o in outcomes), [o.error for o in outcomes]
    digest = library_digest(copy)

    def fails_with(text: str) -> None:
        [failed] = index_sources(config, ["copy"], full=False)
        assert not failed.success and text in (failed.error or ""), failed.error
        assert "\n" not in (failed.error or "").strip()
        # What the source says of itself reaches remote MCP callers: no server path.
        [status] = [s for s in index_status(config).sources if s.name == "copy"]
        said = [failed.error, status.pending_error, status.last_failure.message]
        assert all(m and str(tmp_path) not in m for m in said), said
        hits = SearchEngine(config).search("hefty water", filters=SearchFilters(sources=("copy",)))
        assert hits.hits  # what the index held for the source is kept and served
        index(config, ["books"])  # the other source still indexes

    writer = sqlite3.connect(copy / "metadata.db")
    writer.execute("BEGIN EXCLUSIVE")  # Calibre in the middle of a write
    try:
        started = time.monotonic()
        fails_with("is locked by another program")
        waited = time.monotonic() - started
    finally:
        writer.rollback()
        writer.close()
    assert waited >= library.LOCK_WAIT_SECONDS  # it waited for the lock before giving up
    assert library_digest(copy) == digest

    (copy / "metadata.db").write_bytes(b"this is not a database" * 100)
    fails_with("cannot be read as a Calibre library (file is not a database)")
    (copy / "metadata.db").unlink()
    fails_with("the library folder has no metadata.db")
    shutil.rmtree(copy)
    fails_with("the library folder does not exist")


def folder_state(root: Path) -> dict[str, int]:
    """Every file and folder under ``root`` (itself too) → its mtime: creating,
    changing or removing anything in the library changes it."""
    found = {".": root.stat().st_mtime_ns}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = path.lstat().st_mtime_ns
    return found


def test_a_wal_mode_library_is_read_without_writing_anything_into_it(tmp_path: Path) -> None:
    lib = make_library(tmp_path / "Calibre Library")
    waste, _ = lib.add(WASTE_LAND), lib.add(TREES)
    database = lib.root / "metadata.db"
    with sqlite3.connect(database) as db:  # as Calibre leaves it with WAL on, once closed
        assert db.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    db.close()
    assert not (lib.root / "metadata.db-wal").exists()
    config = parse_config_file(write_config(tmp_path, [calibre_source(lib.root)], tmp_path / "d"))
    before = folder_state(lib.root)
    index(config)
    assert {d["title"] for d in documents(config).values()} == {"The Waste Land", "Trees"}
    assert index_status(config).sources[0].pending_error is None
    assert folder_state(lib.root) == before  # no -wal or -shm left, nothing touched

    # Calibre open: an edit only in its write-ahead log (not yet in metadata.db).
    calibre = sqlite3.connect(database)
    try:
        calibre.execute("PRAGMA wal_autocheckpoint=0")
        calibre.create_function("title_sort", 1, lambda title: title)  # its triggers call it
        calibre.execute("UPDATE books SET title = 'The Waste Land (annotated)' WHERE id = ?",
                        (waste,))  # fmt: skip
        calibre.commit()
        assert (lib.root / "metadata.db-wal").stat().st_size > 0
        before = folder_state(lib.root)
        edited = index(config)
        assert edited["raw_files"]["changed"] == 1
        titles = {d["title"] for d in documents(config).values()}
        assert titles == {"The Waste Land (annotated)", "Trees"}  # the log was read
        assert index_status(config).sources[0].pending.total == 0  # type: ignore[union-attr]
        assert folder_state(lib.root) == before
    finally:
        calibre.close()


def test_the_fallback_builder_makes_a_library_the_kind_reads(tmp_path: Path) -> None:
    """metadata.db written without Calibre (the path for machines without calibredb),
    plus a book file that is a link leading out of the library."""
    lib = SqliteLibrary(tmp_path / "library")
    waste = lib.add(WASTE_LAND)
    pdf = lib.add(WORD_PROCESSOR)
    lib.add_format(pdf, EPUB / "trees.epub")  # now EPUB and PDF: the EPUB is read
    linked = lib.add(HEFTY_WATER)
    secret = tmp_path / "secret.epub"
    shutil.copyfile(EPUB / "hefty-water.epub", secret)
    link = lib.root / key_of(lib, linked, "epub")
    link.unlink()
    link.symlink_to(secret)
    lib.add(ONLY_MOBI)  # no format at all
    moved = lib.add(TREES)  # its folder becomes a link to a folder outside the library
    folder = lib.book_folder(moved)
    shutil.move(folder, tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere")

    config = config_for(lib.root)
    items = {i.key: i for i in list_books(config)}
    assert len(items) == 5
    assert "leads outside the library" in (items[key_of(lib, moved, "epub")].problem or "")
    good = items[key_of(lib, waste, "epub")]
    assert good.problem is None and good.size == (EPUB / "wasteland.epub").stat().st_size
    on_disk = (lib.root / good.key).stat()
    assert good.fingerprint.split("|")[1] == f"{on_disk.st_size}:{on_disk.st_mtime_ns}"
    assert good.mtime_ns == on_disk.st_mtime_ns
    both = items[key_of(lib, pdf, "epub")]  # `formats` puts epub before pdf
    assert both.problem is None
    pdf_first = {i.key for i in list_books(config_for(lib.root, formats=["pdf", "epub"]))}
    assert key_of(lib, pdf, "pdf") in pdf_first
    outside = items[key_of(lib, linked, "epub")]
    assert outside.severity == "skipped" and "leads outside the library" in (outside.problem or "")
    empty = next(i for i in items.values() if i.key.startswith("Mobi Author/"))
    assert "no book file in Calibre" in (empty.problem or "")

    kind = CalibreKind(config)
    with pytest.raises(ItemSkipped, match="outside the source"):
        kind.content_hash(outside)  # type: ignore[arg-type]
    document = kind.parse(good.key, ParseOptions())
    assert document.title == "The Waste Land" and document.tags == ("modernism", "poetry")
    assert document.sections[0].anchor == "about"
    assert document.metadata["rating"] == 5 and document.created is None  # no pubdate set

    blank = tmp_path / "blank.txt"
    blank.write_text("  \n\n  \n")
    silent = lib.add(BookSpec(blank, "Blank Pages", ("Nobody",), comments="Only a cover."))
    key = key_of(lib, silent, "txt")
    metadata_only = kind.parse(key, ParseOptions())  # no text: its metadata still indexed
    assert [s.anchor for s in metadata_only.sections] == ["about"]
    assert metadata_only.body.startswith("Blank Pages\nby Nobody\n")
    assert "only Calibre's metadata is indexed" in metadata_only.warnings[0]


def test_one_book_edit_changes_only_its_fingerprint_and_readable_formats_match_the_router(
    tmp_path: Path,
) -> None:
    for fmt, file_type in READABLE_FORMATS.items():
        assert router.file_type(f"x.{fmt}") == file_type and file_type in router.PARSERS
    lib = SqliteLibrary(tmp_path / "library")
    one, two = lib.add(WASTE_LAND), lib.add(TREES)
    config = config_for(lib.root)
    first = {i.key: i.fingerprint for i in list_books(config)}
    time.sleep(0.01)
    lib.set_tags(two, ("Forestry",))
    second = {i.key: i.fingerprint for i in list_books(config)}
    assert second[key_of(lib, one, "epub")] == first[key_of(lib, one, "epub")]
    assert second[key_of(lib, two, "epub")] != first[key_of(lib, two, "epub")]
    # a book file replaced behind Calibre's back: its size/mtime change the fingerprint
    key = key_of(lib, one, "epub")
    os.utime(lib.root / key, ns=(1, 1))
    assert {i.key: i.fingerprint for i in list_books(config)}[key] != second[key]
    with pytest.raises(SourceUnavailableError, match=r"no metadata\.db"):
        list(list_books(config_for(tmp_path)))


def test_the_sensor_requests_a_run_when_calibre_changes_the_library(tmp_path: Path) -> None:
    from dagster import build_sensor_context, instance_for_test

    from rag_assets.resources import RaglineConfigResource
    from rag_assets.sensors.source_changes import build_source_changes_sensor

    lib = make_library(tmp_path / "library")
    book = lib.add(HEFTY_WATER)
    config_path = write_config(tmp_path, [calibre_source(lib.root)], tmp_path / "data")
    sensor = build_source_changes_sensor(30)
    settings = {"settings": RaglineConfigResource(config_path=str(config_path))}

    def tick(cursor: str | None):
        return sensor(build_sensor_context(instance=instance, cursor=cursor, resources=settings))

    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["books"])
        first = tick(None)
        assert [r.partition_key for r in first.run_requests] == ["books"]
        assert not tick(first.cursor).run_requests  # nothing changed: no run
        lib.set_tags(book, ("Water",))
        after = tick(first.cursor)
        assert [r.partition_key for r in after.run_requests] == ["books"]
