"""Issue 27, items 6-8: one date per item, the same in the hit, the filters and the
text (a commit's author date, a note's own date), and a tree of Maildirs detected
as mail. Real git repositories (built with git, author and committer dates apart),
real notes indexed through Dagster, LanceDB and Tantivy, the real notmuch corpus."""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_serving.config import RaglineConfig, detect_kind, parse_config_file
from rag_serving.index.filters import parse_date
from rag_serving.search import SearchFilters
from rag_serving.search.engine import SearchEngine
from rag_sources.formats.markdown import note_date_from_name, parse_markdown
from rag_sources.kinds.git.kind import commit_document
from rag_sources.kinds.git.repository import open_repository
from rag_sources.where import sql_string
from ragline.cli import cli
from tests.conftest import SHARED_DATA, build_index, write_config
from tests.git_repos import ALICE, BOB, git, head_sha, identity_env, init_repo, write_files

NOTMUCH = SHARED_DATA / "corpora" / "email" / "notmuch-corpora"


def day(text: str) -> datetime:
    return parse_date(text, "--after")


def commit_dated(
    path: Path,
    message: str,
    files: dict[str, str],
    authored: str,
    committed: str | None = None,
    author: tuple[str, str] = ALICE,
    committer: tuple[str, str] | None = None,
) -> str:
    """A commit whose author and committer dates may differ (a rebase, `git am`, a
    cherry-pick): the author's date is when it was written."""
    write_files(path, files)
    git(path, "add", "-A")
    env = identity_env(author, authored, committer)
    env["GIT_COMMITTER_DATE"] = committed or authored
    git(path, "commit", "-q", "-m", message, env=env)
    return head_sha(path)


# --- item 6: a commit is dated by its author date, everywhere ----------------------------


@pytest.fixture(scope="module")
def applied_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[RaglineConfig, Path, dict]:
    """psf/requests 96ba401c in small: written 2024-09-25, applied 2025-06-04 by another."""
    root = tmp_path_factory.mktemp("dated-repo")
    repo = init_repo(root / "repo")
    shas = {
        "base": commit_dated(
            repo, "Add the session adapter", {"adapter.py": "def send():\n    return 1\n"},
            "2024-09-20T09:00:00-04:00",
        ),
        "applied": commit_dated(
            repo,
            "Strip the proxy authorization header on a cross-host redirect",
            {"adapter.py": "def send():\n    return 2  # proxy header stripped\n"},
            "2024-09-25T14:07:00+02:00",
            "2025-06-04T09:00:00+00:00",
            ALICE,
            BOB,
        ),
        "later": commit_dated(
            repo, "Document the retry budget", {"README.md": "# Retries\n\nA budget.\n"},
            "2025-06-05T10:00:00+00:00",
        ),
    }  # fmt: skip
    source = {"name": "code", "kind": "git", "path": str(repo), "history_months": 0}
    config = build_index(write_config(root, [source], root / "data"))
    return config, repo, shas


def test_a_commit_document_shows_both_dates_when_they_differ(applied_repo) -> None:
    _, repo, shas = applied_repo
    reader = open_repository(repo)
    applied = commit_document(reader.commit(shas["applied"]))
    header = applied.body.split("\n\n", 1)[1]
    assert "Author: Alice Martin <alice@example.com>" in header
    assert "Date: 2024-09-25T14:07+02:00" in header
    assert "Committer: Bob Chen <bob@example.com>" in header
    assert "Committed: 2025-06-04T09:00+00:00" in header
    assert applied.metadata["date"] == "2024-09-25T14:07:00+02:00"
    assert applied.metadata["committed"] == "2025-06-04T09:00:00+00:00"
    same = commit_document(reader.commit(shas["later"]))
    assert "Committed:" not in same.body and "Committer:" not in same.body


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_a_commit_is_found_and_filtered_by_its_author_date(applied_repo, mode: str) -> None:
    config, _, shas = applied_repo
    engine = SearchEngine(config)
    commits = SearchFilters(types=("commit",))
    query = "proxy authorization header redirect"

    def found(**dates: datetime) -> dict[str, datetime | None]:
        filters = SearchFilters(types=("commit",), **dates)  # type: ignore[arg-type]
        hits = engine.search(query, k=10, mode=mode, filters=filters).hits  # type: ignore[arg-type]
        return {h.path.rsplit("/", 1)[-1]: h.modified for h in hits}

    every = found()
    assert every[shas["applied"]] is not None
    assert every[shas["applied"]].date() == date(2024, 9, 25)  # not 2025-06-04
    assert shas["applied"] in found(before=day("2025-01-01"))
    assert shas["applied"] not in found(after=day("2025-01-01"))
    assert shas["later"] in found(after=day("2025-01-01"))
    row = engine.store.read(
        "documents", where=f"path = {sql_string('.git/commits/' + shas['applied'])}"
    ).to_pylist()[0]
    assert row["modified"] == datetime(2024, 9, 25, 12, 7, tzinfo=UTC)
    assert commits.types == ("commit",)


def test_the_cli_hit_line_shows_the_author_date(applied_repo) -> None:
    config, _, shas = applied_repo
    result = CliRunner().invoke(
        cli,
        ["--config", str(config.config_path), "search", "proxy authorization redirect",
         "--type", "commit", "--before", "2025-01-01"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"code@{shas['applied'][:10]} · 2024-09-25 · Alice Martin" in result.output


def test_the_history_window_keeps_commits_authored_in_it(tmp_path: Path) -> None:
    """The window is by author date (the date shown and filtered on); the walk goes by
    commit date, so old commits applied lately neither enter nor end the window."""
    path = init_repo(tmp_path / "rebased")
    commit_dated(path, "January", {"a.txt": "1\n"}, "2024-01-10T00:00:00+00:00")
    february = commit_dated(path, "February", {"a.txt": "2\n"}, "2024-02-15T00:00:00+00:00")
    applied = [
        commit_dated(
            path, f"Old patch {i}", {"a.txt": f"old {i}\n"},
            "2023-05-01T00:00:00+00:00", f"2024-03-0{i + 1}T00:00:00+00:00",
        )
        for i in range(6)
    ]  # fmt: skip
    april = commit_dated(path, "April", {"a.txt": "4\n"}, "2024-04-10T00:00:00+00:00")
    repo = open_repository(path)
    since = datetime(2024, 2, 1, tzinfo=UTC)
    window = repo.commit_ids(april, since=since)
    assert [sha for sha, _ in window] == [april, february]
    assert not set(applied) & {sha for sha, _ in window}
    # the dates given are the author dates
    assert dict(window)[february] == datetime(2024, 2, 15, tzinfo=UTC)
    # every commit without a window, newest applied first, each with its author date
    everything = dict(repo.commit_ids(april))
    assert everything[applied[-1]] == datetime(2023, 5, 1, tzinfo=UTC)


# --- item 7: a note's date is its own ----------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("Journal/2024-01-15.md", date(2024, 1, 15)),
        ("2024-01-15 Meeting.md", date(2024, 1, 15)),
        ("Meetings/Standup 2024-01-15.md", date(2024, 1, 15)),
        ("_posts/2024-01-15-hello-world.md", date(2024, 1, 15)),  # Jekyll
        ("journals/2024_01_15.md", date(2024, 1, 15)),  # Logseq
        ("2024.01.15.md", date(2024, 1, 15)),
        ("20240115.md", date(2024, 1, 15)),
        ("Weekly/2024-W03.md", date(2024, 1, 15)),  # the Monday of ISO week 3
        ("2020-W53.md", date(2020, 12, 28)),
        ("Monthly/2024-01.md", date(2024, 1, 1)),
        ("2024-Q2.md", date(2024, 4, 1)),
        ("1984.md", None),  # a year alone is a title (the novel), not a date
        ("2024-02-30.md", None),
        ("2024-13-01.md", None),
        ("2023-W53.md", None),  # 2023 has 52 ISO weeks
        ("v2.0.1.md", None),
        ("202401151230 Zettel.md", None),  # a 12-digit id is not read as a day
        ("Budget 2024-2025.md", None),
        ("2024-01-15/Notes.md", None),  # folders do not date the note
    ],
)
def test_a_date_in_a_notes_file_name(path: str, expected: date | None) -> None:
    found = note_date_from_name(path)
    if expected is None:
        assert found is None
    else:
        assert found == datetime.combine(expected, datetime.min.time(), UTC)


def test_frontmatter_date_comes_before_created_and_an_unreadable_one_falls_through() -> None:
    note = parse_markdown(b"---\ncreated: 2024-01-10\ndate: 2024-01-15\n---\nx\n", "a.md")
    assert note.created == datetime(2024, 1, 15, tzinfo=UTC)
    note = parse_markdown(b"---\ndate: next tuesday\ncreated: 2024-01-10\n---\nx\n", "a.md")
    assert note.created == datetime(2024, 1, 10, tzinfo=UTC)
    assert any("'date' is not a date" in w for w in note.warnings)


def test_a_clips_published_day_dates_it_and_a_published_flag_is_passed_over() -> None:
    clip = b"---\npublished: 2019-06-01\ncreated: 2026-11-27\n---\nx\n"  # Web Clipper's keys
    assert parse_markdown(clip, "a.md").created == datetime(2019, 6, 1, tzinfo=UTC)
    post = parse_markdown(b"---\npublished: false\ncreated: 2024-01-10\n---\nx\n", "a.md")
    assert post.created == datetime(2024, 1, 10, tzinfo=UTC) and not post.warnings


EDITED_LATER = datetime(2026, 2, 1, tzinfo=UTC).timestamp()
UNDATED_MTIME = datetime(2025, 5, 5, tzinfo=UTC).timestamp()
NOTES = {
    "Journal/2024-01-15.md": ("# Standup\n\nThe zeppelin supplier was chosen.\n", EDITED_LATER),
    # the same bytes under another day's name: a reused parse keeps its own date
    "Journal/2024-01-16.md": ("# Standup\n\nThe zeppelin supplier was chosen.\n", EDITED_LATER),
    "Meetings/2024-01-15 Budget review.md": (
        "# Budget\n\nThe zeppelin hangar costs more.\n", EDITED_LATER,
    ),
    "Weekly/2024-W03.md": ("# Week\n\nZeppelin test flights all week.\n", EDITED_LATER),
    "Trips/Lisbon.md": (
        "---\ndate: 2023-06-01\n---\n# Lisbon\n\nA zeppelin over the Tagus.\n", EDITED_LATER,
    ),
    "Trips/2024-01-15 Porto.md": (  # the frontmatter wins over the name
        "---\ncreated: 2022-02-02\n---\n# Porto\n\nNo zeppelin in Porto.\n", EDITED_LATER,
    ),
    "Ideas/Zeppelin plan.md": ("# Plan\n\nBuild a zeppelin museum.\n", UNDATED_MTIME),
}  # fmt: skip
NOTE_DATES = {
    "Journal/2024-01-15.md": date(2024, 1, 15),
    "Journal/2024-01-16.md": date(2024, 1, 16),
    "Meetings/2024-01-15 Budget review.md": date(2024, 1, 15),
    "Weekly/2024-W03.md": date(2024, 1, 15),
    "Trips/Lisbon.md": date(2023, 6, 1),
    "Trips/2024-01-15 Porto.md": date(2022, 2, 2),
    "Ideas/Zeppelin plan.md": date(2025, 5, 5),  # no date of its own: the file's mtime
}


@pytest.fixture(scope="module")
def dated_notes(tmp_path_factory: pytest.TempPathFactory) -> tuple[RaglineConfig, Path]:
    vault = tmp_path_factory.mktemp("dated-vault")
    for rel, (text, mtime) in NOTES.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        os.utime(path, (mtime, mtime))
    root = tmp_path_factory.mktemp("dated-index")
    source = {"name": "vault", "kind": "markdown", "path": str(vault)}
    return build_index(write_config(root, [source], root / "data")), vault


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_a_note_is_shown_and_filtered_by_its_own_date(dated_notes, mode: str) -> None:
    config, _ = dated_notes
    engine = SearchEngine(config)

    def found(**dates: datetime) -> dict[str, date | None]:
        hits = engine.search(
            "zeppelin",
            k=20,
            mode=mode,
            filters=SearchFilters(**dates),  # type: ignore[arg-type]
        ).hits
        return {h.path: h.modified.date() if h.modified else None for h in hits}

    assert found() == NOTE_DATES
    early = {p for p, d in NOTE_DATES.items() if d < date(2024, 2, 1)}
    assert set(found(before=day("2024-02-01"))) == early
    assert set(found(after=day("2024-01-15"), before=day("2024-01-16"))) == {
        "Journal/2024-01-15.md", "Meetings/2024-01-15 Budget review.md", "Weekly/2024-W03.md",
    }  # fmt: skip
    assert set(found(after=day("2025-01-01"))) == {"Ideas/Zeppelin plan.md"}


def test_staleness_still_compares_the_files_mtime(dated_notes) -> None:
    """A note dated by its name is not "modified" because its date is not its mtime;
    an edit after indexing still marks it stale."""
    config, vault = dated_notes
    engine = SearchEngine(config)
    hits = engine.search("zeppelin", k=20, mode="bm25").hits
    assert hits and all(h.stale is None for h in hits)
    daily = vault / "Journal" / "2024-01-15.md"
    saved = daily.read_bytes(), daily.stat().st_mtime
    try:
        daily.write_text("# Standup\n\nThe zeppelin supplier was replaced.\n", encoding="utf-8")
        stale = {h.path: h.stale for h in engine.search("zeppelin", k=20, mode="bm25").hits}
        assert stale["Journal/2024-01-15.md"] == "modified"
        assert stale["Journal/2024-01-16.md"] is None
    finally:
        daily.write_bytes(saved[0])
        os.utime(daily, (saved[1], saved[1]))


# --- siblings: a feed entry is dated by when it was published --------------------------

ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Airship log</title>
  <id>urn:airship-log</id>
  <updated>2024-06-01T08:00:00Z</updated>
  <entry>
    <title>The first airship hangar opens</title>
    <id>urn:airship-log:hangar</id>
    <link href="https://example.org/hangar"/>
    <published>2020-01-01T10:00:00Z</published>
    <updated>2024-06-01T08:00:00Z</updated>
    <content type="text">The airship hangar opened its doors; a typo was fixed years later.</content>
  </entry>
  <entry>
    <title>Airship mooring mast repaired</title>
    <id>urn:airship-log:mast</id>
    <link href="https://example.org/mast"/>
    <published>2023-03-03T10:00:00Z</published>
    <content type="text">The airship mooring mast was repaired after the storm.</content>
  </entry>
</feed>
"""


def test_a_feed_entry_is_shown_and_filtered_by_its_published_date(tmp_path: Path) -> None:
    """Like a commit's author date: a later revision (``updated``) does not move it."""
    feed = tmp_path / "airship.atom"
    feed.write_text(ATOM, encoding="utf-8")
    source = {"name": "news", "kind": "feeds", "urls": [str(feed)]}
    config = build_index(write_config(tmp_path, [source], tmp_path / "data"))
    engine = SearchEngine(config)

    def found(**dates: datetime) -> dict[str, date | None]:
        filters = SearchFilters(**dates)  # type: ignore[arg-type]
        hits = engine.search("airship hangar mooring mast", k=10, filters=filters).hits
        return {h.title: h.modified.date() if h.modified else None for h in hits}

    assert found() == {
        "The first airship hangar opens": date(2020, 1, 1),
        "Airship mooring mast repaired": date(2023, 3, 3),
    }
    assert set(found(before=day("2021-01-01"))) == {"The first airship hangar opens"}
    assert set(found(after=day("2024-01-01"))) == set()
    [body] = (
        engine.store.read(
            "documents", where="title = 'The first airship hangar opens'", columns=["body"]
        )
        .column("body")
        .to_pylist()
    )
    assert "Published: 2020-01-01T10:00+00:00" in body and "Updated: 2024-06-01T08:00" in body


# --- item 8: a tree of Maildirs is mail ------------------------------------------------


def maildir(path: Path, messages: int, parts: tuple[str, ...] = ("cur", "new", "tmp")) -> None:
    for part in parts:
        (path / part).mkdir(parents=True, exist_ok=True)
    for i in range(messages):
        name = f"17000000{i:02d}.M{i}P42.host:2,S"
        (path / parts[0] / name).write_bytes(b"From: a@example.org\nSubject: hi\n\nbody\n")


def test_the_notmuch_corpus_a_tree_of_nested_maildirs_is_mail() -> None:
    kind, why = detect_kind(NOTMUCH)
    assert kind == "mail", why
    assert "Maildirs" in why and "lkml" in why and str(SHARED_DATA) not in why


def test_an_mbsync_tree_of_maildirs_is_mail(tmp_path: Path) -> None:
    mail = tmp_path / "Mail"
    for account in ("work", "home"):
        for folder in ("INBOX", "Sent", "Archive/2023"):
            maildir(mail / account / folder, 3)
    (mail / "work" / ".mbsyncstate").write_text("state")
    kind, why = detect_kind(mail)
    assert kind == "mail", why
    assert "6 Maildirs" in why and "18 of 18 files are mail" in why, why


def test_maildir_plus_plus_dot_folders_are_seen(tmp_path: Path) -> None:
    root = tmp_path / "account"
    for folder in (".INBOX", ".Sent", ".Lists.linux"):
        maildir(root / folder, 2, ("cur",))
    (root / "subscriptions").write_text("INBOX\nSent\n")  # no suffix: not counted
    kind, why = detect_kind(root)
    assert kind == "mail", why
    assert "3 Maildirs" in why and ".Lists.linux" in why, why


def test_a_maildir_under_a_home_folder_of_documents_is_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for i in range(40):
        (home / "Documents" / f"report {i}.pdf").parent.mkdir(parents=True, exist_ok=True)
        (home / "Documents" / f"report {i}.pdf").write_bytes(b"%PDF-1.4\n")
    maildir(home / "Mail" / "INBOX", 5)
    kind, why = detect_kind(home)
    assert kind == "documents", why
    assert "1 Maildir" in why and "Mail/INBOX" in why and "--kind mail" in why, why


def test_a_folder_named_new_or_cur_among_documents_is_not_a_maildir(tmp_path: Path) -> None:
    docs = tmp_path / "Projects"
    for rel in ("new/plan.docx", "new/budget.xlsx", "old/plan.docx", "cur/notes.txt"):
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_bytes(b"x")
    kind, why = detect_kind(docs)
    assert kind == "documents", why
    # a Maildir at the top: cur/ with new/ or tmp/, or cur/ with messages named as Maildir's
    top = tmp_path / "Maildir"
    maildir(top, 1, ("cur", "new", "tmp"))
    assert detect_kind(top) == ("mail", "found cur/, new/ and tmp/: a Maildir")


def test_detection_is_bounded_on_a_huge_tree(tmp_path: Path) -> None:
    wide = tmp_path / "huge"
    for i in range(100):
        folder = wide / f"folder {i:03d}"
        folder.mkdir(parents=True)
        for j in range(20):
            (folder / f"file {j}.txt").write_bytes(b"")
    deep = wide / "zz"
    for i in range(12):
        deep = deep / f"level{i}"
    maildir(deep, 3)  # too deep to be looked for
    started = time.perf_counter()
    kind, why = detect_kind(wide, max_entries=500)
    elapsed = time.perf_counter() - started
    assert kind == "documents", why
    assert "stopped looking after 500 entries" in why, why
    assert elapsed < 2.0
    kind, why = detect_kind(wide)
    assert kind == "documents" and "Maildir" not in why, why


def test_init_and_sources_add_call_the_notmuch_corpus_mail(tmp_path: Path) -> None:
    corpus = tmp_path / "notmuch"
    shutil.copytree(NOTMUCH, corpus)
    config = tmp_path / "ragline.toml"
    result = CliRunner().invoke(cli, ["init", str(corpus), "-o", str(config)])
    assert result.exit_code == 0, result.output
    assert "Source kind: mail (found " in result.output and "Maildirs" in result.output
    assert parse_config_file(config).sources[0].kind == "mail"
    other = tmp_path / "second"
    shutil.copytree(NOTMUCH / "default", other)
    result = CliRunner().invoke(cli, ["--config", str(config), "sources", "add", str(other)])
    assert result.exit_code == 0, result.output
    assert "kind mail (found " in result.output, result.output
