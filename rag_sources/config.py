"""What every source's config shares: the strict model base, the walker's rules
(``FileSourceConfig``), OCR settings and the attachment types; each kind's own model
is in its folder (``rag_sources/kinds/<kind>/config.py``)."""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from rag_sources.errors import ConfigError
from rag_sources.limits import Limits
from rag_sources.listing import ListedItem

if TYPE_CHECKING:
    from rag_sources.detect import Census, FolderUnit

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
MISSING_SOURCE_HINT = "fix `path` (or mount the disk that holds it)"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def close_hint(name: str, candidates: Iterable[str], limit: int = 3) -> str:
    """'; did you mean ...?' for close matches of ``name``, else nothing."""
    from rag_sources.suggest import close_matches

    matches = close_matches(name, candidates, limit)
    return f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


def absolute_path(path: Path, base: Path) -> Path:
    return path if path.is_absolute() else (base / path).resolve()


KEYWORD_LANGUAGES = {
    "auto", "none", "ar", "da", "de", "el", "en", "es", "fi", "fr", "hu", "it", "nl", "no",
    "pt", "ro", "ru", "sv", "ta", "tr", "hi", "ja", "zh", "ko", "th",
}  # fmt: skip


class FileSourceConfig(Strict):
    """What every kind that reads a folder of files shares (the shared walker's rules)."""

    # Whether the kind's state folder holds what the source itself no longer does (a
    # feed's past entries): beside a remote index then, shared by every writer host.
    shared_state: ClassVar[bool] = False
    name: str
    path: Path
    include: list[str] = ["**/*"]
    exclude: list[str] = []
    ignore_dirs: list[str] = [".obsidian", ".git", ".trash"]
    # The language of the source's text for keyword search (stemming, stop words):
    # "auto" detects it per chunk; scripts without spaces (Chinese, Japanese, Korean,
    # Thai) are matched by characters whatever this says.
    language: str = "auto"
    # Caps on one item: ``[limits]`` with this source's ``[sources.limits]`` over it.
    limits: Limits = Limits()
    # Ask the [llm] model for tags of each document added after the first index.
    auto_tags: bool = False

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        if value not in KEYWORD_LANGUAGES:
            raise ValueError(
                f'unknown language {value!r}{close_hint(value, KEYWORD_LANGUAGES)} ("auto", '
                f'"none" or an ISO 639-1 code: {", ".join(sorted(KEYWORD_LANGUAGES - {"auto", "none"}))})'
            )
        return value

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG_RE.match(value):
            raise ValueError(
                f"{value!r} is not a valid source name: use 1-63 lowercase letters, "
                "digits, '-' or '_', starting with a letter or digit"
            )
        return value

    # The [[sources]] block `ragline init` and `sources add` write for a new source of
    # the kind: `{name}` and `{path}` (already escaped for TOML) are filled in.
    SOURCE_BLOCK: ClassVar[str] = ""

    @classmethod
    def source_block(cls, name: str, path: str) -> str:
        """The ``[[sources]]`` block of a new source of this kind for ``path`` (a folder,
        a file or a URL, escaped for a TOML string)."""
        return cls.SOURCE_BLOCK.format(name=name, path=path)

    # `ragline init` asks the kinds in this order: those with a marker (.git,
    # metadata.db) before those a census of the files decides, the fallback last.
    DETECT_ORDER: ClassVar[int] = 100

    @classmethod
    def detect_marker(cls, folder: Path) -> str | None:
        """Why ``folder`` is surely of this kind, by a marker in it (None: no marker)."""
        return None

    @classmethod
    def detect_census(cls, census: Census) -> str | None:
        """Why the census of a folder's files makes it this kind (None: it does not;
        a kind may add to ``census.notes`` what the fallback should say)."""
        return None

    @classmethod
    def claims_file(cls, name: str) -> bool:
        """Whether a file called ``name`` is this kind's (counted for it in a census)."""
        return False

    @classmethod
    def claim_folder(cls, folder: Path, subfolders: set[str], budget: int) -> FolderUnit | None:
        """A folder this kind takes whole (a Maildir), counted within ``budget`` entries."""
        return None

    @classmethod
    def enters(cls, folder: Path) -> bool:
        """Whether a census walks into the dot folder ``folder`` for this kind."""
        return False

    @classmethod
    def detect_url(cls, url: str) -> str | None:
        """Why a URL given to `init`/`sources add` is a source of this kind."""
        return None

    @classmethod
    def detect_file(cls, path: Path, head: bytes) -> str | None:
        """Why a file (its first bytes: ``head``) is a source of this kind."""
        return None

    def listed_items(self, state_dir: Path | None) -> Iterator[ListedItem] | None:
        """The source's items as the kind's own listing sees them, for ``ragline
        status`` (nothing is fetched: a feed's entries fetched so far); ``state_dir``:
        the kind's state folder, None when the index has none yet. None: a folder the
        shared walker lists, compared by size and modification time."""
        return None

    def extra_suffixes(self) -> tuple[str, ...]:
        """File suffixes selected besides ``include`` (a vault's attachments)."""
        return ()

    def path_problems(self, where: Callable[[str], str]) -> list[str]:
        """Why ``path`` cannot be indexed (missing, a file, unreadable, not what the
        kind reads), one line each; ``where(key)`` begins a line (file, source, key)."""
        folder = self.path
        if not folder.exists():
            return [f"{where('path')}: {folder} does not exist; {MISSING_SOURCE_HINT}"]
        if not folder.is_dir():
            return [
                f"{where('path')}: {folder} is a file, not a folder; give the folder that holds it "
                "(and select files with `include`)"
            ]
        if not os.access(folder, os.R_OK | os.X_OK):
            return [f"{where('path')}: {folder} cannot be read (permission denied)"]
        problem = self.folder_problem(folder)
        return [f"{where('path')}: {folder} {problem}"] if problem else []

    def folder_problem(self, folder: Path) -> str | None:
        """What makes a readable ``folder`` the wrong one for this kind (None: fine)."""
        return None

    def with_absolute_paths(self, base: Path) -> FileSourceConfig:
        """This source with its paths made absolute against ``base`` (the config's folder)."""
        if self.path is None:
            return self
        return self.model_copy(update={"path": absolute_path(self.path.expanduser(), base)})


OcrMode = Literal["auto", "off"]
_LANGUAGE_RE = re.compile(r"^[a-z]{3}(_[a-z]+)?$")


class OcrSettings(Strict):
    # OCR of pages and images without a text layer (Tesseract). "auto": when Tesseract
    # is installed; the text documents of a run are searchable before OCR starts.
    ocr: OcrMode = "auto"
    ocr_languages: list[str] = ["eng"]

    @field_validator("ocr_languages")
    @classmethod
    def _languages(cls, value: list[str]) -> list[str]:
        for language in value:
            if not _LANGUAGE_RE.match(language):
                raise ValueError(
                    f"{language!r} is not a Tesseract language code (e.g. 'eng', 'deu', 'chi_sim')"
                )
        if not value:
            raise ValueError("give at least one language, e.g. ['eng']")
        return value


# Attachment types a Markdown source may index besides its notes, by file suffix.
ATTACHMENT_SUFFIXES: dict[str, tuple[str, ...]] = {
    "pdf": (".pdf",),
    "docx": (".docx",),
    "pptx": (".pptx",),
    "xlsx": (".xlsx",),
    "epub": (".epub",),
    "html": (".html", ".htm"),
    "png": (".png",),
    "jpg": (".jpg", ".jpeg"),
    "tiff": (".tif", ".tiff"),
}


def kind_name(model: type[FileSourceConfig]) -> str:
    """The ``kind = "…"`` value a config model stands for."""
    field = model.model_fields.get("kind")
    values = typing.get_args(field.annotation) if field is not None else ()
    if len(values) != 1 or not isinstance(values[0], str):
        raise ConfigError(
            f'{model.__qualname__}: a kind\'s config model needs `kind: Literal["<name>"]`'
        )
    return values[0]
