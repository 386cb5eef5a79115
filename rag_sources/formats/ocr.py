"""OCR of pages without a text layer, through PyMuPDF's built-in Tesseract.

PyMuPDF links Tesseract itself but needs Tesseract's language data ("tessdata"),
which Debian's ``tesseract-ocr`` / ``tesseract-ocr-<lang>`` packages install. OCR
costs seconds per page, so callers OCR only pages that have no text and, in an
indexing run's first pass, leave it for a deferred pass (``ParseOptions``).

Memory follows the pixels rendered, so a page is rendered at no more than
``[limits] max_image_pixels`` (``ocr_dpi``): a 200-inch page is OCR'd at a lower
resolution, or refused when that would be too coarse to read. The page is
recognised through MuPDF's OCR device, which renders a grey pixmap and hands it to
Tesseract directly; PyMuPDF's ``get_textpage_ocr`` renders an RGB pixmap, writes it
uncompressed into a PDF through a Python file object and reads that back (about
twice the memory, and a binding traceback in the error when that write fails).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_sources.formats.model import ParseOptions

if TYPE_CHECKING:
    import pymupdf

__all__ = [
    "MIN_DPI",
    "OCR_DPI",
    "deferred_description",
    "ocr_available",
    "ocr_dpi",
    "ocr_textpage",
    "page_ranges",
    "tessdata_dir",
    "too_large_reason",
    "unread_script",
]

OCR_DPI = 200  # Tesseract's accuracy plateaus around 200-300 dpi; cost grows with pixels
# Bounds for images OCR'd at their own resolution; below MIN_DPI body text is too
# coarse to read (unless the scan itself holds no more detail).
MIN_DPI, MAX_DPI = 100, 400

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


# The script each common Tesseract language reads (by the first word of Unicode's
# character names); a language not listed is trusted to read anything.
_SCRIPT_LANGUAGES = {
    "LATIN": "eng afr aze bos cat ces cym dan deu eng enm epo est eus fil fin fra frk frm gla "
    "gle glg hat hrv hun ind isl ita lat lav lit ltz mlt msa nld nor oci pol por ron slk "
    "slv spa sqi swa swe tgl tur uzb vie yor",
    "CYRILLIC": "bel bul kaz kir mkd mon rus srp tat tgk ukr",
    "GREEK": "ell grc",
    "ARABIC": "ara fas kur pus snd uig urd",
    "HEBREW": "heb yid",
    "DEVANAGARI": "hin mar nep san",
    "BENGALI": "asm ben",
    "TAMIL": "tam",
    "THAI": "tha",
    "HANGUL": "kor kor_vert",  # the first code of each script is the one suggested
    "CJK": "chi_sim chi_sim_vert chi_tra chi_tra_vert jpn jpn_vert",
    "HIRAGANA": "jpn jpn_vert",
    "KATAKANA": "jpn jpn_vert",
}
_LANGUAGE_SCRIPTS: dict[str, set[str]] = {}
for _script, _codes in _SCRIPT_LANGUAGES.items():
    for _code in _codes.split():
        _LANGUAGE_SCRIPTS.setdefault(_code, set()).add(_script)
MIN_SCRIPT_LETTERS = 20


def unread_script(languages: Sequence[str], text: str) -> str | None:
    """A script that at least a quarter of ``text``'s letters are in and none of the
    Tesseract ``languages`` reads, and a language that does (``"Hangul (Tesseract's
    kor)"`` for Korean text and ``eng``), else None.

    OCR of one script by another script's model gives look-alike junk: a page whose
    readable text shows such a script is OCR'd only with a language for it.
    """
    if any(lang not in _LANGUAGE_SCRIPTS for lang in languages):
        return None
    scripts: Counter[str] = Counter()
    for char in text:
        if char.isalpha():
            scripts[unicodedata.name(char, "").split(" ", 1)[0]] += 1
    letters = sum(scripts.values())
    if letters < MIN_SCRIPT_LETTERS:
        return None
    read = set().union(*(_LANGUAGE_SCRIPTS[lang] for lang in languages))
    for script, count in scripts.most_common():
        if count * 4 < letters:
            break
        if script in _SCRIPT_LANGUAGES and script not in read:
            return f"{script.title()} (Tesseract's {_SCRIPT_LANGUAGES[script].split()[0]})"
    return None


def ocr_dpi(
    width: float, height: float, wanted: float, max_pixels: int, floor: float
) -> int | None:
    """The resolution at which to render a ``width`` × ``height`` point page for OCR.

    ``wanted``, or lower when that would render more than ``max_pixels``, as long as
    it stays at least ``floor`` (what still reads: ``MIN_DPI``, or the scan's own
    resolution when that is lower: rendering finer than the scan adds no detail).
    None when even ``floor`` is too many pixels.
    """
    inches = (width / 72) * (height / 72)
    dpi = int(wanted) if inches <= 0 else min(int(wanted), int(math.sqrt(max_pixels / inches)))
    while dpi > 1 and math.ceil(width * dpi / 72) * math.ceil(height * dpi / 72) > max_pixels:
        dpi -= 1  # rounding up to whole pixels may pass the cap by a row
    return dpi if dpi >= min(floor, wanted) and dpi >= 1 else None


def too_large_reason(width: float, height: float, floor: float, max_pixels: int) -> str:
    """Why a page of ``width`` × ``height`` points is not OCR'd (``ocr_dpi`` gave None)."""
    needed = math.ceil(width * floor / 72) * math.ceil(height * floor / 72)
    return (
        f"{width / 72:,.0f} × {height / 72:,.0f} in, {needed / 1e6:,.0f} Mpx at "
        f"{floor:.0f} dpi, more than [limits] max_image_pixels "
        f"({max_pixels / 1e6:,.0f} Mpx); raise the limit to OCR it"
    )


def ocr_textpage(
    page: pymupdf.Page,
    options: ParseOptions,
    dpi: int = OCR_DPI,
    clip: tuple[float, float, float, float] | None = None,
) -> Any:
    """A ``TextPage`` recognised from ``page`` (or only its ``clip`` area, in page
    coordinates) rendered at ``dpi``; its coordinates are pixels of that rendering,
    from the area's top left corner. Call ocr_available first, and ocr_dpi for a
    ``dpi`` within the pixel cap.

    Raises whatever MuPDF / Tesseract raise; callers turn that into a warning
    (``text.short_error`` keeps it to one clean line).
    """
    import pymupdf

    mupdf = pymupdf.mupdf
    tessdata = tessdata_dir()
    zoom = dpi / 72
    fz_page = page.this if isinstance(page.this, mupdf.FzPage) else mupdf.FzPage(page.this)
    if clip is None:
        bounds = mupdf.fz_bound_page(fz_page)
        clip = (bounds.x0, bounds.y0, bounds.x1, bounds.y1)
    x0, y0, x1, y1 = clip
    # The device sizes its pixmap as its area transformed by its matrix: the area is
    # given in points from the origin and the page drawn shifted onto it. (Given an
    # area already in pixels, it allocated zoom² times the pixels: 7.7× at 200 dpi.)
    scale = mupdf.FzMatrix(zoom, 0, 0, zoom, 0, 0)
    draw = mupdf.FzMatrix(zoom, 0, 0, zoom, -x0 * zoom, -y0 * zoom)
    area = mupdf.FzRect(0, 0, x1 - x0, y1 - y0)
    stext = mupdf.FzStextPage(mupdf.fz_transform_rect(area, scale))
    target = mupdf.fz_new_stext_device(stext, mupdf.FzStextOptions())
    device = mupdf.fz_new_ocr_device(
        target, scale, area, 0, "+".join(options.ocr_languages), str(tessdata or ""), None, None
    )
    try:
        # The content is drawn with this matrix: that sets the pixels Tesseract gets.
        mupdf.fz_run_page(fz_page, device, draw, mupdf.FzCookie())
        mupdf.fz_close_device(device)
    finally:
        mupdf.fz_close_device(target)
    return pymupdf.TextPage(stext)


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
