"""Saving a note into a notes source's inbox folder, as a person would write it.

The note is an ordinary Markdown file with YAML frontmatter, in a folder inside a
configured source whose kind indexes Markdown notes (decided by the kind's
``claims_file``, never by its name). Nothing is ever overwritten: a name that is
taken gets ``-2``, ``-3``… and the file is created with an exclusive create. Nothing
is written outside the folder: the file name is a slug of the title (no separators,
no dots in front), and the folder and the final path are resolved (symbolic links
included) and checked to lie inside the source.

Caps (one-line errors beyond them): a title of ``MAX_TITLE_CHARS`` characters on one
line, a body of ``MAX_BODY_CHARS``, ``MAX_TAGS`` tags of ``MAX_TAG_CHARS`` each; a
file name of ``MAX_SLUG_BYTES`` UTF-8 bytes before ``-N.md``.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath

import yaml

from rag_sources.config import FileSourceConfig
from rag_sources.errors import RaglineError
from rag_sources.naming import clean_tags, file_slug
from rag_sources.scanning import may_change_source, source_root

MAX_TITLE_CHARS = 200
MAX_BODY_CHARS = 100_000
MAX_TAGS = 20
# Names tried before giving up (`note`, `note-2` … `note-1000`).
MAX_NAME_TRIES = 1000
NOTE_SUFFIX = ".md"


class InboxError(RaglineError):
    """The note cannot be saved (bad input, or an inbox that cannot take it)."""


@dataclass(frozen=True)
class Inbox:
    """A folder inside a notes source, resolved and checked."""

    source: FileSourceConfig
    root: Path  # the source's real folder
    folder: Path  # the inbox's real folder, inside ``root``


@dataclass(frozen=True)
class SavedNote:
    source: str
    path: str  # relative to the source's root, POSIX
    wiki_link: str  # [[inbox/slug]]


def holds_notes(source: FileSourceConfig) -> bool:
    """Whether ``source`` is a folder whose kind indexes Markdown notes."""
    return bool(getattr(source, "path", None)) and type(source).claims_file("note" + NOTE_SUFFIX)


def check_title(title: str) -> str:
    """``title`` stripped; one line, not empty, within the cap."""
    title = title.strip()
    if not title:
        raise InboxError("the title is empty; give the note a short title")
    if len(title) > MAX_TITLE_CHARS:
        raise InboxError(
            f"the title is {len(title)} characters long; keep it under {MAX_TITLE_CHARS} "
            "and put the rest in the body"
        )
    if any(unicodedata.category(c).startswith("C") for c in title):
        raise InboxError("the title holds a line break or control character; keep it on one line")
    return title


def check_body(body: str) -> str:
    if len(body) > MAX_BODY_CHARS:
        raise InboxError(
            f"the body is {len(body)} characters long; the limit is {MAX_BODY_CHARS}: save "
            "a summary, or several notes"
        )
    return body


def check_tags(tags: list[str]) -> list[str]:
    """Tags as the Markdown parser keeps them (``rag_sources.naming``), each once."""
    if len(tags) > MAX_TAGS:
        raise InboxError(f"{len(tags)} tags given; the limit is {MAX_TAGS}")
    return clean_tags(tags)


def note_text(
    title: str,
    body: str,
    *,
    tags: list[str],
    links: list[str],
    link_lines: list[str],
    created: datetime,
    user: str,
    origin: str,
) -> str:
    """The note: YAML frontmatter, the body, and a list of the links it came from."""
    meta: dict[str, object] = {
        "title": title,
        "created": created.isoformat(timespec="seconds"),
        "tags": tags,
        "source": origin,
        "user": user,
    }
    if links:
        meta["links"] = links
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000)
    text = f"---\n{front}---\n\n{body.strip()}\n"
    if link_lines:
        text += "\n## Sources\n\n" + "".join(f"- {line}\n" for line in link_lines)
    return text


def open_inbox(source: FileSourceConfig, folder: str) -> Inbox:
    """The folder ``folder`` (relative, validated by the config) of ``source``, made
    when missing; refused when it is, or leads through, a link out of the source."""
    root = source_root(source)
    current = root
    for part in PurePosixPath(folder).parts:
        current = current / part
        if not os.path.lexists(current):
            try:
                current.mkdir()
            except FileExistsError:
                pass  # made meanwhile: checked below like any other
            except OSError as exc:
                raise InboxError(
                    f"cannot make the inbox folder {folder!r} in source {source.name!r}: "
                    f"{exc.strerror or exc}"
                ) from None
        real = Path(os.path.realpath(current))
        if not real.is_relative_to(root):
            raise InboxError(
                f"the inbox folder {folder!r} of source {source.name!r} leads outside the "
                "source (a symbolic link); choose another [remember] folder"
            )
        if not real.is_dir():
            raise InboxError(
                f"{folder!r} in source {source.name!r} is not a folder; choose another "
                "[remember] folder"
            )
        current = real
    probe = current / f"probe{NOTE_SUFFIX}"
    if not may_change_source(source, root, probe):
        shown = probe.relative_to(root).parent.as_posix()
        raise InboxError(
            f"notes in {shown!r} of source {source.name!r} would not be indexed (the "
            "source's include, exclude or ignore_dirs leave them out); choose another "
            "[remember] folder or widen the source's include"
        )
    return Inbox(source, root, current)


def save_note(inbox: Inbox, title: str, text: str) -> SavedNote:
    """Write ``text`` to a new file named after ``title`` in ``inbox``; never overwrites."""
    slug = file_slug(title, "note")
    for n in range(1, MAX_NAME_TRIES + 1):
        name = f"{slug}{NOTE_SUFFIX}" if n == 1 else f"{slug}-{n}{NOTE_SUFFIX}"
        path = inbox.folder / name
        # The name is one component, and the folder was resolved: the file is inside.
        if path.parent != inbox.folder or not path.is_relative_to(inbox.root):
            raise InboxError(f"refused to write {name!r} outside the inbox folder")
        try:
            with open(path, "x", encoding="utf-8", newline="\n") as out:
                out.write(text)
        except FileExistsError:
            continue
        except OSError as exc:
            raise InboxError(f"cannot write the note {name!r}: {exc.strerror or exc}") from None
        relative = path.relative_to(inbox.root).as_posix()
        return SavedNote(inbox.source.name, relative, f"[[{relative.removesuffix(NOTE_SUFFIX)}]]")
    raise InboxError(
        f"{MAX_NAME_TRIES} notes are already named after this title; choose another title"
    )
