"""The clippings folder: ``<folder>/<YYYY-MM>/<slug>.md`` with YAML frontmatter (url,
canonical_url, title, author, published, fetched, tags), a PDF kept beside its note,
nothing ever overwritten (a name taken gets ``-2``, ``-3``…), and the clip of a URL
already clipped found by the frontmatter of the notes there."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from rag_sources.clipping.download import ClipError
from rag_sources.clipping.extract import Extracted, normalized_url
from rag_sources.naming import file_slug

MAX_SAME_NAME = 1000  # notes of one month with the same slug
# Finding an earlier clip reads the start of each note of the folder, up to these caps.
MAX_SCANNED_NOTES = 20_000
HEAD_BYTES = 8192


@dataclass(frozen=True)
class Saved:
    """A clip as written: its note (and PDF) relative to the source's root."""

    note: str
    attachment: str | None = None


def find_clip(folder: Path, urls: Iterable[str]) -> Path | None:
    """The note under ``folder`` whose frontmatter ``url`` or ``canonical_url`` is one
    of ``urls`` (compared normalized), if any; reads at most ``MAX_SCANNED_NOTES``
    notes, ``HEAD_BYTES`` of each."""
    wanted = {normalized_url(u) for u in urls if u}
    if not wanted or not folder.is_dir():
        return None
    scanned = 0
    for directory, subfolders, files in os.walk(folder):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        for name in sorted(files):
            if not name.lower().endswith(".md"):
                continue
            scanned += 1
            if scanned > MAX_SCANNED_NOTES:
                return None
            path = Path(directory, name)
            if wanted & _clip_urls(path):
                return path
    return None


def _clip_urls(path: Path) -> set[str]:
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return set()
    match = re.match(r"---\r?\n(.*?)\r?\n---\s*(?:\r?\n|$)", head, re.DOTALL)
    if not match:
        return set()
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return set()
    if not isinstance(meta, dict):
        return set()
    found = (meta.get("url"), meta.get("canonical_url"))
    return {normalized_url(u) for u in found if isinstance(u, str) and u.strip()}


def note_text(
    clip: Extracted, url: str, fetched: datetime, tags: list[str], attachment: str | None
) -> str:
    """The note of a clip: frontmatter, a title heading, then the page's text (or an
    embed of its PDF)."""
    meta: dict[str, object] = {
        "url": url,
        "canonical_url": clip.canonical_url,
        "title": clip.title,
        "author": clip.author,
        "published": clip.published.isoformat() if clip.published else None,
        "fetched": fetched.isoformat(timespec="seconds"),
        "tags": tags,
    }
    if clip.description:
        meta["description"] = clip.description
    header = yaml.safe_dump(
        meta, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000
    )
    heading = f"# {clip.title}\n\n"
    if attachment is not None:
        return f"---\n{header}---\n\n{heading}![[{attachment}]]\n"
    body = clip.body.rstrip("\n") + "\n"
    if body.startswith(heading.rstrip("\n") + "\n"):
        heading = ""  # the page's own first heading is its title
    return f"---\n{header}---\n\n{heading}{body}"


def save(
    root: Path,
    folder: str,
    clip: Extracted,
    url: str,
    fetched: datetime,
    tags: list[str],
    pdf: bytes | None = None,
) -> Saved:
    """Write the clip's note (and PDF) under ``root/folder/<YYYY-MM>/`` with names no
    file has yet (created exclusively: nothing is overwritten)."""
    month = root / folder / fetched.strftime("%Y-%m")
    try:
        month.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ClipError(
            f"cannot create {month} ({exc.strerror or exc}); check its permissions"
        ) from None
    base = file_slug(clip.title, "clip")
    for n in range(1, MAX_SAME_NAME + 1):
        stem = base if n == 1 else f"{base}-{n}"
        note = month / f"{stem}.md"
        attachment = month / f"{stem}.pdf" if pdf is not None else None
        if attachment is not None and not _create(attachment, pdf or b""):
            continue
        text = note_text(clip, url, fetched, tags, attachment.name if attachment else None)
        if _create(note, text.encode("utf-8")):
            rel = note.relative_to(root).as_posix()
            return Saved(rel, attachment.relative_to(root).as_posix() if attachment else None)
        if attachment is not None:
            attachment.unlink(missing_ok=True)  # ours: just made, for a note that clashed
    raise ClipError(
        f"{month}: {MAX_SAME_NAME} clips are already named {base!r}; rename some of them"
    )


def _create(path: Path, data: bytes) -> bool:
    """Write ``data`` to a new file at ``path``; False when a file is there already."""
    try:
        handle = path.open("xb")
    except FileExistsError:
        return False
    except OSError as exc:
        raise ClipError(f"cannot write {path} ({exc.strerror or exc})") from None
    try:
        with handle:
            handle.write(data)
    except OSError as exc:
        path.unlink(missing_ok=True)  # ours, half written (a full disk)
        raise ClipError(f"cannot write {path} ({exc.strerror or exc})") from None
    return True
