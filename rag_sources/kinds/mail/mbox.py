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
_FROM_LINE = re.compile(rb"^From [^\n]*\n", re.MULTILINE)
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
    for run, line_start, candidate in _runs(handle):
        starts = candidate and (
            position == start or (previous_blank and _SEPARATOR_DATE.search(run) is not None)
        )
        if starts:
            if begin is not None:
                yield MboxSpan(begin, position - len(pending_blank) - begin, digest.hexdigest())
            begin = position
            digest = hashlib.sha1()
            pending_blank = b""
        elif begin is None:
            # bytes before the first separator (not an mbox, or junk): not a message
            position += len(run)
            junk = _last_line(run, line_start)
            previous_blank = bool(junk) and junk.strip() == b""
            continue
        if pending_blank:
            digest.update(pending_blank)
            pending_blank = b""
        last = _last_line(run, line_start)
        blank = last in (b"\n", b"\r\n")
        if blank:  # held back: the blank line before a separator is no message's
            digest.update(memoryview(run)[: len(run) - len(last)])
            pending_blank = last
        else:
            digest.update(run)
        position += len(run)
        previous_blank = blank
    if begin is not None:
        end = position - len(pending_blank)
        yield MboxSpan(begin, end - begin, digest.hexdigest())


def _last_line(run: bytes, line_start: bool) -> bytes:
    """The last line of ``run`` (whole lines, or a piece of a long line when not
    ``line_start``); b"" when the run is a line's last piece only."""
    cut = run.rfind(b"\n", 0, len(run) - 1) + 1
    return run[cut:] if cut or line_start else b""


def _runs(handle: BinaryIO) -> Iterator[tuple[bytes, bool, bool]]:
    """The bytes of ``handle`` in order, in runs: (bytes, whether they start a line,
    whether they are one whole line starting with ``From ``, a separator candidate).
    Lines between candidates come as one run per block, so that a block of short
    lines costs a regex search, not a Python step per line; a line longer than
    ``_BLOCK`` comes in pieces (held whole, a 1 GB line would cost 1 GB)."""
    rest = b""
    line_start = True
    while block := handle.read(_BLOCK):
        data = rest + block
        cut = data.rfind(b"\n") + 1  # the block's whole lines end here
        if not cut:
            if len(data) >= _BLOCK:
                yield data, line_start, line_start and data.startswith(b"From ")
                rest, line_start = b"", False
            else:
                rest = data
            continue
        position = 0
        for found in _FROM_LINE.finditer(data, 0, cut):
            at = found.start()
            if at == 0 and not line_start:
                continue  # the rest of a long line, not a line
            if at > position:
                yield data[position:at], position > 0 or line_start, False
            yield data[at : found.end()], True, True
            position = found.end()
        if position < cut:
            yield data[position:cut], position > 0 or line_start, False
        rest, line_start = data[cut:], True
    if rest:
        yield rest, line_start, line_start and rest.startswith(b"From ")


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
