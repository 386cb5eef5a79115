"""A `mail` source through the real stack: Maildirs from corpora/email (nested,
cur/ only), an mbox, an .eml with a real PDF attached (built with the stdlib email
package) and a broken message, indexed by the Dagster job into LanceDB and Tantivy
and searched with the bundled model."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.index.layout import IndexLayout
from rag_serving.mcp.auth import Access
from rag_serving.mcp.service import RaglineService
from rag_serving.search import SearchFilters
from rag_serving.search.engine import SearchEngine
from rag_serving.status import index_status
from rag_sources.kinds.mail.listing import mbox_cache
from rag_sources.where import sql_string
from ragline.indexing import index_sources
from tests.conftest import SHARED_DATA, write_config

pytestmark = pytest.mark.shared_data

EMAIL = SHARED_DATA / "corpora" / "email"
NOTMUCH = EMAIL / "notmuch-corpora"
PDF = SHARED_DATA / "corpora" / "pdf" / "real-world" / "2023-06-20-PV.pdf"
LOCAL = Access(user="local", sources=None, local=True)
REPLY = "default/34"  # Alexander Botero-Lowry answers Jjgod Jiang, quoting him inline
PDF_KEY = "minutes.eml/attachments/1-2023-06-20-PV.pdf"


def index(config: RaglineConfig) -> dict:
    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    return outcome.metadata


def minutes_eml() -> bytes:
    message = EmailMessage()
    message["From"] = "Carol Example <carol@example.org>"
    message["To"] = "Dave Reader <dave@example.org>"
    message["Subject"] = "Minutes of the June meeting"
    message["Date"] = format_datetime(datetime(2023, 6, 21, 9, 30, tzinfo=UTC))
    message["Message-ID"] = "<minutes-2023-06@example.org>"
    message.set_content("Dave, the signed minutes are attached. Regards, Carol")
    message.add_attachment(
        PDF.read_bytes(), maintype="application", subtype="pdf", filename=PDF.name
    )
    return message.as_bytes()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[RaglineConfig, Path, dict]:
    root = tmp_path_factory.mktemp("mail-source")
    mail = root / "mail"
    shutil.copytree(NOTMUCH / "default", mail / "default")
    shutil.copyfile(EMAIL / "patchwork" / "series" / "base-cover-letter.mbox", mail / "series.mbox")
    (mail / "minutes.eml").write_bytes(minutes_eml())
    (mail / "broken" / "cur").mkdir(parents=True)
    (mail / "broken" / "cur" / "9.broken:2,").write_bytes(b"")
    source = {"name": "mail", "kind": "mail", "path": str(mail)}
    config = parse_config_file(write_config(root, [source], root / "data"))
    return config, mail, index(config)


@pytest.fixture(scope="module")
def engine(indexed: tuple[RaglineConfig, Path, dict]) -> SearchEngine:
    return SearchEngine(indexed[0])


def test_a_message_is_found_by_its_body_with_subject_sender_and_date(engine: SearchEngine) -> None:
    hits = engine.search("define _GNU_SOURCE before including stdio to get getline", k=5).hits
    assert hits and hits[0].path == REPLY
    top = hits[0]
    assert top.title == "[notmuch] Mac OS X/Darwin compatibility issues"
    assert top.author == "Alexander Botero-Lowry"
    assert top.folder == "default"
    assert top.file_type == "email"
    assert top.modified is not None and top.modified.date().isoformat() == "2009-11-18"
    # the header is embedded: a sender's name finds their mail
    by_name = engine.search("Olivier Berger", k=3).hits
    assert by_name and by_name[0].author == "Olivier Berger"


def test_the_cli_prints_a_message_hit_with_sender_date_and_folder(
    indexed: tuple[RaglineConfig, Path, dict],
) -> None:
    from click.testing import CliRunner

    from ragline.cli import cli

    config_path = str(indexed[0].config_path)
    query = "define _GNU_SOURCE before including stdio to get getline"
    args = [
        "--config",
        config_path,
        "search",
        query,
        "--k",
        "1",
        "--from",
        "Alexander Botero-Lowry",
    ]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0].strip()
    assert first.startswith(
        "1. [notmuch] Mac OS X/Darwin compatibility issues  mail · Alexander Botero-Lowry · "
        "2009-11-18 · default"
    ), result.output
    unknown = CliRunner().invoke(cli, [*args[:4], "--from", "alexander@botero-lowry.con"])
    assert unknown.exit_code != 0 and "no indexed message is from" in unknown.output


def test_a_reply_is_not_found_by_what_it_quotes_but_shows_it(
    indexed: tuple[RaglineConfig, Path, dict], engine: SearchEngine
) -> None:
    # "arisen" is in Jjgod Jiang's message (31) and quoted by Alexander's reply (34)
    hits = engine.search("arisen", k=10, mode="bm25").hits
    assert {h.path for h in hits} == {"default/31"}
    assert hits[0].author == "Jjgod Jiang"  # the message that said it
    store = engine.store
    doc_id = store.read("documents", where=f"path = {sql_string(REPLY)}", columns=["doc_id"])
    chunks = store.read(
        "staged_chunks", where=f"doc_id = {sql_string(doc_id.column('doc_id')[0].as_py())}"
    ).to_pylist()
    assert chunks and not any("arisen" in str(c.get("text") or c.get("embed_text")) for c in chunks)
    opened = RaglineService(indexed[0]).open(LOCAL, source="mail", path=REPLY, max_lines=400)
    assert "several issues" in opened.text and "_GNU_SOURCE" in opened.text


def test_a_pdf_attachment_is_searchable_and_linked_with_its_message(
    indexed: tuple[RaglineConfig, Path, dict], engine: SearchEngine
) -> None:
    hits = engine.search("comité de démolition procès-verbal séance publique", k=5).hits
    assert hits and hits[0].path == PDF_KEY
    assert hits[0].file_type == "pdf" and hits[0].folder == "Inbox"
    assert hits[0].author == "Carol Example"
    service = RaglineService(indexed[0])
    attachment = service.neighbors(LOCAL, source="mail", path=PDF_KEY)
    assert [link.resolved.path for link in attachment.links if link.resolved] == ["minutes.eml"]
    message = service.neighbors(LOCAL, source="mail", path="minutes.eml")
    assert PDF_KEY in {link.resolved.path for link in message.links if link.resolved}
    # the message links to the attachment: a backlink of the attachment
    assert "minutes.eml" in {b.source_note.path for b in attachment.backlinks}


def test_filters_by_sender_recipient_and_folder(engine: SearchEngine) -> None:
    carl = engine.search(
        "notmuch", k=10, filters=SearchFilters(senders=("cworth@cworth.org",))
    ).hits
    assert carl and all(h.author == "Carl Worth" for h in carl)
    by_name = engine.search("notmuch", k=10, filters=SearchFilters(senders=("Carl Worth",))).hits
    assert {h.path for h in by_name} == {h.path for h in carl}
    dave = engine.search(
        "minutes", k=10, filters=SearchFilters(recipients=("dave@example.org",))
    ).hits
    assert dave and {h.path for h in dave} <= {"minutes.eml", PDF_KEY}
    nested = engine.search("notmuch", k=20, filters=SearchFilters(folders=("default/foo",))).hits
    assert nested and all(h.folder.startswith("default/foo") for h in nested)  # type: ignore[union-attr]
    assert any(h.folder == "default/foo/baz" for h in nested)  # folder_in: the nested ones too
    series = engine.search("patch", k=10, filters=SearchFilters(folders=("series",))).hits
    assert series and all(h.path.startswith("series.mbox/") for h in series)


def test_a_thread_is_a_messages_neighbors(indexed: tuple[RaglineConfig, Path, dict]) -> None:
    thread = RaglineService(indexed[0]).neighbors(LOCAL, source="mail", path=REPLY).thread
    paths = {m.path for m in thread}
    assert REPLY in paths and len(paths) >= 3
    assert {m.sender for m in thread} >= {"Jjgod Jiang", "Alexander Botero-Lowry"}


@pytest.fixture(scope="module")
def threads(tmp_path_factory: pytest.TempPathFactory) -> tuple[RaglineConfig, Path]:
    """notmuch's default/ and threading/ corner cases (a ghost root, a reply whose
    References skip its parent) and the LKML mbox, indexed together."""
    root = tmp_path_factory.mktemp("mail-threads")
    mail = root / "mail"
    shutil.copytree(NOTMUCH / "default", mail / "default")
    shutil.copytree(NOTMUCH / "threading", mail / "threading")
    shutil.copyfile(EMAIL / "lkml-from-notmuch.mbox", mail / "lkml.mbox")
    source = {"name": "mail", "kind": "mail", "path": str(mail)}
    config = parse_config_file(write_config(root, [source], root / "data"))
    index(config)
    return config, mail


def test_every_thread_equals_a_union_find_over_the_raw_headers(
    threads: tuple[RaglineConfig, Path],
) -> None:
    """The oracle: Message-ID / In-Reply-To / References of every message, read with
    the standard library's mailbox and email modules and joined by union-find (ids
    need an "@")."""
    import mailbox
    from email import policy
    from email.parser import BytesHeaderParser

    config, mail = threads
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    def ids(value: object) -> list[str]:
        return [i.strip("<>") for i in str(value or "").split() if "@" in i]

    parser = BytesHeaderParser(policy=policy.compat32)
    files = [p for p in mail.rglob("*") if p.is_file() and p.suffix != ".mbox"]
    messages = [parser.parsebytes(p.read_bytes()) for p in files]
    messages += list(mailbox.mbox(mail / "lkml.mbox"))
    for headers in messages:
        own = ids(headers["message-id"])
        if not own:
            continue
        for other in ids(headers["in-reply-to"]) + ids(headers["references"]):
            parent[find(other)] = find(own[0])
    store = SearchEngine(config).store
    rows = store.read(
        "documents", where="file_type = 'email'", columns=["path", "facets"]
    ).to_pylist()
    service = RaglineService(config)
    checked = 0
    for row in rows:
        own = next(
            (f[len("message_id:") :] for f in row["facets"] if f.startswith("message_id:")), None
        )
        if own is None:
            continue
        thread = service.neighbors(LOCAL, source="mail", path=row["path"]).thread
        got = {m.message_id for m in thread}
        indexed_ids = {
            f[len("message_id:") :]
            for r in rows
            for f in r["facets"]
            if f.startswith("message_id:")
        }
        expected = {i for i in indexed_ids if find(i) == find(own)}
        assert got == expected, row["path"]
        checked += 1
    assert checked >= 250  # every message with an id: default/, threading/, LKML's 210


def test_a_broken_message_is_recorded_and_the_source_succeeds(
    indexed: tuple[RaglineConfig, Path, dict],
) -> None:
    config, _mail, _metadata = indexed
    issues = {i.path: i for i in index_status(config).sources[0].issues}
    assert "broken/9.broken" in issues and "broken message" in issues["broken/9.broken"].message
    store = SearchEngine(config).store
    documents = store.count("documents", "file_type = 'email'")
    assert documents == 53 + 3 + 1  # Maildir default/ (53), the mbox (3), the .eml


def test_an_appended_message_is_the_only_one_indexed(tmp_path: Path) -> None:
    data = (EMAIL / "lkml-from-notmuch.mbox").read_bytes()
    cut = data.index(b"\nFrom ", 30_000) + 1
    end = data.index(b"\nFrom ", cut + 10) + 1
    mail = tmp_path / "mail"
    mail.mkdir()
    (mail / "lkml.mbox").write_bytes(data[:cut])
    config = parse_config_file(
        write_config(tmp_path, [{"name": "lkml", "kind": "mail", "path": str(mail)}])
    )
    first = index(config)
    before = first["parsed_documents"]["new"]
    assert before >= 5
    with (mail / "lkml.mbox").open("ab") as handle:
        handle.write(data[cut:end])
    pending = index_status(config).sources[0].pending  # status lists mail from the cache
    assert pending is not None and (pending.new, pending.changed, pending.deleted) == (1, 0, 0)
    second = index(config)
    assert second["parsed_documents"]["new"] == 1, second["parsed_documents"]
    state = IndexLayout(config.data_dir).source_state_dir("lkml")
    assert mbox_cache(state, "lkml.mbox")["last_read"] == {
        "mode": "tail", "from": data.rindex(b"\nFrom ", 0, cut - 1) + 1, "size": end,
    }  # fmt: skip
    store = SearchEngine(config).store
    assert store.count("documents", "file_type = 'email'") == before + 1


def test_a_deleted_maildir_message_disappears_from_search(tmp_path: Path) -> None:
    mail = tmp_path / "mail"
    for name in ("29:2,", "34:2,", "40:2,"):
        (mail / "cur").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(NOTMUCH / "default" / "cur" / name, mail / "cur" / name)
    config = parse_config_file(
        write_config(tmp_path, [{"name": "box", "kind": "mail", "path": str(mail)}])
    )
    index(config)
    query = "define _GNU_SOURCE before including stdio to get getline"
    assert SearchEngine(config).search(query, k=3).hits[0].path == "34"
    (mail / "cur" / "34:2,").unlink()
    index(config)
    engine = SearchEngine(config)
    assert "34" not in {h.path for h in engine.search(query, k=10).hits}
    paths = set(engine.store.read("documents", columns=["path"]).column("path").to_pylist())
    assert paths == {"29", "40"}
    assert engine.store.count("files", f"path = {sql_string('34')}") == 0
