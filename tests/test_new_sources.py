"""`ragline init` and `ragline sources add` for the mail, feeds and Calibre kinds:
what they detect from a folder, a file or a URL, and that the block they write loads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_serving.config import parse_config_file
from rag_sources.kinds.feeds.config import FeedsSourceConfig
from ragline.cli import cli
from tests.conftest import write_config


def init(tmp_path: Path, target: str, *extra: str) -> tuple[int, str, Path]:
    config = tmp_path / "ragline.toml"
    result = CliRunner().invoke(cli, ["init", target, "-o", str(config), "--force", *extra])
    return result.exit_code, result.output, config


def test_a_feed_url_becomes_a_feeds_source_named_after_its_host(tmp_path: Path) -> None:
    code, output, config_path = init(tmp_path, "https://blog.example.org/feed.xml")
    assert code == 0, output
    assert "Source kind: feeds (an http(s) URL: a feed)" in output
    [source] = parse_config_file(config_path).sources
    assert isinstance(source, FeedsSourceConfig)
    assert source.name == "blog-example-org" and source.path is None
    assert source.urls == ["https://blog.example.org/feed.xml"]


def test_an_opml_file_becomes_a_feeds_source_reading_it(tmp_path: Path) -> None:
    opml = tmp_path / "subscriptions.opml"
    opml.write_text('<opml version="2.0"><body><outline xmlUrl="https://a.org/rss"/></body></opml>')
    code, output, config_path = init(tmp_path, str(opml))
    assert code == 0, output
    [source] = parse_config_file(config_path).sources
    assert source.kind == "feeds" and source.opml == opml and source.urls == []


def test_an_mbox_file_a_maildir_and_a_calibre_library_are_detected(tmp_path: Path) -> None:
    mbox = tmp_path / "Inbox"  # Thunderbird: an mbox without a suffix
    mbox.write_bytes(b"From alice@example.org Mon Jan  1 00:00:00 2024\nSubject: hi\n\nbody\n")
    code, output, config_path = init(tmp_path, str(mbox))
    assert code == 0 and "Source kind: mail (an mbox file)" in output, output
    [source] = parse_config_file(config_path).sources
    assert source.kind == "mail" and source.path == mbox and source.name == "inbox"

    maildir = tmp_path / "Mail"
    (maildir / "cur").mkdir(parents=True)
    code, output, _ = init(tmp_path, str(maildir))
    assert code == 0 and "Source kind: mail (found cur/: a Maildir)" in output, output

    library = tmp_path / "Calibre Library"
    library.mkdir()
    sqlite3.connect(library / "metadata.db").close()
    code, output, config_path = init(tmp_path, str(library))
    assert code == 0 and "Source kind: calibre" in output, output
    assert parse_config_file(config_path).sources[0].name == "calibre-library"


def test_a_plain_file_is_refused_with_what_to_give(tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("not mail")
    code, output, _ = init(tmp_path, str(note))
    assert code == 2
    assert "a file, not a folder; give the folder that holds it" in output


def test_a_url_of_another_scheme_is_refused(tmp_path: Path) -> None:
    code, output, _ = init(tmp_path, "ftp://example.org/feed.xml", "--kind", "feeds")
    assert code == 2
    assert "not a folder, a file or an http(s) URL" in output


def test_sources_add_appends_a_feed_named_after_its_host(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    config_path = write_config(
        tmp_path, [{"name": "notes", "kind": "markdown", "path": str(vault)}], tmp_path / "d"
    )
    runner = CliRunner()
    result = runner.invoke(
        cli, ["--config", str(config_path), "sources", "add", "http://127.0.0.1:9/atom.xml"]
    )
    assert result.exit_code == 0, result.output
    assert "Added source '127-0-0-1': kind feeds" in result.output
    again = runner.invoke(
        cli, ["--config", str(config_path), "sources", "add", "http://127.0.0.1:9/atom.xml"]
    )
    assert again.exit_code == 2 and "a source named '127-0-0-1' exists" in again.output
    config = parse_config_file(config_path)
    assert [s.kind for s in config.sources] == ["markdown", "feeds"]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ('kind = "feeds"', "lists no feeds: give urls"),
        ('kind = "feeds"\nurls = ["gopher://x.org/feed"]', "is not a feed URL ragline can fetch"),
        ('kind = "calibre"\npath = "."\nformats = []', "give at least one book format"),
    ],
)
def test_bad_new_kind_settings_are_one_line_errors(
    tmp_path: Path, block: str, message: str
) -> None:
    config_path = tmp_path / "ragline.toml"
    config_path.write_text(f'[[sources]]\nname = "s"\n{block}\n')
    result = CliRunner().invoke(cli, ["--config", str(config_path), "status"])
    assert result.exit_code == 2
    assert message in result.output and str(config_path) in result.output


def test_a_missing_opml_file_and_a_folder_without_metadata_db_are_named(tmp_path: Path) -> None:
    config_path = tmp_path / "ragline.toml"
    config_path.write_text(
        '[[sources]]\nname = "f"\nkind = "feeds"\nopml = "gone.opml"\n'
        '[[sources]]\nname = "books"\nkind = "calibre"\npath = "."\n'
    )
    result = CliRunner().invoke(cli, ["--config", str(config_path), "index"])
    assert result.exit_code == 2
    assert f"sources[0].opml: source 'f': {tmp_path / 'gone.opml'} does not exist" in result.output
    assert "is not a Calibre library (no metadata.db in it)" in result.output
