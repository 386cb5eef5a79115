"""File names and tags of the notes ragline writes into a source (clips, an agent's
remembered notes, tags proposed by a model), one rule for all of them.

- A file name stem is the text's letters and digits of any script, lower case,
  joined by '-', at most ``MAX_SLUG_BYTES`` UTF-8 bytes (a path part must stay
  well under the 255 bytes file systems allow, room left for ``-N.md``); Windows'
  device names get a suffix, so a vault synced there can hold the file.
- A tag is what the Markdown parser keeps from ``tags:``: lower case, no '#',
  words joined by '-', '/' for nested tags, not digits alone, at most
  ``MAX_TAG_CHARS`` characters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from rag_sources.errors import RaglineError

MAX_SLUG_BYTES = 120
MAX_TAG_CHARS = 64
_TAG = re.compile(r"\w[\w/-]*")
# Names Windows keeps for devices.
_RESERVED_NAMES = {"con", "prn", "aux", "nul"} | {
    f"{p}{n}" for p in ("com", "lpt") for n in range(10)
}


class TagError(RaglineError):
    """A value given as a tag cannot be one."""


def file_slug(text: str, fallback: str) -> str:
    """A file name stem for ``text``; ``fallback`` when it has no letter or digit."""
    lowered = unicodedata.normalize("NFKC", text).lower()
    slug = "-".join("".join(c if c.isalnum() else " " for c in lowered).split())
    slug = slug.encode("utf-8")[:MAX_SLUG_BYTES].decode("utf-8", "ignore").strip("-")
    if not slug:
        return fallback
    return f"{slug}-{fallback}" if slug in _RESERVED_NAMES else slug


def clean_tag(value: str) -> str | None:
    """``value`` as a tag; None for nothing but '#', '/' and spaces; ``TagError`` for
    what cannot be a tag."""
    tag = "-".join(value.strip().lstrip("#").strip("/").lower().split())
    if not tag:
        return None
    if len(tag) > MAX_TAG_CHARS or not _TAG.fullmatch(tag) or tag.replace("/", "").isdigit():
        raise TagError(
            f"{value!r} is not a usable tag: use letters, digits, '-', '_' and '/' "
            f"(not digits alone), at most {MAX_TAG_CHARS} characters"
        )
    return tag


def clean_tags(values: Iterable[str]) -> list[str]:
    """Each of ``values`` as a tag, each tag once, in their order (``TagError`` for the
    first that cannot be one)."""
    tags: list[str] = []
    for value in values:
        tag = clean_tag(value)
        if tag is not None and tag not in tags:
            tags.append(tag)
    return tags
