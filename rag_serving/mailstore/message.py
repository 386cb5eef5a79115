"""One RFC 822 message read into a structured record (stdlib ``email``, policy.default).

Every read is guarded: a broken header is read raw (decoded with replacement), an
unknown charset falls back to UTF-8 with replacement, a broken MIME part is passed
over with a warning. ``read_message`` raises ``MessageError`` only when nothing of
the message can be read.

The body is the text/plain part, else the HTML part (kept as HTML: the indexing side
cleans it to text); other inline text parts without a file name (a patch sent as a
second part) are appended to it. Parts with a file name are attachments; the ones
whose type the document parsers read (PDF, office, text, Markdown, HTML, CSV) are
*indexable* and become child items.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import policy
from email.header import decode_header, make_header
from email.message import EmailMessage, Message
from email.parser import BytesParser
from pathlib import PurePosixPath
from typing import Any

# attachment file suffixes the document parsers read (rag_assets.formats.router)
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


class MessageError(Exception):
    """The message cannot be read at all; ``str(e)`` says why."""


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
    """The part of a key naming a message: its Message-ID when it is printable ASCII,
    else the SHA-1 of its bytes."""
    if message_id and _KEY_SAFE_ID.match(message_id) and "/attachments/" not in message_id:
        return message_id
    return hashlib.sha1(data).hexdigest()


def parse_bytes(data: bytes) -> EmailMessage:
    """The message object of ``data`` (never raises: the parser records defects)."""
    return BytesParser(policy=policy.default).parsebytes(data)  # type: ignore[return-value]


def header_message_id(data: bytes) -> str | None:
    """The Message-ID of a message, from its headers alone."""
    msg = BytesParser(policy=policy.default).parsebytes(data, headersonly=True)
    return _first_id(_header(msg, "message-id", []))


def read_message(data: bytes) -> tuple[MailMessage, EmailMessage]:
    """The record of a message, and its parsed object (for attachment payloads)."""
    if not data.strip():
        raise MessageError("an empty message")
    try:
        msg = parse_bytes(data)
    except Exception as exc:  # the parser is lenient; this is a bug in it
        raise MessageError(f"the message cannot be parsed ({type(exc).__name__}: {exc})") from None
    warnings: list[str] = []
    if not any(msg.get(h) is not None for h in ("from", "subject", "date", "message-id")):
        head = data[:200].decode("utf-8", "replace")
        if ":" not in head.split("\n", 1)[0]:
            raise MessageError("not a mail message (no header lines)")
    message_id = _first_id(_header(msg, "message-id", warnings))
    # an id without "@" is no id ("In-Reply-To: <yes>", git send-email's prompt answer)
    references = [i for i in _ids(_header(msg, "references", warnings)) if "@" in i]
    in_reply_to = next((i for i in _ids(_header(msg, "in-reply-to", warnings)) if "@" in i), None)
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
    _read_body(msg, record)
    return record, msg


def attachment_payload(msg: EmailMessage, number: int) -> bytes:
    """The decoded bytes of attachment ``number`` (1-based) of a parsed message."""
    for index, part in enumerate(_attachment_parts(msg), start=1):
        if index == number:
            payload = part.get_payload(decode=True)
            return payload if isinstance(payload, bytes) else b""
    raise MessageError(f"the message has no attachment {number}")


# ---------------------------------------------------------------------------
# headers


def _clean(text: str) -> str:
    """Header text as valid Unicode: raw 8-bit bytes (kept as surrogate escapes) are
    read as UTF-8, else Latin-1."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("latin-1")


def _raw_header(msg: Message, name: str) -> list[str]:
    """A header's values without policy.default's parsing (which can raise on a
    malformed one): RFC 2047 words decoded where they can be."""
    values = []
    for key, value in msg.raw_items():
        if key.lower() != name:
            continue
        value = str(value)
        with contextlib.suppress(Exception):  # else kept as written
            value = str(make_header(decode_header(value)))
        values.append(_clean(value))
    return values


def _header(msg: Message, name: str, warnings: list[str]) -> str:
    try:
        value = msg.get(name)
        return "" if value is None else _clean(str(value))
    except Exception:
        warnings.append(f"the {name} header is malformed; read as written")
        raw = _raw_header(msg, name)
        return raw[0] if raw else ""


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
    try:
        headers = msg.get_all(name) or []
        for header in headers:
            for addr in getattr(header, "addresses", ()):
                found.append(Address(_clean(addr.display_name), _clean(addr.addr_spec).lower()))
    except Exception:
        found = []
        warnings.append(f"the {name} header is malformed; read as written")
        for value in _raw_header(msg, name):
            for display, addr in email.utils.getaddresses([value]):
                found.append(Address(display, addr.lower()))
    result = []
    for addr in found:
        address = addr.address if "@" in addr.address else ""
        shown = " ".join(addr.name.split()).strip("'\" ")
        if address or shown:
            result.append(Address(shown, address))
    return list(dict.fromkeys(result))


def _date(msg: Message, warnings: list[str]) -> datetime | None:
    try:
        header = msg.get("date")
        moment = getattr(header, "datetime", None)
    except Exception:
        moment = None
        raw = _raw_header(msg, "date")
        if raw:
            try:
                moment = email.utils.parsedate_to_datetime(raw[0])
            except (TypeError, ValueError, IndexError):
                moment = None
    if moment is None:
        if msg.get("date") is not None:
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
    """A text part's content; an unknown or wrong charset falls back to UTF-8."""
    try:
        content = part.get_content()  # type: ignore[attr-defined]
        if isinstance(content, str):
            return _clean(content)
    except (LookupError, UnicodeError, ValueError, AssertionError, AttributeError, KeyError):
        charset = part.get_content_charset() or "?"
        warnings.append(f"text in an unknown or wrong charset ({charset}); read as UTF-8")
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload.decode("utf-8", "replace")
    return ""


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


def _read_body(msg: EmailMessage, record: MailMessage) -> None:
    warnings = record.warnings
    content_type = msg.get_content_type()
    if content_type == "multipart/encrypted" or content_type == "application/pkcs7-mime":
        record.encrypted = True
    texts: list[str] = []
    html: list[str] = []
    try:
        body = msg.get_body(("plain", "html"))
    except Exception:
        body = None
    try:
        parts = list(msg.walk())
    except Exception as exc:  # a part loop or a broken structure
        warnings.append(f"the MIME structure is broken ({type(exc).__name__}); body only")
        parts = [msg]
    plain_body = body is not None and body.get_content_type() == "text/plain"
    number = 0
    for part in parts:
        if part.is_multipart():
            continue
        part_type = part.get_content_type()
        name = _filename(part)
        if name is None and part_type == "message/rfc822":
            continue
        if name is not None and _is_attachment(part, msg):
            number += 1
            record.attachments.append(_attachment(part, name, number))
            continue
        disposition = (part.get_content_disposition() or "inline").lower()
        if part is body:
            (texts if part_type == "text/plain" else html).append(_text_of(part, warnings))
        elif disposition == "inline" and part_type == "text/plain" and _is_shown(part, msg):
            texts.append(_text_of(part, warnings))  # a second inline text part (a patch)
        elif body is None and part_type == "text/html" and not html:
            html.append(_text_of(part, warnings))
    if body is None and not parts[1:] and msg.get_content_maintype() == "text":
        texts.append(_text_of(msg, warnings))  # a text/* message get_body passed over
    record.text = "\n\n".join(t.strip("\n") for t in texts if t.strip())
    if not plain_body and html:
        record.html = html[0]


def _is_shown(part: Message, msg: EmailMessage) -> bool:
    """Whether an inline text part is read with the body: not an alternative of it."""
    parent = _parent(msg, part)
    return parent is None or parent.get_content_subtype() != "alternative"


def _parent(msg: Message, child: Message) -> Message | None:
    for part in msg.walk():
        if part.is_multipart():
            payload = part.get_payload()
            if isinstance(payload, list) and any(p is child for p in payload):
                return part
    return None


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
