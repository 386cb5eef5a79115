"""One RFC 822 message read into a structured record (stdlib ``email``, policy.default).

Every read is guarded: a broken header is read raw (decoded with replacement), a
broken MIME part is passed over with a warning. Parts and RFC 2047 words are read in
their charsets as mail readers read them (WHATWG labels: gb2312 as GB18030,
iso-8859-1 as windows-1252), and as UTF-8 where the label is unknown or stale
(``rag_sources.charsets``). ``read_message`` raises ``MessageError`` only when nothing of
the message can be read.

Every message is bounded (``rag_sources.limits.Limits``): a header block over
``max_header_bytes`` makes it a problem before anything is parsed; the parser is fed
in small pieces and stopped (the message read up to there, with a warning) at
``max_nesting_depth`` or when the lines read, or the boundary tests nested parts
cost, pass their caps; its parts are walked once, without recursion, up to
``max_mime_parts``; a header value longer than ``PARSED_HEADER_CHARS`` is read raw,
never by policy.default's header parser (quadratic in the length of a value).

The body is the text/plain part, else the HTML part (kept as HTML: the indexing side
cleans it to text); other inline text parts without a file name (a patch sent as a
second part) are appended to it. Parts with a file name are attachments; the ones
whose type the document parsers read (PDF, office, text, Markdown, HTML, CSV) are
*indexable* and become child items.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import hashlib
import re
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.feedparser import BytesFeedParser
from email.message import EmailMessage, Message
from email.policy import EmailPolicy
from pathlib import PurePosixPath
from typing import Any

from rag_sources.charsets import decode_declared, markup_charset
from rag_sources.limits import DEFAULT_LIMITS, Limits

# attachment file suffixes the document parsers read (rag_sources.formats.router)
ATTACHMENT_SUFFIXES = frozenset(
    {
        ".pdf", ".docx", ".pptx", ".xlsx", ".xlsm", ".txt", ".text", ".md", ".markdown",
        ".html", ".htm", ".csv", ".tsv",
    }
)  # fmt: skip
# a suffix for an attachment whose name has none, by its content type
_SUFFIX_BY_TYPE = {
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/html": ".html",
    "text/csv": ".csv",
}
_MESSAGE_ID = re.compile(r"<([^<>\s]+)>")
_KEY_SAFE_ID = re.compile(r"^[!-~]{1,250}$")  # printable ASCII, no space
_UNSAFE_NAME = re.compile(r"[^\w.+-]+")
_BARE_ADDRESS = re.compile(r"[^\s<>,;:()\"]+@[^\s<>,;:()\"]+")

# A header value longer than this is read raw (decode_header, getaddresses), never by
# policy.default's parser: it is quadratic in a value's length (250 kB of encoded
# words: 7 s). Inside parts (which only the email package reads) it is cut to this.
PARSED_HEADER_CHARS = 16_384
# Lines read × boundaries of the multiparts around them: the parser tests every line
# against every enclosing boundary (200 levels × 400,000 lines: 8 s). ~1 s here.
MAX_BOUNDARY_TESTS = 10_000_000
# References kept of one message: the first (the thread's root) and the last ones
# (its parents), as clients trim them (RFC 5322 §3.6.4).
MAX_REFERENCES = 100
_FEED_BYTES = 4096  # the parser is fed this much at a time, its depth checked between
# A header line: a field, a continuation or an mbox "From " line (the parser's
# headerRE); the header block ends at the first line that is none (a blank line).
_HEADER_LINE = re.compile(rb"From |[!-9;-~]*:|[ \t]")
_HEADER_END = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?!From |[!-9;-~]*:|[ \t])")
_CLOSE_DELIMITER = re.compile(rb"\n--[^\r\n]*--[ \t]*(?=\r?\n)")
# The parts of each message read: attachment_payload counts in them without a walk.
_PARTS: weakref.WeakKeyDictionary[Message, list[Message]] = weakref.WeakKeyDictionary()


class MessageError(Exception):
    """The message cannot be read at all; ``str(e)`` says why."""


class MessageTooLarge(MessageError):
    """The message is over one of the caps of ``[limits]``; ``str(e)`` names it."""


class _BoundedPolicy(EmailPolicy):
    """policy.default, with a header value longer than ``PARSED_HEADER_CHARS`` cut
    before it is parsed (what the email package reads of parts: their Content-Type,
    Content-Disposition, file names)."""

    def header_fetch_parse(self, name: str, value: str) -> Any:
        if len(value) > PARSED_HEADER_CHARS:
            value = value[:PARSED_HEADER_CHARS]
        try:
            return super().header_fetch_parse(name, value)
        except RecursionError:  # comments nested thousands deep: read without them
            return super().header_fetch_parse(name, value.replace("(", " ").replace(")", " "))


_POLICY = _BoundedPolicy()


@dataclass(frozen=True)
class Address:
    name: str
    address: str  # lowercased

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "address": self.address}

    def shown(self) -> str:
        if self.name and self.address:
            return f"{self.name} <{self.address}>"
        return self.name or self.address


@dataclass(frozen=True)
class Attachment:
    """One attachment: ``number`` counts every attachment of the message from 1."""

    number: int
    filename: str
    content_type: str
    size: int
    suffix: str | None  # the parser's suffix when the document parsers can read it

    @property
    def item_name(self) -> str:
        """``<n>-<safe file name>``: the last part of the attachment item's key."""
        name = _UNSAFE_NAME.sub("_", self.filename).strip("._") or "attachment"
        stem, suffix = name[:80], self.suffix or ""
        if suffix and not stem.lower().endswith(suffix):
            stem += suffix
        return f"{self.number}-{stem}"


@dataclass
class MailMessage:
    """What the index needs of one message."""

    subject: str
    sender: Address | None
    to: list[Address]
    cc: list[Address]
    date: datetime | None  # aware, UTC
    message_id: str | None  # without <>
    in_reply_to: str | None
    references: list[str]
    text: str  # the text/plain body (and inline text parts), "" when none
    html: str | None  # the HTML body when there is no text/plain one
    attachments: list[Attachment] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    encrypted: bool = False

    @property
    def thread(self) -> str | None:
        """The first References id, else In-Reply-To, else the message's own id."""
        if self.references:
            return self.references[0]
        return self.in_reply_to or self.message_id

    def indexable(self, max_bytes: int) -> list[Attachment]:
        return [a for a in self.attachments if a.suffix and a.size <= max_bytes]


def message_key_id(data: bytes, message_id: str | None) -> str:
    """The part of a key naming a message: its Message-ID when it is printable ASCII
    and a plain path (no ``.``, ``..`` or empty segment, no backslash: ``open`` could
    not reach it), else the SHA-1 of its bytes."""
    if (
        message_id
        and _KEY_SAFE_ID.match(message_id)
        and "/attachments/" not in message_id
        and "\\" not in message_id
        and all(part not in ("", ".", "..") for part in message_id.split("/"))
    ):
        return message_id
    return hashlib.sha1(data).hexdigest()


def header_end(data: bytes, limits: Limits = DEFAULT_LIMITS) -> int:
    """Where the header block of ``data`` ends (looked for in its first
    ``max_header_bytes`` only). Raises ``MessageTooLarge`` past the cap."""
    cap = limits.max_header_bytes
    if data[:1] in (b"\n", b"\r"):
        return 0  # no headers
    found = _HEADER_END.search(data, 0, cap + 1)
    if found is None:
        if len(data) <= cap:
            return len(data)
    # the search stopped at the cap: the line after it may still be a header line
    elif not _HEADER_LINE.match(data, found.end()):
        return found.end()
    raise MessageTooLarge(
        f"its header block is larger than max_header_bytes ({cap:,} bytes); raise "
        "[limits] max_header_bytes to index it"
    )


def parse_bytes(data: bytes, limits: Limits = DEFAULT_LIMITS) -> EmailMessage:
    """The message object of ``data``, read up to the caps of ``limits`` (the parser
    records defects, never raises)."""
    return _parse(data, limits)[0]


def _parse(data: bytes, limits: Limits) -> tuple[EmailMessage, str | None, str | None]:
    """The message object of ``data``, fed to the parser a piece at a time and read
    up to where a cap stops it; with that cap's setting and a warning saying so."""
    made = 0

    def factory(policy: EmailPolicy = _POLICY) -> EmailMessage:
        nonlocal made
        made += 1
        return EmailMessage(policy=policy)

    parser = BytesFeedParser(factory, policy=_POLICY)
    made = lines = tests = 0
    stopped: tuple[str, str] | None = None
    # The parser's own state (stable since Python 2.5): an absent one disables a check.
    stack: list[Any] = getattr(parser, "_msgstack", [])
    matchers: list[Any] = getattr(getattr(parser, "_input", None), "_eofstack", [])
    for start in range(0, len(data), _FEED_BYTES):
        chunk = data[start : start + _FEED_BYTES]
        count = chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
        lines += count
        tests += count * len(matchers)
        if lines > limits.max_message_lines:
            what = f"more than max_message_lines ({limits.max_message_lines:,}) lines"
            stopped = ("max_message_lines", f"the message has {what}")
        elif tests > MAX_BOUNDARY_TESTS:
            what = f"{len(matchers)} multipart parts around {lines:,} lines (too costly to read)"
            stopped = ("lines", f"the message nests {what}")
        if stopped:
            break
        parser.feed(chunk)
        if len(stack) - 1 > limits.max_nesting_depth:
            what = f"deeper than max_nesting_depth ({limits.max_nesting_depth})"
            stopped = ("max_nesting_depth", f"the message nests parts {what}")
        elif made > limits.max_mime_parts:
            # a part starts at each delimiter line but the closing ones ("--b--")
            rest = data.count(b"\n--", start + _FEED_BYTES)
            rest -= len(_CLOSE_DELIMITER.findall(data, start + _FEED_BYTES))
            what = f"more than max_mime_parts ({limits.max_mime_parts:,}) MIME parts"
            stopped = ("max_mime_parts", f"the message has {what}: about {rest:,} more")
        if stopped:
            break
    msg: EmailMessage = parser.close()  # type: ignore[assignment]
    if stopped is None:
        return msg, None, None
    setting, what = stopped
    warning = f"{what}: the rest of it was not read"
    if setting != "lines":
        warning += f"; raise [limits] {setting} to read it"
    return msg, setting, warning


def header_message_id(data: bytes, limits: Limits = DEFAULT_LIMITS) -> str | None:
    """The Message-ID of a message, from its headers alone (None when its header
    block is over ``max_header_bytes``)."""
    try:
        end = header_end(data, limits)
    except MessageTooLarge:
        return None
    parser = BytesFeedParser(policy=_POLICY)
    parser.feed(data[:end])
    return _first_id(_header(parser.close(), "message-id", []))


def message_outline(
    data: bytes, limits: Limits = DEFAULT_LIMITS
) -> tuple[str | None, list[Attachment]]:
    """The Message-ID and attachments of a message as ``read_message`` finds them
    (what a listing needs), from its header block alone when that says it has one
    part and no file name (most mail: 0.2 ms instead of 0.6); (None, []) when the
    header block is over ``max_header_bytes``."""
    try:
        end = header_end(data, limits)
    except MessageTooLarge:
        return None, []
    parser = BytesFeedParser(policy=_POLICY)
    parser.feed(data[:end])
    head = parser.close()
    if head.get_content_maintype() not in ("multipart", "message") and _filename(head) is None:
        return _first_id(_header(head, "message-id", [])), []
    record, _ = read_message(data, limits)
    return record.message_id, record.attachments


def read_message(data: bytes, limits: Limits = DEFAULT_LIMITS) -> tuple[MailMessage, EmailMessage]:
    """The record of a message, and its parsed object (for attachment payloads).
    Raises ``MessageTooLarge`` when its header block is over ``max_header_bytes``,
    ``MessageError`` when nothing of it can be read."""
    if not data.strip():
        raise MessageError("an empty message")
    header_end(data, limits)
    try:
        msg, stopped, warning = _parse(data, limits)
    except RecursionError:
        raise MessageError(
            "its parts are nested too deeply to be read; lower [limits] max_nesting_depth"
        ) from None
    except Exception as exc:  # the parser is lenient; this is a bug in it
        raise MessageError(f"the message cannot be parsed ({type(exc).__name__}: {exc})") from None
    warnings = [warning] if warning else []
    if not any(msg.get(h) is not None for h in ("from", "subject", "date", "message-id")):
        head = data[:200].decode("utf-8", "replace")
        if ":" not in head.split("\n", 1)[0]:
            raise MessageError("not a mail message (no header lines)")
    message_id = _first_id(_header(msg, "message-id", warnings))
    # an id without "@" is no id ("In-Reply-To: <yes>", git send-email's prompt answer);
    # a message citing itself would make a loop of its thread
    references = _references(_ids(_header(msg, "references", warnings)), message_id)
    in_reply_to = next((i for i in _ids(_header(msg, "in-reply-to", warnings)) if "@" in i), None)
    if in_reply_to == message_id:
        in_reply_to = None
    record = MailMessage(
        subject=" ".join(_header(msg, "subject", warnings).split()),
        sender=next(iter(_addresses(msg, "from", warnings)), None),
        to=_addresses(msg, "to", warnings),
        cc=_addresses(msg, "cc", warnings),
        date=_date(msg, warnings),
        message_id=message_id,
        in_reply_to=in_reply_to,
        references=references,
        text="",
        html=None,
        warnings=warnings,
    )
    _read_body(msg, record, limits, stopped)
    return record, msg


def attachment_payload(msg: EmailMessage, number: int) -> bytes:
    """The decoded bytes of attachment ``number`` (1-based) of a message
    ``read_message`` returned."""
    parts = _PARTS.get(msg)
    if parts is None:
        parts = _attachment_parts(msg)
    if not 1 <= number <= len(parts):
        raise MessageError(f"the message has no attachment {number}")
    payload = parts[number - 1].get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def _references(ids: list[str], own: str | None) -> list[str]:
    """The References ids: once each, not the message's own, the first (the root)
    and the last ``MAX_REFERENCES - 1`` (its nearest parents)."""
    kept = [i for i in dict.fromkeys(ids) if "@" in i and i != own]
    if len(kept) > MAX_REFERENCES:
        kept = kept[:1] + kept[1 - MAX_REFERENCES :]
    return kept


# ---------------------------------------------------------------------------
# headers


def _clean(text: str) -> str:
    """Header text as valid Unicode: raw 8-bit bytes (kept as surrogate escapes) are
    read as UTF-8, else windows-1252 (MIME's default, us-ascii, as mail readers read it)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape")
        return decode_declared(raw, None, undeclared="us-ascii").text


# An RFC 2047 encoded word: =?charset(*language)?B|Q?text?=
_ENCODED_WORD = re.compile(r"=\?([^?\s*]+)(?:\*[^?\s]*)?\?([bBqQ])\?([^?\s]*)\?=")
_FOLD = re.compile(r"\r?\n(?=[ \t])")
_Q_HEX = re.compile(rb"=([0-9A-Fa-f]{2})")


def _word_bytes(encoding: str, text: str) -> bytes:
    """The bytes an encoded word's text stands for (B: base64, Q: quoted-printable)."""
    if encoding in "bB":
        text = text.rstrip("=")
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=False)
    raw = text.replace("_", " ").encode("ascii", "surrogateescape")
    return _Q_HEX.sub(lambda m: bytes.fromhex(m[1].decode()), raw)


def _decode_words(value: str) -> str:
    """A header value with its RFC 2047 words decoded in their charsets as mail
    readers read them (WHATWG labels: gb2312 as GB18030, iso-8859-1 as windows-1252;
    ``rag_sources.charsets``), and as UTF-8 where the label is stale. Adjacent words in
    one charset are joined before decoding: a character may be split between them."""
    value = _FOLD.sub("", value)
    out: list[str] = []
    run = bytearray()  # the bytes of adjacent words in one charset
    label = ""
    last = 0
    after_word = False
    for word in _ENCODED_WORD.finditer(value):
        gap = value[last : word.start()]
        last = word.end()
        try:
            data = _word_bytes(word[2], word[3])
        except ValueError:  # not base64 or Q after all: kept as written
            data = None
        if data is not None and after_word and not gap.strip():
            # the space between two encoded words is no text (RFC 2047 6.2)
            if word[1].lower() != label.lower():
                out.append(decode_declared(bytes(run), label).text)
                run.clear()
        else:
            if run:
                out.append(decode_declared(bytes(run), label).text)
                run.clear()
            out.append(gap)
        if data is None:
            out.append(word[0])
            after_word = False
            continue
        label = word[1]
        run.extend(data)
        after_word = True
    if run:
        out.append(decode_declared(bytes(run), label).text)
    out.append(value[last:])
    return _clean("".join(out))


def _raw_values(msg: Message, name: str) -> list[str]:
    """A header's values as written (``raw_items`` parses nothing)."""
    return [str(value) for key, value in msg.raw_items() if key.lower() == name]


def _decoded(value: str) -> str:
    """A raw header value with its RFC 2047 words decoded where they can be."""
    with contextlib.suppress(Exception):  # else kept as written
        return _decode_words(value)
    return _clean(value)


def _raw_header(msg: Message, name: str) -> list[str]:
    """A header's values without policy.default's parsing (which can raise on a
    malformed one, and is quadratic in a value's length): RFC 2047 words decoded."""
    return [_decoded(value) for value in _raw_values(msg, name)]


def _header(msg: Message, name: str, warnings: list[str]) -> str:
    raw = _raw_values(msg, name)
    if not raw:
        return ""
    if len(raw[0]) > PARSED_HEADER_CHARS or (name == "subject" and "=?" in raw[0]):
        # the email package decodes encoded words with Python's codec of the label
        # (strict gb2312, latin-1), not as mail readers do
        return _decoded(raw[0])
    try:
        value = msg.get(name)
        return "" if value is None else _clean(str(value))
    except Exception:
        warnings.append(f"the {name} header is malformed; read as written")
        return _decoded(raw[0])


def _ids(text: str) -> list[str]:
    return _MESSAGE_ID.findall(text)


def _first_id(text: str) -> str | None:
    ids = _ids(text)
    if ids:
        return ids[0]
    text = text.strip().strip("<>").strip()
    return text if "@" in text and " " not in text else None  # not "In-Reply-To: yes"


def _addresses(msg: Message, name: str, warnings: list[str]) -> list[Address]:
    """Every address of every ``name`` header (a message may carry two Cc headers)."""
    found: list[Address] = []
    raw = _raw_values(msg, name)
    try:
        if any(len(value) > PARSED_HEADER_CHARS for value in raw):
            found = _raw_addresses(raw)
        else:
            for header in msg.get_all(name) or []:
                for addr in getattr(header, "addresses", ()):
                    display, address = _clean(addr.display_name), _clean(addr.addr_spec)
                    found.append(Address(display, address.lower()))
        if any("=?" in value for value in raw):
            # encoded display names as mail readers decode them (see _decode_words)
            names = {
                addr.lower(): _decoded(display)
                for display, addr in email.utils.getaddresses(raw)
                if "=?" in display
            }
            found = [Address(names.get(a.address, a.name), a.address) for a in found]
    except Exception:
        warnings.append(f"the {name} header is malformed; read as written")
        found = _raw_addresses([_decoded(value) for value in raw])
    result = []
    for addr in found:
        address = addr.address if "@" in addr.address else ""
        shown = " ".join(addr.name.split()).strip("'\" ")
        if address or shown:
            result.append(Address(shown, address))
    return list(dict.fromkeys(result))


def _raw_addresses(values: list[str]) -> list[Address]:
    """The addresses of raw header values (getaddresses is linear in their length),
    display names decoded; bare addresses when even that fails."""
    found: list[Address] = []
    for value in values:
        try:
            pairs = email.utils.getaddresses([value])
        except Exception:  # comments nested thousands deep
            pairs = [("", addr) for addr in _BARE_ADDRESS.findall(value)]
        for display, addr in pairs:
            found.append(Address(_decoded(display) if "=?" in display else display, addr.lower()))
    return found


def _date(msg: Message, warnings: list[str]) -> datetime | None:
    try:
        if any(len(value) > PARSED_HEADER_CHARS for value in _raw_values(msg, "date")):
            raise ValueError("read raw")
        header = msg.get("date")
        moment = getattr(header, "datetime", None)
    except Exception:
        moment = None
        raw = _raw_header(msg, "date")
        if raw:
            try:
                moment = email.utils.parsedate_to_datetime(raw[0])
            except Exception:  # a malformed date, from a lenient parser
                moment = None
    if moment is None:
        if _raw_values(msg, "date"):
            warnings.append("the Date header cannot be read; the message is undated")
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


# ---------------------------------------------------------------------------
# body and attachments


def _text_of(part: Message, warnings: list[str]) -> str:
    """A text part's content in its declared charset as mail readers read it (WHATWG
    labels, an HTML part's ``<meta charset>`` when the part names none), or as UTF-8
    where the label is unknown or stale (``rag_sources.charsets``)."""
    try:
        payload = part.get_payload(decode=True)
    except (ValueError, AssertionError, LookupError, TypeError):
        payload = None
    if not isinstance(payload, bytes):
        return ""
    try:
        label = part.get_content_charset()
    except (ValueError, LookupError, TypeError, UnicodeError):
        label = "?"
    if label is None and part.get_content_type() == "text/html":
        label = markup_charset(payload)
    what = "the HTML part" if part.get_content_type() == "text/html" else "the text part"
    decoded = decode_declared(payload, label, what=what, undeclared="us-ascii")
    if decoded.warning and decoded.warning not in warnings:
        warnings.append(decoded.warning)
    return decoded.text


def _filename(part: Message) -> str | None:
    try:
        name = part.get_filename()
    except Exception:
        name = None
    if name:
        return _clean(" ".join(str(name).split()))
    return None


def _attachment_parts(msg: EmailMessage) -> list[Message]:
    """The message's attachments, in order (what ``Attachment.number`` counts)."""
    return [p for p in msg.walk() if not p.is_multipart() and _is_attachment(p, msg)]


def _is_attachment(part: Message, msg: Message) -> bool:
    """A part with a file name; not a one-part message's own inline text (an HTML
    mail sent with ``filename=test.html``)."""
    if _filename(part) is None:
        return False
    if part is msg and part.get_content_maintype() == "text":
        return (part.get_content_disposition() or "inline") == "attachment"
    return True


def _header_bytes(part: Message) -> int:
    return sum(len(name) + len(value) + 3 for name, value in part.raw_items())


def _walk(
    msg: Message, limits: Limits, warnings: list[str], stopped: str | None = None
) -> list[tuple[Message, Message | None]]:
    """The parts read of ``msg``, in ``msg.walk()`` order, each with its parent: one
    walk without recursion, up to ``max_mime_parts`` parts and ``max_nesting_depth``
    levels, without the parts whose header block is over ``max_header_bytes``. The
    parts not read are counted in ``warnings`` (but for the cap ``stopped`` the
    parser, which already said so) and taken out of the message, so that nothing
    reads them later (``get_body``)."""
    kept: dict[int, tuple[Message, Message | None]] = {}
    skipped = {"max_mime_parts": 0, "max_nesting_depth": 0, "max_header_bytes": 0}
    stack: list[tuple[Message, Message | None, int, str | None]] = [(msg, None, 0, None)]
    containers: list[Message] = []
    while stack:
        part, parent, depth, dropped = stack.pop()
        if dropped is None:
            if depth > limits.max_nesting_depth:
                dropped = "max_nesting_depth"
            elif len(kept) >= limits.max_mime_parts:
                dropped = "max_mime_parts"
            elif parent is not None and _header_bytes(part) > limits.max_header_bytes:
                dropped = "max_header_bytes"
        if dropped is None:
            kept[id(part)] = (part, parent)
        else:
            skipped[dropped] += 1
        payload = part.get_payload() if part.is_multipart() else None
        if isinstance(payload, list) and payload:
            if dropped is None:
                containers.append(part)
            stack.extend((child, part, depth + 1, dropped) for child in reversed(payload))
    for container in containers:
        children = container.get_payload()
        if any(id(child) not in kept for child in children):
            container.set_payload([child for child in children if id(child) in kept])
    for setting, count in skipped.items():
        if not count or setting == stopped:
            continue
        what = {
            "max_mime_parts": f"past max_mime_parts ({limits.max_mime_parts:,})",
            "max_nesting_depth": f"nested deeper than max_nesting_depth "
            f"({limits.max_nesting_depth})",
            "max_header_bytes": f"with a header block over max_header_bytes "
            f"({limits.max_header_bytes:,} bytes)",
        }[setting]
        warnings.append(
            f"{count:,} MIME parts {what} were not read; raise [limits] {setting} to read them"
        )
    return list(kept.values())


def _read_body(msg: EmailMessage, record: MailMessage, limits: Limits, stopped: str | None) -> None:
    warnings = record.warnings
    content_type = msg.get_content_type()
    if content_type == "multipart/encrypted" or content_type == "application/pkcs7-mime":
        record.encrypted = True
    texts: list[str] = []
    html: list[str] = []
    walked = _walk(msg, limits, warnings, stopped)
    parts = [part for part, _ in walked]
    parents = {id(part): parent for part, parent in walked}
    try:
        body = msg.get_body(("plain", "html"))
    except Exception:
        body = None
    plain_body = body is not None and body.get_content_type() == "text/plain"
    attachments: list[Message] = []
    for part in parts:
        if part.is_multipart():
            continue
        part_type = part.get_content_type()
        name = _filename(part)
        if name is None and part_type == "message/rfc822":
            continue
        if name is not None and _is_attachment(part, msg):
            attachments.append(part)
            record.attachments.append(_attachment(part, name, len(attachments)))
            continue
        disposition = (part.get_content_disposition() or "inline").lower()
        if part is body:
            (texts if part_type == "text/plain" else html).append(_text_of(part, warnings))
        elif disposition == "inline" and part_type == "text/plain" and _is_shown(part, parents):
            texts.append(_text_of(part, warnings))  # a second inline text part (a patch)
        elif body is None and part_type == "text/html" and not html:
            html.append(_text_of(part, warnings))
    _PARTS[msg] = attachments
    if body is None and not parts[1:] and msg.get_content_maintype() == "text":
        texts.append(_text_of(msg, warnings))  # a text/* message get_body passed over
    record.text = "\n\n".join(t.strip("\n") for t in texts if t.strip())
    if not plain_body and html:
        record.html = html[0]


def _is_shown(part: Message, parents: dict[int, Message | None]) -> bool:
    """Whether an inline text part is read with the body: not an alternative of it."""
    parent = parents.get(id(part))
    return parent is None or parent.get_content_subtype() != "alternative"


def _attachment(part: Message, name: str, number: int) -> Attachment:
    content_type = part.get_content_type()
    payload = part.get_payload(decode=True)
    size = len(payload) if isinstance(payload, bytes) else 0
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in ATTACHMENT_SUFFIXES:
        suffix = _SUFFIX_BY_TYPE.get(content_type, "") if not suffix else ""
    return Attachment(number, name, content_type, size, suffix or None)


def record_json(record: MailMessage) -> dict[str, Any]:
    """The metadata the index keeps of a message (JSON-safe)."""
    return {
        "message_id": record.message_id,
        "in_reply_to": record.in_reply_to,
        "references": list(record.references),
        "thread": record.thread,
        "from": record.sender.as_json() if record.sender else None,
        "to": [a.as_json() for a in record.to],
        "cc": [a.as_json() for a in record.cc],
        "date": record.date.isoformat() if record.date else None,
        "attachments": [a.filename for a in record.attachments],
    }
