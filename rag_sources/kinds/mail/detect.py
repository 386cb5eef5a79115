"""Recognising mail for `ragline init`: a Maildir (nested, mbsync/offlineimap
folders, Maildir++ ``.Folder``), mbox and ``.eml``/``.emlx`` files, an mbox file."""

from __future__ import annotations

import re
from pathlib import Path

from rag_sources.detect import Census, FolderUnit, and_list, listed, subfolders

MAIL_SUFFIXES = (".mbox", ".eml", ".emlx", ".mbx")
MAILDIR_PARTS = ("cur", "new")  # where a Maildir's messages are (tmp/: deliveries under way)
_MAILDIR_INFO = re.compile(r"[:!]2,")  # a Maildir message's flags: "1700000000.M1P2.host:2,S"
_MAILDIR_UNIQUE = re.compile(r"^\d{9,}\.")  # a delivered message's name: "<time>.<unique>..."
_MAILDIR_SAMPLE = 20  # names of a lone cur/ or new/ folder looked at
_NAMED_MAILDIRS = 3  # Maildirs named in the detection reason
KIND = "mail"


def maildir_parts_of(folder: Path, names: set[str]) -> tuple[str, ...] | None:
    """Which of cur/, new/ and tmp/ (among the subfolder ``names``) make ``folder`` a
    Maildir, or None when it is not one: cur/ with new/ or tmp/, new/ with tmp/, or a
    lone cur/ (a lone new/ only when it holds messages: a folder called "new" among
    documents is common); and in each case, the files in cur/ and new/ named as
    messages are (``1700000000.M1P2.host:2,S``, a name without a suffix), not as
    documents (``plan.docx``)."""
    parts = tuple(p for p in ("cur", "new", "tmp") if p in names)
    if not parts or parts == ("tmp",):
        return None
    sample = [
        name
        for part in MAILDIR_PARTS
        if part in parts
        for name, is_dir in listed(folder / part, _MAILDIR_SAMPLE)
        if not is_dir and name[:1] != "."
    ]
    if not sample:
        return parts if parts != ("new",) else None
    messages = sum(
        bool(_MAILDIR_INFO.search(n) or _MAILDIR_UNIQUE.match(n)) or "." not in n for n in sample
    )
    return parts if 2 * messages > len(sample) else None


def top_maildir(folder: Path) -> str | None:
    parts = maildir_parts_of(folder, subfolders(folder))
    return None if parts is None else f"found {and_list(f'{part}/' for part in parts)}: a Maildir"


def is_mail_file(name: str) -> bool:
    return name.lower().endswith(MAIL_SUFFIXES) or bool(_MAILDIR_INFO.search(name))


def maildir_unit(folder: Path, names: set[str], budget: int) -> FolderUnit | None:
    """A Maildir met by the census: its messages in cur/ and new/."""
    parts = maildir_parts_of(folder, names)
    if parts is None:
        return None
    files = entries = 0
    for part in MAILDIR_PARTS:
        if part in parts:
            found = listed(folder / part, max(1, budget - entries))
            entries += len(found)
            files += sum(not is_dir and not name.startswith(".") for name, is_dir in found)
    return FolderUnit(files, entries, frozenset((*MAILDIR_PARTS, "tmp")))


def maildirs_text(census: Census) -> str:
    """ "3 Maildirs (INBOX, Sent, …)", relative paths."""
    maildirs = census.units.get(KIND, [])
    count = len(maildirs)
    names = ", ".join(maildirs[:_NAMED_MAILDIRS])
    more = ", …" if count > _NAMED_MAILDIRS else ""
    return f"{count} Maildir{'s' if count != 1 else ''} ({names}{more})"


def mail_census(census: Census) -> str | None:
    """Mail when its Maildirs hold at least as many files as the rest, or when 80 % of
    the files are mail; else a note for the fallback about the Maildirs found."""
    mail, counted = census.claimed[KIND], census.counted
    cut = census.cut_note()
    within = f" ({cut})" if cut else ""
    maildirs = census.units.get(KIND)
    if maildirs and mail >= counted - mail:
        return f"found {maildirs_text(census)}: {mail} of {counted} files are mail{within}"
    if counted and mail / counted >= 0.8:
        return f"{mail} of {counted} files are mail (mbox, .eml, .emlx){within}"
    if maildirs:
        census.notes.append(
            f"it also holds {maildirs_text(census)}: add their folder as a source of its own, "
            "or give --kind mail"
        )
    return None
