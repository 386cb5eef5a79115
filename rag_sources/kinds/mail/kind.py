"""``kind = "mail"``: mbox files, Maildir folders, ``.eml`` and Apple Mail ``.emlx``.

Listing (``rag_sources.kinds.mail.listing``) finds the mailboxes, keys every message
(``<mbox>/<Message-ID>``, ``<maildir>/<unique name>``, or the path of a message
file) and its indexable attachments (``<message key>/attachments/<n>-<name>``),
with per-mailbox caches in the kind's state folder, so an unchanged source costs
stats and an mbox that grew is read from its last known message.

A message is one document: a header section (From, To, Cc, Date, Subject, Folder,
embedded so a sender's name finds their mail), the author's own text (text/plain,
else the HTML part cleaned to text), and quoted replies and the signature as
sections shown with the message but never embedded or keyword-indexed (a reply
would otherwise match everything it quotes); an attachments section links to the
attachment documents, which the document parsers read and which link back.

Items have no mtime (``mtime_ns=None``): a message's date is its Date header, so
``modified`` (date filters, hit lines) is when it was sent, not when a mail client
last touched the file. The sensor's change signal is a stat walk: mbox sizes and
mtimes, the mtimes of Maildir ``cur/`` and ``new/`` folders (a new, deleted or
renamed message changes its folder's), and message files' sizes and mtimes.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from email.message import EmailMessage
from html import escape
from pathlib import Path
from typing import Any

from rag_sources.errors import SourceUnavailableError
from rag_sources.formats import router
from rag_sources.formats.html import cap_depth, html_text
from rag_sources.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    Link,
    ParsedDocument,
    ParseOptions,
)
from rag_sources.formats.text import cap_text
from rag_sources.kinds.base import ItemStat, SourceKind
from rag_sources.kinds.mail.config import MailSourceConfig
from rag_sources.kinds.mail.listing import (
    MAILDIR_PARTS,
    MailboxChanged,
    MailEntry,
    MailListing,
    read_entry_bytes,
    scan_mail,
)
from rag_sources.kinds.mail.message import (
    MailMessage,
    MessageError,
    MessageTooLarge,
    attachment_payload,
    read_message,
    record_json,
)
from rag_sources.kinds.mail.quotes import QUOTE, SIGNATURE, split_text
from rag_sources.limits import DEFAULT_LIMITS
from rag_sources.scanning import OutsideSourceError

MESSAGE_PARSER = "email/4"  # 2: refers: facets; 3: HTML quotes; 4: WHATWG charsets
ATTACHMENT_PARSER = "mail-attachment/1"
_ATTACHMENT_KEY = re.compile(r"/attachments/\d+-[^/]+$")


class MailKind(SourceKind):
    name = "mail"
    config_type = MailSourceConfig

    _listing: MailListing | None = None
    _entries: dict[str, MailEntry] | None = None
    _parsed: tuple[str, MailMessage, EmailMessage] | None = None  # the last message read

    @property
    def mail_config(self) -> MailSourceConfig:
        return self.config  # type: ignore[return-value]

    # ---- list ----------------------------------------------------------------

    def list_items(self) -> Iterator[ItemStat]:
        listing = scan_mail(self.mail_config, self.state_dir, write=True)
        self._listing, self._entries = listing, listing.by_key()
        for entry in listing.entries:
            yield ItemStat(entry.key, entry.fingerprint, entry.size, None, entry.problem, entry.severity)  # fmt: skip
        for item in listing.problems:
            yield ItemStat(
                item.key, item.fingerprint, item.size, None, item.problem, item.severity,
                item.unavailable,
            )  # fmt: skip

    @property
    def last_listing(self) -> MailListing | None:
        """What the last ``list_items`` read (mbox files split whole or from their tail)."""
        return self._listing

    def change_signal(self) -> str:
        """A stat walk: no message is read (see the module docstring)."""
        digest = hashlib.sha256()
        for line in change_stats(self.mail_config):
            digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
        return digest.hexdigest()[:20]

    # ---- watch ---------------------------------------------------------------

    def watch_roots(self) -> list[Path]:
        return [Path(self.config.path)]

    def watches(self, path: Path) -> bool:
        try:
            parts = path.relative_to(self.config.path).parts
        except ValueError:
            return False
        # A Maildir delivery writes into tmp/ and then moves the file into new/.
        if len(parts) >= 2 and parts[-2] == "tmp":
            return False
        return not any(part in self.config.ignore_dirs for part in parts)

    # ---- load ----------------------------------------------------------------

    def _entry(self, key: str) -> MailEntry | None:
        if self._entries is None or key not in self._entries:
            # Another stage's instance: the listing's caches make this a stat walk.
            listing = scan_mail(self.mail_config, self._state_dir, write=False)
            self._listing, self._entries = listing, listing.by_key()
        return self._entries.get(key)

    def content_hash(self, item: ItemStat) -> str:
        # The key is part of the hash: the same message in two folders is two
        # documents, each with its own folder and links (a parse is never shared).
        entry = self._entry(item.key)
        if entry is None:
            raise FileNotFoundError(2, "the message is no longer in its mailbox")
        if entry.form == "mbox":
            content = entry.fingerprint.partition("#")[0]  # the message's SHA-1
        else:
            try:
                content = hashlib.sha1(self._bytes(entry)).hexdigest()
            except OutsideSourceError as exc:
                raise ItemSkipped(exc.strerror or str(exc)) from None
            except MailboxChanged as exc:
                raise FileNotFoundError(2, str(exc)) from None
        suffix = f"#{entry.attachment}" if entry.is_attachment else ""
        return hashlib.sha256(f"{item.key}\0{content}{suffix}".encode()).hexdigest()

    def _bytes(self, entry: MailEntry) -> bytes:
        assert self._listing is not None
        return read_entry_bytes(self._listing.root, entry)

    def file_type(self, key: str) -> str | None:
        if _ATTACHMENT_KEY.search(key):
            return router.file_type(key) or "txt"
        return "email"

    def parser_version(self, key: str) -> str:
        file_type = self.file_type(key)
        if file_type == "email":
            return MESSAGE_PARSER
        return f"{ATTACHMENT_PARSER}+{router.PARSER_VERSIONS.get(file_type or '', 'none')}"

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        entry = self._entry(key)
        if entry is None:
            raise ItemError("the message is no longer in its mailbox; run the source again")
        record, msg = self._read(entry.message_key or entry.key, entry)
        if entry.is_attachment:
            return self._attachment_document(entry, record, msg, options)
        return message_document(entry, record, self._attachment_keys(entry, record), options)

    def _read(self, message_key: str, entry: MailEntry) -> tuple[MailMessage, EmailMessage]:
        """A message read once for itself and its attachments (parsed in a row)."""
        if self._parsed is not None and self._parsed[0] == message_key:
            return self._parsed[1], self._parsed[2]
        try:
            data = self._bytes(entry)
        except OutsideSourceError as exc:
            raise ItemSkipped(exc.strerror or str(exc)) from None
        except MailboxChanged as exc:
            raise ItemError(str(exc)) from None
        try:
            # the source's limits, as the listing read it (the same attachments)
            record, msg = read_message(data, self.mail_config.limits)
        except MessageTooLarge as exc:
            raise ItemSkipped(str(exc)) from None
        except MessageError as exc:
            raise ItemError(f"a broken message: {exc}") from None
        self._parsed = (message_key, record, msg)
        return record, msg

    def _attachment_keys(self, entry: MailEntry, record: MailMessage) -> dict[int, str]:
        if not self.mail_config.attachments:
            return {}
        return {
            a.number: f"{entry.key}/attachments/{a.item_name}"
            for a in record.indexable(self.mail_config.max_attachment_bytes)
        }

    def _attachment_document(
        self, entry: MailEntry, record: MailMessage, msg: EmailMessage, options: ParseOptions
    ) -> ParsedDocument:
        assert entry.message_key is not None
        try:
            data = attachment_payload(msg, entry.attachment)
        except MessageError as exc:
            raise ItemError(str(exc)) from None
        if not data.strip():
            raise ItemSkipped("an empty attachment")
        file_type = self.file_type(entry.key) or "txt"
        document = router.parse_bytes(data, entry.attachment_name, entry.key, file_type, options)
        attachment = next((a for a in record.attachments if a.number == entry.attachment), None)
        name = attachment.filename if attachment else entry.attachment_name
        metadata = {
            **document.metadata,
            "message": entry.message_key,
            "filename": name,
            "subject": record.subject or None,
            "from": record.sender.as_json() if record.sender else None,
            "folder": entry.folder,
            "thread": record.thread,
            "date": record.date.isoformat() if record.date else None,
        }
        links = (*document.links, Link("/" + entry.message_key, None, None, None, False, 1))
        return replace(
            document,
            title=document.title or name,
            metadata=metadata,
            links=links,
            created=record.date or document.created,
            updated=record.date or document.updated,
        )

    def facets(self, key: str, metadata: dict[str, Any]) -> list[str]:
        facets = super().facets(key, metadata)
        sender = metadata.get("from") or {}
        name = " ".join(str(sender.get("name") or "").split())
        address = str(sender.get("address") or "").lower()
        senders = [v for v in dict.fromkeys((address, _fold(name))) if v]
        facets += [f"from:{v}" for v in senders]
        if name or address:
            facets.append(f"author_name:{name or address}")
        folder = str(metadata.get("folder") or "")
        if folder:
            facets.append(f"folder:{folder}")
            parts = folder.split("/")
            facets += [f"folder_in:{'/'.join(parts[:n])}" for n in range(1, len(parts))]
        if metadata.get("thread"):
            facets.append(f"thread:{metadata['thread']}")
        if self.file_type(key) != "email":
            return facets
        facets += [f"author:{v}" for v in dict.fromkeys((_fold(name), address)) if v]
        recipients: list[str] = []
        for person in [*(metadata.get("to") or []), *(metadata.get("cc") or [])]:
            recipients += [
                str(person.get("address") or "").lower(),
                _fold(str(person.get("name") or "")),
            ]
        facets += [f"to:{v}" for v in dict.fromkeys(recipients) if v]
        if metadata.get("message_id"):
            facets.append(f"message_id:{metadata['message_id']}")
        # Every id it answers or cites: a thread is followed from a parent to replies
        # whose References name it anywhere (not only first), as a union-find would.
        cited = [metadata.get("in_reply_to"), *(metadata.get("references") or [])]
        facets += [f"refers:{i}" for i in dict.fromkeys(i for i in cited if i)]
        return facets


def _fold(text: str) -> str:
    return " ".join(text.split()).lower()


def message_text(
    record: MailMessage, max_depth: int | None = None, warnings: list[str] | None = None
) -> str:
    """The body as text: text/plain, else the HTML part cleaned to text, its quoted
    replies (``<blockquote>``, Gmail's ``gmail_quote``) turned into ``> `` lines so
    they are told apart like a plain-text message's. HTML nested deeper than
    ``max_depth`` is read as plain text (a warning goes to ``warnings``)."""
    if record.text.strip():
        return record.text
    if not record.html:
        return ""
    limit = DEFAULT_LIMITS.max_nesting_depth if max_depth is None else max_depth
    # Capped before the quotes are found: a parser's tree building is depth × tags.
    html, removed = cap_depth(record.html, limit)
    extracted = html_text(_html_quotes_as_lines(html, limit), boilerplate=False, max_depth=limit)
    if warnings is not None:
        warnings.extend(extracted.warnings)
        if removed and not extracted.warnings:
            warnings.append(
                f"elements nested deeper than {limit:,} levels read as plain text "
                "([limits] max_nesting_depth)"
            )
    return extracted.text


def _html_quotes_as_lines(html: str, max_depth: int) -> str:
    """``html`` with each outermost quote replaced by its text, every line prefixed
    with ``> ``."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    outermost = [node for node in tree.css(_HTML_QUOTES) if not _inside_quote(node)]
    for node in outermost:
        quoted = html_text(
            f"<html><body>{node.html}</body></html>", boilerplate=False, max_depth=max_depth
        ).text
        lines = "<br>".join("&gt; " + escape(line) for line in quoted.strip().split("\n"))
        replacement = LexborHTMLParser(f"<p>{lines}</p>").body
        if replacement is not None and replacement.child is not None:
            node.replace_with(replacement.child)
    return tree.html or html


_HTML_QUOTES = "blockquote, div.gmail_quote"


def _is_quote(node: Any) -> bool:
    return node.tag == "blockquote" or "gmail_quote" in (node.attributes.get("class") or "")


def _inside_quote(node: Any) -> bool:
    parent = node.parent
    while parent is not None:
        if _is_quote(parent):
            return True
        parent = parent.parent
    return False


def message_document(
    entry: MailEntry, record: MailMessage, attachment_keys: dict[int, str], options: ParseOptions
) -> ParsedDocument:
    """One message as a document (see the module docstring)."""
    warnings = list(record.warnings)
    subject = record.subject or "(no subject)"
    context = (subject,)
    builder = BodyBuilder()
    header = [f"Subject: {subject}"]
    if record.sender:
        header.append(f"From: {record.sender.shown()}")
    if record.to:
        header.append("To: " + ", ".join(a.shown() for a in record.to))
    if record.cc:
        header.append("Cc: " + ", ".join(a.shown() for a in record.cc))
    if record.date:
        header.append(f"Date: {record.date.isoformat(timespec='minutes')}")
    header.append(f"Folder: {entry.folder}")
    builder.add("header", "Header", "\n".join(header), context)
    text = cap_text(
        message_text(record, options.limits.max_nesting_depth, warnings), options, warnings
    )
    if not text.strip() and record.encrypted:
        warnings.append("an encrypted message: only its headers are indexed")
    counts = {"text": 0, QUOTE: 0}
    for kind, run in split_text(text):
        if kind == QUOTE:
            counts[QUOTE] += 1
            builder.add(f"quote-{counts[QUOTE]}", "Quoted reply", run, context, embed=False)
        elif kind == SIGNATURE:
            builder.add("signature", "Signature", run, context, embed=False)
        else:
            counts["text"] += 1
            anchor = "body" if counts["text"] == 1 else f"body-{counts['text']}"
            builder.add(anchor, "Message", run, context)
    links: list[Link] = []
    if record.attachments:
        lines = []
        for attachment in record.attachments:
            size = (
                f"{attachment.size / 1024:,.0f} KB"
                if attachment.size >= 1024
                else f"{attachment.size} B"
            )
            lines.append(f"- {attachment.filename} ({attachment.content_type}, {size})")
        section = builder.add("attachments", "Attachments", "\n".join(lines), context)
        if section is not None:
            for offset, attachment in enumerate(record.attachments):
                target = attachment_keys.get(attachment.number)
                if target:
                    links.append(
                        Link("/" + target, None, None, None, False, section.line_start + offset)
                    )
    metadata = {
        **record_json(record),
        "subject": record.subject or None,
        "folder": entry.folder,
        "mailbox": entry.path if entry.form == "mbox" else _mailbox_of(entry.path),
    }
    return builder.document(
        title=subject,
        metadata=metadata,
        links=tuple(links),
        created=record.date,
        updated=record.date,
        warnings=tuple(warnings),
    )


def _mailbox_of(path: str) -> str:
    """The Maildir (or folder) of a message file."""
    parts = path.split("/")
    if len(parts) >= 2 and parts[-2] in MAILDIR_PARTS:
        return "/".join(parts[:-2]) or "."
    return path


def change_stats(config: MailSourceConfig) -> list[str]:
    """``path size mtime`` of every mbox and message file, and ``path/ mtime`` of
    every Maildir ``cur/`` and ``new/`` folder (whose files are not stat'ed)."""
    path = Path(config.path)
    try:
        if path.is_file():
            st = os.stat(path)
            return [f"{path.name} {st.st_size} {st.st_mtime_ns}"]
        root = os.path.realpath(path, strict=True)
    except OSError as exc:
        raise SourceUnavailableError(
            f"source {config.name!r}: {path} cannot be read ({exc.strerror}); fix `path` "
            "in the config or reconnect its disk"
        ) from None
    ignored = set(config.ignore_dirs)
    lines: list[str] = []
    stack = [("", root)]
    while stack:
        rel, folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            lines.append(f"{rel} unreadable {exc.errno}")
            continue
        for entry in entries:
            name = rel + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in ignored:
                        continue
                    if entry.name in MAILDIR_PARTS:
                        lines.append(f"{name}/ {entry.stat(follow_symlinks=False).st_mtime_ns}")
                    else:
                        stack.append((name + "/", entry.path))
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    lines.append(f"{name} {st.st_size} {st.st_mtime_ns}")
                else:
                    lines.append(f"{name} link")
            except OSError:
                lines.append(f"{name} unreadable")
    return lines
