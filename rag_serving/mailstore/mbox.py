"""Splitting an mbox file into messages by byte offset, without the ``mailbox`` module.

A message starts at a ``From `` line at the top of the file, or at a ``From `` line
that follows a blank line and carries a time or a year (``From x@y Thu Jan  1
00:00:00 1970``): a body line ``From here on…`` after a blank line is not split on
unless it looks like a separator. The separator line is not ASCII in some archives
(``From christian at “example.org”``): it is only matched as bytes, never decoded.
A line longer than a read block (a gigabyte without a newline) is read in pieces,
never held whole.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

_SEPARATOR_DATE = re.compile(rb"\d\d:\d\d|\b\d{4}\b")
_MBOXRD_FROM = re.compile(rb"^>(>*From )", re.MULTILINE)
_BLOCK = 1 << 20


@dataclass(frozen=True)
class MboxSpan:
    """One message of an mbox: bytes ``offset .. offset + length`` (its ``From `` line
    included, the blank line before the next message not), and their SHA-1."""

    offset: int
    length: int
    sha1: str


def split_mbox(handle: BinaryIO, start: int = 0) -> Iterator[MboxSpan]:
    """The messages of an open mbox file from byte ``start`` (the start of a message
    or of the file) to its end."""
    handle.seek(start)
    begin: int | None = None
    digest = hashlib.sha1()
    position = start
    previous_blank = True  # the top of the file (or of a known message) starts one
    pending_blank = b""  # a blank line held back: it ends a message if a separator follows
    for line, line_start in _lines(handle):
        starts = (
            line_start
            and line.startswith(b"From ")
            and (position == start or (previous_blank and _SEPARATOR_DATE.search(line) is not None))
        )
        if starts:
            if begin is not None:
                yield MboxSpan(begin, position - len(pending_blank) - begin, digest.hexdigest())
            begin = position
            digest = hashlib.sha1()
            pending_blank = b""
        elif begin is None:
            # bytes before the first separator (not an mbox, or junk): not a message
            position += len(line)
            previous_blank = line_start and line.strip() == b""
            continue
        if pending_blank:
            digest.update(pending_blank)
            pending_blank = b""
        blank = line in (b"\n", b"\r\n")
        if blank:
            pending_blank = line
        else:
            digest.update(line)
        position += len(line)
        previous_blank = blank
    if begin is not None:
        end = position - len(pending_blank)
        yield MboxSpan(begin, end - begin, digest.hexdigest())


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """The lines of ``handle`` with their newline, and whether each starts a line: a
    line longer than ``_BLOCK`` comes in pieces (held whole, a 1 GB line would cost
    1 GB, and its rest be copied once per block)."""
    rest = b""
    line_start = True
    while block := handle.read(_BLOCK):
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line + b"\n", line_start
            line_start = True
        if len(rest) >= _BLOCK:
            yield rest, line_start
            rest, line_start = b"", False
    if rest:
        yield rest, line_start


def read_span(handle: BinaryIO, offset: int, length: int) -> bytes:
    handle.seek(offset)
    return handle.read(length)


def message_bytes(raw: bytes) -> bytes:
    """An mbox span as an RFC 822 message: without its ``From `` line, and with
    mboxrd's quoting of body ``From `` lines undone (``>From`` → ``From``)."""
    newline = raw.find(b"\n")
    body = raw[newline + 1 :] if raw.startswith(b"From ") and newline >= 0 else raw
    return _MBOXRD_FROM.sub(rb"\1", body)


def looks_like_mbox(head: bytes) -> bool:
    """Whether a file's first bytes are an mbox's (a ``From `` line)."""
    return head.startswith(b"From ")
