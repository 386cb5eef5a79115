"""Hostile mail (issue 26 items 7, 8 and 16, and their siblings) for
``benchmarks/hostile_inputs.py``, at the issue's sizes.

Each case writes its bomb into a mail source folder beside two good messages (an
mbox, or a Maildir), and returns a ``mail`` source. A case whose bomb is indexed
whole (20,000 messages of one Message-ID: a mail loop) expects no words (``""``):
nothing of it is a problem, every message is a document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.hostile import HostileCase, HttpFixture

MB = 1 << 20
SEPARATOR = b"From someone@example.org Thu Jan  1 00:00:00 2024\n"


def message(
    subject: bytes = b"Quarterly report",
    message_id: bytes | None = b"<good-1@example.org>",
    headers: bytes = b"",
    body: bytes = b"The glacier survey starts on Monday.\n",
) -> bytes:
    """One RFC 822 message (no Message-ID header when ``message_id`` is None)."""
    lines = [
        b"From: Ann Example <ann@example.org>",
        b"To: bob@example.org",
        b"Subject: " + subject,
        b"Date: Mon, 1 Jan 2024 10:00:00 +0000",
    ]
    if message_id is not None:
        lines.append(b"Message-ID: " + message_id)
    return b"\n".join(lines) + b"\n" + headers + b"\n" + body


GOOD = [
    message(b"Glacier survey", b"<good-1@example.org>"),
    message(
        b"Sourdough starter", b"<good-2@example.org>",
        body=b"A sourdough starter needs flour, water and a warm kitchen.\n",
    ),
]  # fmt: skip


def mail_source(folder: Path, **settings: Any) -> dict[str, Any]:
    return {"kind": "mail", "path": str(folder), **settings}


def write_mbox(path: Path, messages: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for data in messages:
            handle.write(SEPARATOR + data + b"\n")


def mbox_with(folder: Path, *bombs: bytes) -> dict[str, Any]:
    """An mbox of the two good messages and ``bombs``."""
    mail = folder / "mail"
    write_mbox(mail / "inbox.mbox", [*GOOD, *bombs])
    return mail_source(mail)


# ---- item 8: keys, and the header block --------------------------------------------------


def same_message_id(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """20,000 copies of one message (a mail loop), one Message-ID: keys ``id``,
    ``id~2`` … ``id~20000`` (the suffix search restarted at ~2: 83.5 s to list)."""
    mail = folder / "mail"
    loop = message(b"Out of office", b"<loop@example.org>", body=b"I am away until Monday.\n")
    write_mbox(mail / "inbox.mbox", [*GOOD, *[loop] * 20_000])
    return mail_source(mail)


def no_message_id(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """20,000 copies of one message without a Message-ID: keyed by one SHA-1."""
    mail = folder / "mail"
    loop = message(b"Out of office", None, body=b"I am away until Monday.\n")
    write_mbox(mail / "inbox.mbox", [*GOOD, *[loop] * 20_000])
    return mail_source(mail)


def distinct_message_ids(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """The twin of the two cases above: the same 20,000 messages, each with an id of
    its own (what they cost as mail, not as a collision)."""
    mail = folder / "mail"
    loops = [
        message(b"Out of office", b"<loop-%d@example.org>" % n, body=b"I am away until Monday.\n")
        for n in range(20_000)
    ]
    write_mbox(mail / "inbox.mbox", [*GOOD, *loops])
    return mail_source(mail)


def folded_subject(size: int) -> bytes:
    return b"start" + b"\n word word word" * (size // 16)


def huge_subject_mbox(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A 40 MB folded Subject in an mbox (listing stalled > 5 min, the source blocked)."""
    return mbox_with(folder, message(folded_subject(40 * MB), b"<bomb@example.org>"))


def huge_subject_files(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """The 40 MB folded Subject as a Maildir message, an .eml and an Apple Mail .emlx."""
    mail = folder / "mail"
    bomb = message(folded_subject(40 * MB), b"<bomb@example.org>")
    for part in ("cur", "new"):
        (mail / "Maildir" / part).mkdir(parents=True)
    (mail / "Maildir" / "cur" / "1.good:2,S").write_bytes(GOOD[0])
    (mail / "Maildir" / "new" / "2.good").write_bytes(GOOD[1])
    (mail / "Maildir" / "cur" / "3.bomb:2,S").write_bytes(bomb)
    (mail / "bomb.eml").write_bytes(bomb)
    apple = mail / "Mailboxes" / "Work.mbox" / "Messages"
    apple.mkdir(parents=True)
    (apple / "7.emlx").write_bytes(b"%d\n" % len(bomb) + bomb + b"<?xml version='1.0'?>")
    return mail_source(mail)


def header_words_bomb(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """120 kB of RFC 2047 encoded words in Subject and as many in Cc (within
    max_header_bytes; policy.default's header parser is quadratic in a value)."""
    words = b" =?utf-8?q?a=C3=A9?=" * 6_000
    cc = b",".join(b" =?utf-8?q?X=C3=A9?= <x%d@example.org>" % n for n in range(3_000))
    return mbox_with(folder, message(words, b"<words@example.org>", b"Cc:" + cc + b"\n"))


def many_headers(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A message of 5 million header lines (40 MB): over max_header_bytes."""
    return mbox_with(folder, message(b"Headers", b"<headers@example.org>", b"X-A: b\n" * 5_000_000))


# ---- item 7: parts, linear and capped --------------------------------------------------------


def multipart(parts: list[bytes], boundary: bytes = b"b") -> bytes:
    body = b"".join(b"--" + boundary + b"\n" + part + b"\n" for part in parts)
    return message(
        b"Many parts", b"<parts@example.org>",
        b"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=" + boundary + b"\n",
        body + b"--" + boundary + b"--\n",
    )  # fmt: skip


def ten_thousand_parts(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """10,000 inline text parts, two in each of 5,000 multiparts (13 s: each part
    looked for its parent by walking the whole tree)."""
    parts = [
        b"Content-Type: multipart/mixed; boundary=c%d\n\n--c%d\nContent-Type: text/plain\n\n"
        b"first %d\n--c%d\nContent-Type: text/plain\n\nsecond %d\n--c%d--" % ((n,) * 6)
        for n in range(5_000)
    ]
    return mbox_with(folder, multipart(parts))


def ten_thousand_attachments(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """10,000 text attachments: each attachment walked its whole message (n²)."""
    parts = [
        b"Content-Type: text/plain\nContent-Disposition: attachment; filename=n%d.txt\n\n"
        b"attachment %d" % (n, n)
        for n in range(10_000)
    ]
    return mbox_with(folder, multipart(parts))


def nested_messages(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """message/rfc822 nested 2,000 deep."""
    inner = message(b"The innermost", b"<inner@example.org>")
    bomb = message(
        b"Nested", b"<nested@example.org>", b"Content-Type: message/rfc822\n",
        b"Content-Type: message/rfc822\n\n" * 1_999 + inner,
    )  # fmt: skip
    return mbox_with(folder, bomb)


def deep_multipart_lines(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """Multiparts nested 250 deep around 40 MB of short lines: the parser tests each
    line against every enclosing boundary."""
    head = b"".join(
        b"--b%d\nContent-Type: multipart/mixed; boundary=b%d\n\n" % (n, n + 1) for n in range(250)
    )
    body = head + b"--b250\nContent-Type: text/plain\n\n" + b"x\n" * (20 * MB)
    return mbox_with(
        folder,
        message(
            b"Deep", b"<deep@example.org>", b"Content-Type: multipart/mixed; boundary=b0\n", body
        ),
    )


def empty_lines(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A 40 MB message of empty lines (each a string in the parser: over 3 GB)."""
    return mbox_with(
        folder, message(b"Empty lines", b"<empty@example.org>", body=b"Hi\n" + b"\n" * (40 * MB))
    )


# ---- item 16, and the mbox splitter ---------------------------------------------------------


def maildir_dot_files(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """.gitkeep, .noindex, ``..:2,S`` and ``.:2,S`` in a Maildir's cur/ and new/
    (listed as broken messages, or keyed where ``open`` cannot reach them), and a
    message whose Message-ID is ``<../../x@y>``."""
    mail = folder / "mail"
    for part in ("cur", "new"):
        (mail / part).mkdir(parents=True)
    (mail / "cur" / "1.good:2,S").write_bytes(GOOD[0])
    (mail / "cur" / ".gitkeep").write_bytes(b"")
    (mail / "new" / ".noindex").write_bytes(b"not mail\n")
    (mail / "cur" / "..:2,S").write_bytes(message(b"Dot dot", b"<dot@example.org>"))
    (mail / "cur" / ".:2,S").write_bytes(message(b"Dot", b"<dot2@example.org>"))
    (mail / "cur" / "2.odd:2,S").write_bytes(message(b"Odd id", b"<../../x@example.org>"))
    write_mbox(mail / "odd.mbox", [message(b"Odd id in an mbox", b"<../../y@example.org>")])
    return mail_source(mail)


def gigabyte_line(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """An mbox message of one 1 GB line (held whole, and copied once per block)."""
    mail = folder / "mail"
    write_mbox(mail / "inbox.mbox", GOOD)
    with (mail / "inbox.mbox").open("ab") as handle:
        handle.write(SEPARATOR + message(b"Long line", b"<long@example.org>"))
        chunk = b"x" * (64 * MB)
        for _ in range(16):
            handle.write(chunk)
        handle.write(b"\n")
    return mail_source(mail)


CASES = [
    HostileCase("mbox of 20,000 messages sharing one Message-ID", 8, same_message_id, "",
                good_items=20_002, twin=distinct_message_ids),
    HostileCase("mbox of 20,000 messages without a Message-ID", 8, no_message_id, "",
                good_items=20_002, twin=distinct_message_ids),
    HostileCase("40 MB folded Subject in an mbox", 8, huge_subject_mbox, "max_header_bytes",
                good_items=2),
    HostileCase("40 MB folded Subject in a Maildir message, an .eml and an .emlx", 8,
                huge_subject_files, "max_header_bytes", good_items=2),
    HostileCase("5,000,000 header lines (40 MB)", 8, many_headers, "max_header_bytes",
                good_items=2),
    HostileCase("120 kB of encoded words in Subject and Cc", 8, header_words_bomb, "",
                good_items=3),
    HostileCase("a message of 10,000 nested inline parts", 7, ten_thousand_parts,
                "max_mime_parts", good_items=3),
    HostileCase("a message of 10,000 attachments", 7, ten_thousand_attachments,
                "max_mime_parts", good_items=3),
    HostileCase("message/rfc822 nested 2,000 deep", 7, nested_messages, "max_nesting_depth",
                good_items=3),
    HostileCase("multiparts 250 deep around 20 million short lines", 7, deep_multipart_lines,
                "too costly to read", good_items=3),
    HostileCase("a 40 MB message of empty lines", 7, empty_lines, "max_message_lines",
                good_items=3),
    HostileCase("Maildir dot-files, ..:2,S and Message-ID <../../x@y>", 16, maildir_dot_files,
                "", good_items=3),
    HostileCase("an mbox line of 1 GB", 8, gigabyte_line, "max_message_bytes", good_items=2),
]  # fmt: skip
