"""Listing a mail source's messages and attachments, cheaply, with a cache.

What is a mailbox inside the source folder (the safe walker lists it: nothing outside
the source is read, links leading out are refused):

- a **Maildir**: any folder with ``cur/`` and/or ``new/`` (nested, Maildir++ dot
  folders); its messages are the files in ``cur/`` and ``new/`` whose names do not
  start with ``.`` (``.gitkeep``, ``..:2,S``: Maildir readers pass them over). Key
  ``<maildir>/<unique part of the file name>`` (before ``:2,`` / ``!2,``), so a flag
  change or a move from ``new/`` to ``cur/`` is the same message;
- an **mbox**: a ``.mbox`` / ``.mbx`` file, or any file whose first bytes are ``From ``
  (Thunderbird's extension-less mailboxes). Key ``<mbox path>/<Message-ID>`` (the
  SHA-1 of the message when it has none or one that is no plain path, ``~2``… for a
  repeated id: the next free suffix of each id is kept, so 20,000 messages of one id
  list in linear time);
- a **message file**: ``.eml``, Apple Mail ``.emlx`` / ``.partial.emlx``, and any
  other file that starts with mail header lines (notmuch-style folders). Key = its
  path.

Fingerprints: an mbox message's SHA-1; a message file's size and mtime (nothing read).
Each mbox's split (offset, length, SHA-1, key of every message) is cached in the
kind's state folder: an unchanged file costs a stat; a file that only grew (its last
known message is still there, byte for byte) is read from that message on; anything
else is split again. Attachments are child items ``<message key>/attachments/<n>-<name>``:
a message is read once to find them, then its attachment list is cached with its
fingerprint, so an unchanged source costs stats only.

A message is read within the source's ``[limits]`` (``rag_sources.kinds.mail.message``):
one whose header block is over ``max_header_bytes`` is keyed by its SHA-1, listed
without attachments, and made a problem when it is parsed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from rag_sources.errors import SourceUnavailableError
from rag_sources.kinds.mail.detect import MAILDIR_PARTS
from rag_sources.kinds.mail.mbox import MboxSpan, looks_like_mbox, message_bytes, split_mbox
from rag_sources.kinds.mail.message import header_message_id, message_key_id, message_outline
from rag_sources.listing import ListedItem
from rag_sources.scanning import (
    ERROR,
    FileStat,
    OutsideSourceError,
    iter_source_files,
    open_source_file,
    source_root,
)

if TYPE_CHECKING:
    # the config only names a type here: the config imports this module to list items
    from rag_sources.kinds.mail.config import MailSourceConfig

CACHE_VERSION = 1
ROOT_FOLDER = "Inbox"  # the folder of messages at the top of the source (Maildir++'s name)
_MBOX_SUFFIXES = (".mbox", ".mbx")
_MESSAGE_SUFFIXES = (".eml", ".emlx")
# never mail: passed over without reading (a mail client's indexes and summaries)
_NOT_MAIL = frozenset(
    {
        ".msf", ".sqlite", ".db", ".json", ".dat", ".plist", ".pdf", ".png", ".jpg", ".gif",
        ".zip", ".gz", ".xz", ".bz2", ".html", ".htm", ".js", ".css", ".index", ".cache",
        ".md", ".py", ".toml", ".lock", ".sqlite-wal", ".sqlite-shm", ".ini", ".xml", ".head",
    }
)  # fmt: skip
_MAILDIR_UNIQUE = re.compile(r"[:!;]2,.*$")
_HEADER_LINE = re.compile(rb"^[!-9;-~]+:")
_MAIL_HEADERS = re.compile(
    rb"^(from|date|subject|message-id|received|return-path|to|mime-version|delivered-to)\s*:",
    re.I | re.M,
)
_SNIFF_BYTES = 2048


@dataclass(frozen=True)
class MailEntry:
    """Where one item of a mail source is: a message, or an attachment of one."""

    key: str
    fingerprint: str
    size: int | None
    form: str  # "mbox", "file" (Maildir, .eml, loose message) or "emlx"
    path: str  # the file, relative to the source root
    folder: str  # the folder facet's value
    offset: int = 0  # an mbox message's bytes
    length: int = 0
    message_key: str | None = None  # an attachment's message
    attachment: int = 0  # an attachment's number in its message (1-based)
    attachment_name: str = ""
    problem: str | None = None
    severity: str = "skipped"

    @property
    def is_attachment(self) -> bool:
        return self.message_key is not None


@dataclass
class MailListing:
    root: Path
    entries: list[MailEntry] = field(default_factory=list)
    problems: list[ListedItem] = field(default_factory=list)
    # what the listing read: mbox files split whole or from their last known message
    stats: dict[str, int] = field(
        default_factory=lambda: {
            "mbox_full_reads": 0, "mbox_tail_reads": 0, "mbox_bytes_read": 0,
            "messages_read": 0, "files_sniffed": 0,
        }
    )  # fmt: skip

    def by_key(self) -> dict[str, MailEntry]:
        return {e.key: e for e in self.entries}


def list_mail_items(config: MailSourceConfig, state_dir: Path | None) -> Iterator[ListedItem]:
    """The items of a mail source as the next scan will list them (for ``ragline
    status``): reads the cache in ``state_dir`` and never writes it."""
    listing = scan_mail(config, state_dir, write=False)
    for entry in listing.entries:
        yield ListedItem(
            entry.key, entry.fingerprint, entry.size, None, entry.problem, entry.severity
        )
    yield from listing.problems


def scan_mail(config: MailSourceConfig, state_dir: Path | None, write: bool = True) -> MailListing:
    """Every message and attachment of the source, in a stable order; the caches in
    ``state_dir`` are updated when ``write``. Raises ``SourceUnavailableError`` when
    the source cannot be reached."""
    return _Scanner(config, state_dir, write).scan()


def source_files(config: MailSourceConfig) -> tuple[Path, list[FileStat]]:
    """The real root and the files of the source (one file when ``path`` is an mbox)."""
    path = Path(config.path)
    if path.is_file():
        real = Path(os.path.realpath(path))
        try:
            st = os.stat(real)
        except OSError as exc:
            raise SourceUnavailableError(
                f"source {config.name!r}: mbox file {path} cannot be read ({exc.strerror}); "
                "fix `path` in the config"
            ) from None
        return real.parent, [FileStat(real.name, st.st_size, st.st_mtime_ns)]
    root = source_root(config)
    return root, list(iter_source_files(config))


def folder_name(mailbox: str, form: str) -> str:
    """The folder facet of a mailbox at ``mailbox`` (a path relative to the root):
    an mbox without ``.mbox``, Thunderbird's ``X.sbd/`` as ``X/``, Maildir++
    ``.Lists.linux`` as ``Lists/linux``, Apple Mail's ``Work.mbox/…/Messages`` as
    ``Work``; the top of the source is ``Inbox``."""
    parts = [p for p in mailbox.split("/") if p]
    if form == "emlx":
        for index in range(len(parts) - 1, -1, -1):
            if parts[index].endswith(".mbox"):
                parts = parts[: index + 1]
                break
    shown: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part.endswith(".sbd"):
            part = part[:-4]
        elif part.endswith(_MBOX_SUFFIXES) and (last or form == "emlx"):
            part = part.rsplit(".", 1)[0]
        if part.startswith(".") and len(part) > 1:
            shown.extend(p for p in part[1:].split(".") if p)
        elif part:
            shown.append(part)
    return "/".join(shown) or ROOT_FOLDER


def read_entry_bytes(root: Path, entry: MailEntry) -> bytes:
    """The RFC 822 bytes of a message entry (an mbox span checked against its
    SHA-1). Raises ``OSError``, ``OutsideSourceError`` or ``MailboxChanged``."""
    fd = open_source_file(root, entry.path)
    with os.fdopen(fd, "rb") as handle:
        if entry.form == "mbox":
            handle.seek(entry.offset)
            raw = handle.read(entry.length)
            if hashlib.sha1(raw).hexdigest() != entry.fingerprint:
                raise MailboxChanged(
                    "the mailbox changed since it was listed; the next run reads it again"
                )
            return message_bytes(raw)
        data = handle.read()
    return file_message_bytes(data, entry.form)


class MailboxChanged(Exception):
    """An mbox changed between listing and reading."""


def file_message_bytes(data: bytes, form: str) -> bytes:
    """A message file's RFC 822 bytes: an .emlx without its byte count and plist, a
    message saved with an mbox ``From `` line without it."""
    if form == "emlx":
        first, _, rest = data.partition(b"\n")
        try:
            count = int(first.strip())
        except ValueError:
            return rest
        return rest[:count]
    if data.startswith(b"From "):
        return data.partition(b"\n")[2]
    return data


def _sniff(head: bytes) -> str | None:
    """ "mbox", "file" (a message) or None, from a file's first bytes."""
    if looks_like_mbox(head):
        return "mbox"
    block = head.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    if not _HEADER_LINE.match(block) or not _MAIL_HEADERS.search(block):
        return None
    for line in block.split(b"\n")[:-1] if len(head) >= _SNIFF_BYTES else block.split(b"\n"):
        if line and not line[:1].isspace() and not _HEADER_LINE.match(line):
            return None
    return "file"


class _Scanner:
    def __init__(self, config: MailSourceConfig, state_dir: Path | None, write: bool):
        self.config = config
        self.state_dir = state_dir
        self.write = write and state_dir is not None
        self.files_cache: dict[str, Any] = {}
        self.new_files_cache: dict[str, Any] = {}

    def scan(self) -> MailListing:
        root, files = source_files(self.config)
        listing = MailListing(root)
        self.listing = listing
        self.files_cache = self._load("files.json").get("files", {})
        keys: set[str] = set()
        suffixes: dict[str, int] = {}
        for stat in files:
            if stat.problem is not None:
                listing.problems.append(
                    ListedItem(
                        stat.path,
                        f"{stat.severity}:{stat.problem}",
                        problem=stat.problem,
                        severity=stat.severity,
                        unavailable=stat.unavailable,
                    )
                )
                continue
            form = self._form(root, stat)
            if form is None:
                continue
            entries = self._mbox(root, stat) if form == "mbox" else self._file(root, stat, form)
            renamed: dict[str, str] = {}
            for entry in entries:
                if entry.message_key is not None and entry.message_key in renamed:
                    # an attachment of a renamed message: under its message's new key
                    message_key = renamed[entry.message_key]
                    entry = replace(
                        entry,
                        key=message_key + entry.key[len(entry.message_key) :],
                        message_key=message_key,
                    )
                if entry.key in keys:  # a loose file named like a Maildir message
                    key = free_key(entry.key, keys, suffixes)
                    if not entry.is_attachment:
                        renamed[entry.key] = key
                    entry = replace(entry, key=key)
                keys.add(entry.key)
                listing.entries.append(entry)
        if self.write:
            self._save("files.json", {"version": CACHE_VERSION, "files": self.new_files_cache})
        return listing

    # ---- what a file is ----------------------------------------------------------

    def _form(self, root: Path, stat: FileStat) -> str | None:
        parts = stat.path.split("/")
        name = parts[-1].lower()
        if len(parts) >= 2 and parts[-2] in MAILDIR_PARTS:
            return None if name.startswith(".") else "file"
        if name.endswith(_MBOX_SUFFIXES):
            return "mbox"
        if name.endswith(".emlx"):
            return "emlx"
        if name.endswith(".eml"):
            return "file"
        if PurePosixPath(name).suffix in _NOT_MAIL:
            return None
        cached = self.files_cache.get(stat.path)
        if cached and cached.get("stat") == [stat.size, stat.mtime_ns] and "sniff" in cached:
            self.new_files_cache.setdefault(stat.path, {})["sniff"] = cached["sniff"]
            self.new_files_cache[stat.path]["stat"] = [stat.size, stat.mtime_ns]
            return cached["sniff"]
        try:
            fd = open_source_file(root, stat.path)
            with os.fdopen(fd, "rb") as handle:
                head = handle.read(_SNIFF_BYTES)
        except OSError:
            return None  # not readable now: not known to be mail
        self.listing.stats["files_sniffed"] += 1
        form = _sniff(head)
        self.new_files_cache[stat.path] = {"stat": [stat.size, stat.mtime_ns], "sniff": form}
        return form

    # ---- message files -------------------------------------------------------------

    def _file(self, root: Path, stat: FileStat, form: str) -> list[MailEntry]:
        parts = stat.path.split("/")
        if len(parts) >= 2 and parts[-2] in MAILDIR_PARTS and form == "file":
            maildir = "/".join(parts[:-2])
            unique = _MAILDIR_UNIQUE.sub("", parts[-1]) or parts[-1]
            key = f"{maildir}/{unique}" if maildir else unique
            folder = folder_name(maildir, "maildir")
        else:
            key = stat.path
            folder = folder_name("/".join(parts[:-1]), form)
        fingerprint = f"{stat.size}:{stat.mtime_ns}"
        entry = MailEntry(key, fingerprint, stat.size, form, stat.path, folder)
        if stat.size is not None and stat.size > self.config.max_message_bytes:
            return [_too_large(entry, self.config.max_message_bytes)]
        if not self.config.attachments:
            return [entry]
        # by key, not path: a Maildir flag change renames the file, not the message
        cached = self.files_cache.get("\0" + key) or {}
        attachments = (
            cached.get("attachments") if cached.get("fingerprint") == fingerprint else None
        )
        if attachments is None:
            try:
                data = read_entry_bytes(root, entry)
            except (OSError, MailboxChanged):
                data = b""
            attachments = self._attachments(data)
        self.new_files_cache["\0" + key] = {"fingerprint": fingerprint, "attachments": attachments}
        return [entry, *self._attachment_entries(entry, attachments)]

    def _attachments(self, data: bytes) -> list[list[Any]]:
        """[number, item name, size, indexable] of each attachment of a message."""
        self.listing.stats["messages_read"] += 1
        if not data:
            return []
        try:
            _, attachments = message_outline(data, self.config.limits)
        except Exception:  # a broken message (or the email package on one): parse reports it
            return []
        return [[a.number, a.item_name, a.size, bool(a.suffix)] for a in attachments]

    def _attachment_entries(
        self, message: MailEntry, attachments: list[list[Any]]
    ) -> list[MailEntry]:
        entries = []
        for number, item_name, size, indexable in attachments:
            if not indexable:
                continue
            entry = MailEntry(
                f"{message.key}/attachments/{item_name}", f"{message.fingerprint}#{number}", size,
                message.form, message.path, message.folder, message.offset, message.length,
                message.key, number, item_name,
            )  # fmt: skip
            if size > self.config.max_attachment_bytes:
                entry = _too_large(entry, self.config.max_attachment_bytes, "max_attachment_bytes")
            entries.append(entry)
        return entries

    # ---- mbox files ----------------------------------------------------------------

    def _mbox(self, root: Path, stat: FileStat) -> list[MailEntry]:
        cache_name = _mbox_cache_name(stat.path)
        cache = self._load(cache_name)
        if cache.get("path") != stat.path:
            cache = {}
        messages: list[list[Any]] | None = None
        if cache.get("stat") == [stat.size, stat.mtime_ns]:
            messages = cache["messages"]
        else:
            try:
                messages = self._split(root, stat, cache)
            except (OSError, OutsideSourceError) as exc:
                reason = exc.strerror or str(exc)
                self.listing.problems.append(
                    ListedItem(
                        stat.path + "/",
                        f"error:{reason}",
                        problem=f"cannot read the mailbox ({reason.lower()}); what the index "
                        "holds of it is kept until it can be read",
                        severity=ERROR,
                        unavailable=True,
                    )
                )
                return []
            cache = {
                "path": stat.path, "stat": [stat.size, stat.mtime_ns], "messages": messages,
                "last_read": self._last_read,
            }  # fmt: skip
            if self.write:
                self._save(cache_name, cache)
        mailbox = stat.path
        folder = folder_name(mailbox, "mbox")
        entries: list[MailEntry] = []
        for offset, length, sha1, key, attachments in messages:
            entry = MailEntry(
                f"{mailbox}/{key}", sha1, length, "mbox", stat.path, folder, offset, length
            )
            if length > self.config.max_message_bytes:
                entries.append(_too_large(entry, self.config.max_message_bytes))
                continue
            entries.append(entry)
            if self.config.attachments:
                entries.extend(self._attachment_entries(entry, attachments))
        return entries

    def _split(self, root: Path, stat: FileStat, cache: dict[str, Any]) -> list[list[Any]]:
        """The messages of an mbox that changed: read from the last known message
        when the file only grew, else whole."""
        old: list[list[Any]] = cache.get("messages") or []
        fd = open_source_file(root, stat.path)
        with os.fdopen(fd, "rb") as handle:
            old_size = (cache.get("stat") or [0])[0]
            if old and stat.size is not None and stat.size > old_size:
                last = old[-1]
                spans = split_mbox(handle, last[0])
                first = next(spans, None)
                if first is not None and (first.offset, first.length, first.sha1) == tuple(
                    last[:3]
                ):
                    tail = list(spans)
                    self.listing.stats["mbox_tail_reads"] += 1
                    self.listing.stats["mbox_bytes_read"] += stat.size - last[0]
                    self._last_read = {"mode": "tail", "from": last[0], "size": stat.size}
                    return old + self._describe(handle, tail, old)
            spans_all = list(split_mbox(handle, 0))
            self.listing.stats["mbox_full_reads"] += 1
            self.listing.stats["mbox_bytes_read"] += stat.size or 0
            self._last_read = {"mode": "full", "from": 0, "size": stat.size}
            by_sha = {m[2]: m for m in old}
            return self._describe(handle, spans_all, [], by_sha)

    def _describe(
        self,
        handle: Any,
        spans: list[MboxSpan],
        kept: list[list[Any]],
        known: dict[str, list[Any]] | None = None,
    ) -> list[list[Any]]:
        """[offset, length, sha1, key, attachments] of new spans (a span whose SHA-1
        the cache knows is not read again)."""
        used = {m[3] for m in kept}
        suffixes: dict[str, int] = {}
        described = []
        for span in spans:
            cached = (known or {}).get(span.sha1)
            if cached is not None:
                base, attachments = _base_key(cached[3]), cached[4]
            else:
                handle.seek(span.offset)
                raw = handle.read(min(span.length, self.config.max_message_bytes))
                data = message_bytes(raw)
                base, attachments = self._mbox_message(data, raw)
            key = free_key(base, used, suffixes)
            used.add(key)
            described.append([span.offset, span.length, span.sha1, key, attachments])
        return described

    def _mbox_message(self, data: bytes, raw: bytes) -> tuple[str, list[list[Any]]]:
        """The key part and attachments of a new mbox message (its headers only when
        attachments are off)."""
        self.listing.stats["messages_read"] += 1
        attachments: list[list[Any]] = []
        try:
            if self.config.attachments:
                message_id, found = message_outline(data, self.config.limits)
                attachments = [[a.number, a.item_name, a.size, bool(a.suffix)] for a in found]
            else:
                message_id = header_message_id(data, self.config.limits)
        except Exception:  # a broken message: keyed by its bytes; parse reports it
            message_id = None
        return message_key_id(raw, message_id), attachments

    # ---- cache files ---------------------------------------------------------------

    _last_read: dict[str, Any] | None = None

    def _load(self, name: str) -> dict[str, Any]:
        if self.state_dir is None:
            return {}
        try:
            raw = json.loads((self.state_dir / name).read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict) or raw.get("version", CACHE_VERSION) != CACHE_VERSION:
            return {}
        return raw

    def _save(self, name: str, payload: dict[str, Any]) -> None:
        assert self.state_dir is not None
        path = self.state_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"version": CACHE_VERSION, **payload}
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(payload, ensure_ascii=False), "utf-8")
        os.replace(temporary, path)


def _mbox_cache_name(path: str) -> str:
    return f"mbox/{hashlib.sha1(path.encode('utf-8', 'surrogateescape')).hexdigest()[:20]}.json"


def mbox_cache(state_dir: Path, path: str) -> dict[str, Any]:
    """The cached split of the mbox at ``path`` (for tests and benchmarks)."""
    try:
        return json.loads((state_dir / _mbox_cache_name(path)).read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def _base_key(key: str) -> str:
    return re.sub(r"~\d+$", "", key)


def free_key(base: str, used: set[str], suffixes: dict[str, int]) -> str:
    """``base``, else the first of ``base~2``, ``base~3``… not in ``used``. ``suffixes``
    keeps the last suffix given per base: as ``used`` only grows, every one below it
    is taken, so a run of one base costs O(1) per key, not a search from ``~2``."""
    count = suffixes.get(base, 1)
    key = base if count == 1 else f"{base}~{count}"
    while key in used:
        count += 1
        key = f"{base}~{count}"
    suffixes[base] = count
    return key


def _too_large(entry: MailEntry, limit: int, setting: str = "max_message_bytes") -> MailEntry:
    return replace(
        entry,
        problem=f"larger than {setting} ({entry.size:,} > {limit:,} bytes); raise {setting} "
        "in the source's config to index it",
        severity="skipped",
    )
