"""The mail reader on real corpora (corpora/email): finding mailboxes, keys and
folders, splitting mbox files and reading them from the tail, the caches, charsets
and broken headers, quotes and signatures, threads, attachments, the change signal."""

from __future__ import annotations

import mailbox
import os
import re
import shutil
from pathlib import Path

import pytest

from rag_sources.formats.model import ItemError, ParseOptions
from rag_sources.kinds.mail.config import MailSourceConfig
from rag_sources.kinds.mail.kind import MailKind
from rag_sources.kinds.mail.listing import folder_name, list_mail_items, mbox_cache, scan_mail
from rag_sources.kinds.mail.mbox import message_bytes, split_mbox
from rag_sources.kinds.mail.message import read_message
from rag_sources.kinds.mail.quotes import QUOTE, SIGNATURE, TEXT, split_text
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.shared_data

EMAIL = SHARED_DATA / "corpora" / "email"
NOTMUCH = EMAIL / "notmuch-corpora"
LKML_MBOX = EMAIL / "lkml-from-notmuch.mbox"


def mail_config(path: Path, **extra: object) -> MailSourceConfig:
    return MailSourceConfig(name="mail", kind="mail", path=path, **extra)  # type: ignore[arg-type]


def kind_for(path: Path, state: Path, **extra: object) -> MailKind:
    return MailKind(mail_config(path, **extra), state)


def copy_maildir_message(source: Path, target_dir: Path, name: str) -> Path:
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / name
    shutil.copyfile(source, target)
    return target


# ---- finding mailboxes, keys and folders ---------------------------------------------


def test_notmuch_maildirs_with_cur_only_nested_folders_and_loose_files(tmp_path: Path) -> None:
    listing = scan_mail(mail_config(NOTMUCH), tmp_path / "state")
    entries = {e.key: e for e in listing.entries}
    # lkml/ has cur/ only (no new/, no tmp/): all 210 messages, keyed by unique name
    lkml = [e for e in listing.entries if e.folder == "lkml"]
    assert len(lkml) == 210
    assert all(e.key.startswith("lkml/") and ":2," not in e.key for e in lkml)
    # nested Maildirs: default/foo/baz has cur/ and new/; its loose files are messages too
    assert entries["default/foo/baz/13"].path == "default/foo/baz/cur/13:2,"
    assert entries["default/foo/baz/15"].path == "default/foo/baz/new/15:2,"
    assert entries["default/foo/baz/11:2,"].folder == "default/foo/baz"
    assert {e.folder for e in listing.entries if e.key.startswith("default/")} == {
        "default", "default/bar", "default/bar/baz", "default/foo", "default/foo/baz",
    }  # fmt: skip
    # .eml files and extension-less messages (notmuch style); README and COPYING are not mail
    assert "crypto/basic-encrypted.eml" in entries and "threading/ghost-root/child" in entries
    assert not any(k.startswith(("README", "COPYING", "SOURCE_COMMIT")) for k in entries)
    # a file that starts with an mbox "From " line is an mbox of one message
    patch = [e for e in listing.entries if e.path.startswith("indexing/PATCH-1-2")]
    assert len(patch) == 1 and patch[0].form == "mbox"
    assert all(e.mtime_ns is None for e in list_mail_items(mail_config(NOTMUCH), None))


def test_folder_names_of_each_client_layout() -> None:
    assert folder_name("lkml.mbox", "mbox") == "lkml"
    assert (
        folder_name("Mail/Local Folders/Inbox.sbd/Lists", "mbox")
        == "Mail/Local Folders/Inbox/Lists"
    )
    assert folder_name(".Lists.linux", "maildir") == "Lists/linux"
    assert folder_name("", "maildir") == "Inbox"
    assert folder_name("Mailboxes/Work.mbox/1A2B/Data/Messages", "emlx") == "Mailboxes/Work"


def test_thunderbird_profile_apple_mail_and_a_maildir_move_keep_their_keys(tmp_path: Path) -> None:
    lkml = LKML_MBOX.read_bytes()
    one = next(iter(sorted((NOTMUCH / "lkml" / "cur").iterdir())))
    source = tmp_path / "mail"
    # Thunderbird: extension-less mbox files with .msf summaries beside them, X.sbd/ subfolders
    local = source / "Local Folders"
    local.mkdir(parents=True)
    (local / "Inbox").write_bytes(lkml[: lkml.index(b"\nFrom ", 5000) + 1])
    (local / "Inbox.msf").write_bytes(b'// <!-- <mdb:mork:z v="1.4"/> -->\n')
    (local / "Inbox.sbd").mkdir()
    (local / "Inbox.sbd" / "Kernel").write_bytes(lkml[:3000])
    # Apple Mail: <count>\n<message><plist>, under Work.mbox/…/Messages/
    raw = one.read_bytes()
    emlx = source / "Mailboxes" / "Work.mbox" / "Messages"
    emlx.mkdir(parents=True)
    (emlx / "12.emlx").write_bytes(b"%d\n" % len(raw) + raw + b'<?xml version="1.0"?><plist/>')
    (emlx / "13.partial.emlx").write_bytes(b"%d\n" % len(raw) + raw + b"<plist/>")
    # Maildir++ with only cur/
    copy_maildir_message(one, source / ".Lists.linux" / "cur", "1300.M1P2.host:2,S")
    state = tmp_path / "state"
    kind = kind_for(source, state)
    items = {i.key: i for i in kind.list_items()}
    inbox = [k for k in items if k.startswith("Local Folders/Inbox/")]
    assert len(inbox) >= 1 and not any(k.endswith(".msf") or ".msf/" in k for k in items)
    entries = kind.last_listing.by_key()  # type: ignore[union-attr]
    assert entries[inbox[0]].folder == "Local Folders/Inbox"
    kernel = [k for k in items if k.startswith("Local Folders/Inbox.sbd/Kernel/")]
    assert entries[kernel[0]].folder == "Local Folders/Inbox/Kernel"
    assert entries["Mailboxes/Work.mbox/Messages/12.emlx"].folder == "Mailboxes/Work"
    assert entries[".Lists.linux/1300.M1P2.host"].folder == "Lists/linux"
    emlx_doc = kind.parse("Mailboxes/Work.mbox/Messages/12.emlx", ParseOptions())
    assert emlx_doc.title and "plist" not in emlx_doc.body
    before = items[".Lists.linux/1300.M1P2.host"]
    # a flag change (rename) and a move from new/ to cur/ keep the key and fingerprint
    cur = source / ".Lists.linux" / "cur"
    os.rename(cur / "1300.M1P2.host:2,S", cur / "1300.M1P2.host:2,RS")
    after = {i.key: i for i in kind_for(source, state).list_items()}
    assert after[".Lists.linux/1300.M1P2.host"].fingerprint == before.fingerprint
    assert set(after) == set(items)


def test_a_link_leading_out_of_the_source_is_refused_never_read(tmp_path: Path) -> None:
    source = tmp_path / "mail"
    (source / "cur").mkdir(parents=True)
    outside = tmp_path / "secret.eml"
    outside.write_bytes(b"From: a@b.c\nSubject: secret\n\nthe secret\n")
    (source / "cur" / "1.host:2,").symlink_to(outside)
    (source / "leak.eml").symlink_to(outside)
    items = list(kind_for(source, tmp_path / "state").list_items())
    assert {i.key for i in items} == {"cur/1.host:2,", "leak.eml"}
    assert all(i.problem and "outside the source" in i.problem for i in items)


# ---- mbox: splitting, the cache, reading from the tail -----------------------------


@pytest.mark.parametrize(
    "path",
    [
        LKML_MBOX,
        *sorted((EMAIL / "perceval").glob("*.mbox")),
        *sorted((EMAIL / "patchwork").glob("*/*.mbox")),
    ],
)
def test_mbox_split_matches_the_mailbox_module(path: Path) -> None:
    with path.open("rb") as handle:
        spans = list(split_mbox(handle))
        expected = mailbox.mbox(str(path), create=False)
        assert len(spans) == len(expected)
        for span, key in zip(spans, expected.keys(), strict=True):
            handle.seek(span.offset)
            ours = message_bytes(handle.read(span.length))
            theirs = expected.get_bytes(key)
            # mboxrd: one level of ">From " quoting undone
            assert ours.rstrip(b"\n") == re.sub(rb"(?m)^>(>*From )", rb"\1", theirs).rstrip(b"\n")


def test_an_mbox_whose_from_line_is_not_ascii_is_read(tmp_path: Path) -> None:
    path = EMAIL / "perceval" / "mbox__mbox_unixfrom_encoding.mbox"
    assert not path.read_bytes().split(b"\n", 1)[0].isascii()
    listing = scan_mail(mail_config(path), tmp_path)
    assert listing.entries and not listing.problems
    assert all(e.folder == "mbox__mbox_unixfrom_encoding" for e in listing.entries)


def test_an_appended_mbox_is_read_from_its_last_known_message(tmp_path: Path) -> None:
    data = LKML_MBOX.read_bytes()
    cut = data.index(b"\nFrom ", len(data) - 20_000) + 1
    source = tmp_path / "mail"
    source.mkdir()
    (source / "lkml.mbox").write_bytes(data[:cut])
    state = tmp_path / "state"
    first = scan_mail(mail_config(source), state)
    assert first.stats["mbox_full_reads"] == 1
    unchanged = scan_mail(mail_config(source), state)
    assert unchanged.stats["mbox_bytes_read"] == 0 and unchanged.stats["messages_read"] == 0
    with (source / "lkml.mbox").open("ab") as handle:
        handle.write(data[cut:])
    grown = scan_mail(mail_config(source), state)
    assert grown.stats["mbox_tail_reads"] == 1 and grown.stats["mbox_full_reads"] == 0
    assert grown.stats["mbox_bytes_read"] < 25_000  # not the 870 kB before it
    assert grown.stats["messages_read"] == len(grown.entries) - len(first.entries) > 0
    assert mbox_cache(state, "lkml.mbox")["last_read"]["mode"] == "tail"
    old = [(e.key, e.fingerprint) for e in first.entries]
    assert [(e.key, e.fingerprint) for e in grown.entries[: len(old)]] == old
    whole = scan_mail(mail_config(source), None)  # no cache: the same listing
    assert [(e.key, e.fingerprint, e.offset) for e in whole.entries] == [
        (e.key, e.fingerprint, e.offset) for e in grown.entries
    ]
    # an edit before the end (a message deleted by a client) is split again from the start
    text = (source / "lkml.mbox").read_bytes()
    second = text.index(b"\nFrom ", 10) + 1
    third = text.index(b"\nFrom ", second + 10) + 1
    (source / "lkml.mbox").write_bytes(
        text[:second] + text[third:] + data[-2000:].replace(b"From ", b"Frum ")
    )
    edited = scan_mail(mail_config(source), state)
    assert edited.stats["mbox_full_reads"] == 1
    assert len(edited.entries) == len(whole.entries) - 1
    assert whole.entries[1].key not in {e.key for e in edited.entries}


def test_duplicate_message_ids_in_one_mbox_get_a_suffix(tmp_path: Path) -> None:
    data = LKML_MBOX.read_bytes()
    first = data[: data.index(b"\nFrom ", 10) + 1]
    (tmp_path / "dup.mbox").write_bytes(first + b"\n" + first)
    keys = [e.key for e in scan_mail(mail_config(tmp_path / "dup.mbox"), None).entries]
    assert len(keys) == 2 and keys[1] == keys[0] + "~2"


# ---- one message: headers, charsets, body, quotes, threads ----------------------------


def test_invalid_and_unencoded_utf8_headers_and_an_unknown_charset() -> None:
    mail = EMAIL / "patchwork" / "mail"
    for name in ("0014-with-unencoded-utf8-headers.mbox", "0015-with-invalid-utf8-headers.mbox"):
        with (mail / name).open("rb") as handle:
            span = next(split_mbox(handle))
            handle.seek(span.offset)
            record, _ = read_message(message_bytes(handle.read(span.length)))
        assert record.sender is not None and record.sender.address == "zajec5@gmail.com"
        assert "Rafał" in record.sender.name
        assert record.subject and record.text
        # every string is valid text (could be stored and shown)
        for value in (record.subject, record.text, *(a.name for a in record.cc)):
            value.encode("utf-8")
    with (mail / "0010-invalid-charset.mbox").open("rb") as handle:
        record, _ = read_message(message_bytes(handle.read()))
    assert record.text.strip() and any("charset" in w for w in record.warnings)


def test_a_reply_keeps_its_own_words_and_sets_quotes_and_signature_apart(tmp_path: Path) -> None:
    record, _ = read_message((NOTMUCH / "default" / "cur" / "34:2,").read_bytes())
    runs = split_text(record.text)
    own = "\n".join(t for k, t in runs if k == TEXT)
    quoted = "\n".join(t for k, t in runs if k == QUOTE)
    assert "GCC4.4" in own and "_GNU_SOURCE" in own
    assert "several issues" in quoted and "several issues" not in own
    assert quoted.startswith("On Wed, 18 Nov 2009 11:50:17 +0800, Jjgod Jiang")  # attribution
    assert split_text("Thanks!\n\n-- \nAlice\nhttps://example.org\n")[-1] == (
        SIGNATURE, "-- \nAlice\nhttps://example.org",
    )  # fmt: skip
    outlook = (
        "Sounds good.\n\n-----Original Message-----\nFrom: Bob\nSent: Monday\n\nEarlier text\n"
    )
    assert [k for k, _ in split_text(outlook)] == [TEXT, QUOTE]
    document = kind_for(NOTMUCH / "default", tmp_path).parse("34", ParseOptions())
    hidden = [s for s in document.sections if not s.embed]
    assert hidden and all(s.anchor.startswith(("quote-", "signature")) for s in hidden)
    assert "several issues" in document.body  # kept for display


GMAIL_REPLY = """<div dir="ltr">Sounds good, see you Tuesday.<br><br>Bob</div><br>
<div class="gmail_quote"><div dir="ltr" class="gmail_attr">On Mon, Jan 1, 2024 at 10:00 AM
Alice &lt;alice@example.org&gt; wrote:<br></div><blockquote class="gmail_quote">
<div>Shall we meet on Tuesday to review the zeppelin budget?</div>
<blockquote>An older quote inside it</blockquote><div>Alice</div></blockquote></div>
<p>PS: bring the cake</p>"""


def test_an_html_only_reply_sets_its_blockquotes_apart(tmp_path: Path) -> None:
    from email.message import EmailMessage

    message = EmailMessage()
    message["From"] = "Bob <bob@example.org>"
    message["Subject"] = "Re: budget"
    message["Message-ID"] = "<reply@example.org>"
    message.set_content(GMAIL_REPLY, subtype="html")
    (tmp_path / "mail").mkdir()
    (tmp_path / "mail" / "reply.eml").write_bytes(message.as_bytes())
    document = kind_for(tmp_path / "mail", tmp_path / "state").parse("reply.eml", ParseOptions())
    shown = {
        s.anchor: document.body.split("\n")[s.line_start - 1 : s.line_end]
        for s in document.sections
    }
    embedded = "\n".join("\n".join(shown[s.anchor]) for s in document.sections if s.embed)
    hidden = "\n".join("\n".join(shown[s.anchor]) for s in document.sections if not s.embed)
    assert "see you Tuesday" in embedded and "bring the cake" in embedded
    assert "zeppelin" not in embedded and "older quote" not in embedded
    assert "zeppelin" in hidden and "Alice <alice@example.org> wrote:" in hidden


def test_threads_follow_references_then_in_reply_to(tmp_path: Path) -> None:
    # the conventions' rule: first References id, else In-Reply-To, else the own id
    folder = NOTMUCH / "threading" / "parent-priority" / "cur"
    records = {p.name: read_message(p.read_bytes())[0] for p in folder.iterdir()}
    root_id = records["root"].message_id
    assert root_id == "B00-root@example.org" and records["root"].thread == root_id
    assert records["child"].references == ["B00--root@example.org"]
    assert records["child"].thread == "B00--root@example.org"
    # LKML: git send-email's "In-Reply-To: <yes>" (23 messages) is no id, so no thread "yes"
    lkml = [read_message(p.read_bytes())[0] for p in (NOTMUCH / "lkml" / "cur").iterdir()]
    threads = {r.thread for r in lkml}
    assert "yes" not in threads and None not in threads
    series = [r for r in lkml if r.thread == "cover.1289789604.git.joe@perches.com"]
    assert len(series) == 78  # Joe Perches' patch series and its replies
    kind = kind_for(NOTMUCH / "threading" / "parent-priority", tmp_path)
    document = kind.parse("grand-child", ParseOptions())
    facets = kind.facets("grand-child", document.metadata)
    assert f"thread:{records['grand-child'].thread}" in facets
    assert "message_id:B01-grand-child@example.org" in facets
    assert "from:alice@example.org" in facets and "from:alice" in facets
    assert "to:daniel@example.org" in facets and "folder:Inbox" in facets
    assert "author_name:Alice" in facets and "type:email" in facets


def test_html_only_mail_is_cleaned_to_text_and_two_cc_headers_both_count(tmp_path: Path) -> None:
    kind = kind_for(NOTMUCH, tmp_path)
    listing = {i.key for i in kind.list_items()}
    html = kind.parse("html/attribute-text", ParseOptions())  # text/html only
    assert "hunter2" in html.body and "<html" not in html.body and "<input" not in html.body
    broken_cc = kind.parse("broken/broken-cc", ParseOptions())
    cc = {p["address"] for p in broken_cc.metadata["cc"]}
    assert cc == {"bob@example.org", "charles@example.org"}
    assert "folder_in:default" in kind.facets(
        "default/bar/baz/25", kind.parse("default/bar/baz/25", ParseOptions()).metadata
    )
    encrypted = kind.parse("crypto/basic-encrypted.eml", ParseOptions())
    assert any("encrypted" in w for w in encrypted.warnings)
    # a PDF attachment that is not a PDF: an error for that item alone
    fake = "indexing/fake-pdf:2,S/attachments/1-fake.pdf"
    assert fake in listing
    with pytest.raises(ItemError, match=r"fake\.pdf"):
        kind.parse(fake, ParseOptions())


def test_a_broken_message_is_an_error_of_its_own_and_listing_goes_on(tmp_path: Path) -> None:
    source = tmp_path / "mail"
    copy_maildir_message(NOTMUCH / "broken" / "broken-cc", source / "cur", "1.a:2,")
    (source / "cur" / "2.b:2,").write_bytes(b"")  # an empty message file
    kind = kind_for(source, tmp_path / "state")
    assert {i.key for i in kind.list_items()} == {"1.a", "2.b"}
    with pytest.raises(ItemError, match="broken message"):
        kind.parse("2.b", ParseOptions())
    assert kind.parse("1.a", ParseOptions()).title == "wowsers!"


# ---- the change signal -------------------------------------------------------------


def test_change_signal_is_a_stat_walk_that_sees_new_and_deleted_messages(tmp_path: Path) -> None:
    source = tmp_path / "mail"
    shutil.copytree(NOTMUCH / "default", source)
    kind = kind_for(source, tmp_path / "state")
    first = kind.change_signal()
    assert kind.change_signal() == first
    (source / "cur" / "29:2,").unlink()
    deleted = kind.change_signal()
    assert deleted != first
    copy_maildir_message(
        NOTMUCH / "lkml" / "cur" / sorted(os.listdir(NOTMUCH / "lkml" / "cur"))[0],
        source / "new",
        "9.x:2,",
    )
    os.utime(source / "new", ns=(10**18, 10**18))
    assert kind.change_signal() != deleted
    # an mbox source: its size and mtime
    mbox = tmp_path / "one.mbox"
    shutil.copyfile(LKML_MBOX, mbox)
    single = kind_for(mbox, tmp_path / "state2")
    before = single.change_signal()
    with mbox.open("ab") as handle:
        handle.write(b"\n")
    assert single.change_signal() != before
