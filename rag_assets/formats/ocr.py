"""OCR of pages without a text layer, through PyMuPDF's built-in Tesseract.

PyMuPDF links Tesseract itself but needs Tesseract's language data ("tessdata"),
which Debian's ``tesseract-ocr`` / ``tesseract-ocr-<lang>`` packages install. OCR
costs seconds per page, so callers OCR only pages that have no text and, in an
indexing run's first pass, leave it for a deferred pass (``ParseOptions``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_assets.formats.model import ParseOptions

if TYPE_CHECKING:
    import pymupdf

__all__ = [
    "OCR_DPI",
    "deferred_description",
    "ocr_available",
    "ocr_textpage",
    "page_ranges",
    "tessdata_dir",
]

OCR_DPI = 200  # Tesseract's accuracy plateaus around 200-300 dpi; cost grows with pixels
MIN_DPI, MAX_DPI = 100, 400  # bounds for images OCR'd at their own resolution

_KNOWN_TESSDATA = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
    "/opt/homebrew/share/tessdata",
)
_LANGUAGE = re.compile(r"^[A-Za-z0-9_]+$")
_INSTALL_HINT = "apt-get install tesseract-ocr tesseract-ocr-eng"


def _from_cli() -> Path | None:
    """The tessdata folder the ``tesseract`` command reports, if it is installed."""
    exe = shutil.which("tesseract")
    if not exe:
        return None
    try:
        out = subprocess.run(
            [exe, "--list-langs"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'List of available languages in "(.+?)"', out.stdout + out.stderr)
    return Path(m.group(1)) if m else None


def _has_data(path: Path | None) -> bool:
    return path is not None and path.is_dir() and any(path.glob("*.traineddata"))


@lru_cache(maxsize=1)
def tessdata_dir() -> Path | None:
    """The folder holding Tesseract's ``*.traineddata`` files (None when there is none).

    ``TESSDATA_PREFIX`` first, then the usual install folders, then what the
    ``tesseract`` command reports (run only when the others fail).
    """
    env = os.environ.get("TESSDATA_PREFIX")
    for path in [*([Path(env)] if env else []), *map(Path, _KNOWN_TESSDATA)]:
        if _has_data(path):
            return path
    found = _from_cli()
    return found if _has_data(found) else None


def ocr_available(languages: Sequence[str] = ("eng",)) -> str | None:
    """None when OCR in ``languages`` can run here, else a one-line reason (cached)."""
    return _ocr_available(tuple(languages))


@lru_cache(maxsize=16)
def _ocr_available(languages: tuple[str, ...]) -> str | None:
    bad = [lang for lang in languages if not _LANGUAGE.match(lang)]
    if bad or not languages:
        name = bad[0] if bad else ""
        return f"OCR unavailable: invalid language name {name!r}; use Tesseract codes like 'eng'"
    tessdata = tessdata_dir()
    if tessdata is None:
        return f"OCR unavailable: tesseract-ocr is not installed ({_INSTALL_HINT})"
    missing = [lang for lang in languages if not (tessdata / f"{lang}.traineddata").is_file()]
    if missing:
        packages = " ".join(f"tesseract-ocr-{lang.replace('_', '-').lower()}" for lang in missing)
        names = ", ".join(missing)
        return f"OCR unavailable: no Tesseract data for {names} (apt-get install {packages})"
    try:
        import pymupdf
    except ImportError:  # pragma: no cover - pymupdf is a dependency
        return "OCR unavailable: pymupdf is not installed (pip install 'pymupdf>=1.26,<1.27')"
    if not hasattr(pymupdf.Page, "get_textpage_ocr"):  # pragma: no cover
        return "OCR unavailable: this PyMuPDF build has no OCR support"
    return None


def ocr_textpage(page: pymupdf.Page, options: ParseOptions, dpi: int = OCR_DPI) -> Any:
    """A ``TextPage`` recognised from ``page`` rendered at ``dpi`` (call ocr_available first).

    Raises whatever MuPDF / Tesseract raise; callers turn that into a warning.
    """
    tessdata = tessdata_dir()
    return page.get_textpage_ocr(
        language="+".join(options.ocr_languages),
        dpi=max(MIN_DPI, min(MAX_DPI, int(dpi))),
        full=True,
        tessdata=str(tessdata) if tessdata else None,
    )


def page_ranges(numbers: list[int]) -> str:
    """``[2, 5, 6, 7]`` -> ``"2, 5-7"``."""
    parts: list[str] = []
    start = prev = None
    for n in [*sorted(numbers), None]:
        if start is not None and (n is None or n != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if n is not None:
            if start is None:
                start = n
            prev = n
    return ", ".join(parts)


def deferred_description(pages: list[int]) -> str:
    """What a deferred OCR pass will do, e.g. ``"OCR of 3 pages (2, 5-6)"``."""
    noun = "page" if len(pages) == 1 else "pages"
    return f"OCR of {len(pages)} {noun} ({page_ranges(pages)})"
