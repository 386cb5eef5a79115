"""Word documents (.docx) with python-docx.

The body is markdown-ish: paragraphs styled "Heading N" (or "Title") become ``#``
lines, list paragraphs ``- `` items and tables ``a | b | c`` rows, all in document
order. A DOCX has no pages, so there are no sections: the chunker cites headings.
Legacy ``.doc`` files are not supported.
"""

from __future__ import annotations

import re
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_sources.formats.archive import ZIP_ERRORS, check_archive
from rag_sources.formats.model import ItemError, ItemSkipped, ParsedDocument, ParseOptions
from rag_sources.formats.text import (
    cap_text,
    heading_line,
    is_placeholder_title,
    markdown_safe,
    short_error,
)

__all__ = ["ZIP_ERRORS", "check_office_container", "office_core_properties", "parse_docx"]

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$")


def check_office_container(
    full_path: Path, kind: str, legacy: str, options: ParseOptions | None = None
) -> None:
    """Reject files that are not an Office Open XML (ZIP) package, with the reason, and
    (with ``options``) packages that would unpack past the source's caps (archive.py).

    ``kind`` names the format ("DOCX"); ``legacy`` its old binary format (".doc").
    Encrypted OOXML files are OLE containers: msoffcrypto tells them from legacy files.
    """
    try:
        with full_path.open("rb") as f:
            head = f.read(8)
            if not head:
                raise ItemSkipped("empty file")
            if head.startswith(_OLE_MAGIC):
                f.seek(0)
                if _is_encrypted(f):
                    raise ItemError(
                        "encrypted document (password required); "
                        "remove the password or exclude the file"
                    )
                raise ItemError(
                    f"legacy binary Office file ({legacy} format) named as {kind}; "
                    f"re-save it as {kind}"
                )
    except OSError as exc:
        raise ItemError(f"cannot read the file ({exc.strerror}); check its permissions") from None
    if not head.startswith(b"PK"):
        raise ItemError(f"not a {kind} file (no ZIP container); re-save it as {kind}")
    if options is not None:
        check_archive(full_path, options.limits, kind)


def _is_encrypted(f: Any) -> bool:
    import msoffcrypto

    try:
        return bool(msoffcrypto.OfficeFile(f).is_encrypted())
    except Exception:  # not an Office container msoffcrypto knows: not an encrypted one
        return False


def _style_names(document: Any) -> dict[str, str]:
    """styleId -> lower-case style name, read once (p.style.name per paragraph is slow)."""
    from docx.oxml.ns import qn

    names: dict[str, str] = {}
    try:
        styles = document.styles.element
    except Exception:  # a package without styles.xml
        return names
    for style in styles.iterchildren(qn("w:style")):
        style_id = style.get(qn("w:styleId"))
        name = style.find(qn("w:name"))
        if style_id and name is not None:
            names[style_id] = str(name.get(qn("w:val")) or "").lower()
    return names


class _Writer:
    """Turns body elements into markdown-ish blocks."""

    def __init__(self, document: Any) -> None:
        from docx.oxml.ns import qn
        from docx.text.paragraph import Paragraph

        self.document = document
        self.styles = _style_names(document)
        self.blocks: list[str] = []
        self.title: str | None = None
        self.Paragraph = Paragraph
        self.P, self.TBL, self.SDT = qn("w:p"), qn("w:tbl"), qn("w:sdt")
        self.SDT_CONTENT, self.TR, self.TC = qn("w:sdtContent"), qn("w:tr"), qn("w:tc")
        self.PPR, self.PSTYLE, self.NUMPR = qn("w:pPr"), qn("w:pStyle"), qn("w:numPr")
        self.VAL = qn("w:val")

    def walk(self, parent: Any) -> None:
        for child in parent.iterchildren():
            if child.tag == self.P:
                self.paragraph(child)
            elif child.tag == self.TBL:
                self.table(child)
            elif child.tag == self.SDT:  # content control (e.g. a table of contents)
                content = child.find(self.SDT_CONTENT)
                if content is not None:
                    self.walk(content)

    def _style(self, p: Any) -> tuple[str, bool]:
        ppr = p.find(self.PPR)
        if ppr is None:
            return "", False
        style = ppr.find(self.PSTYLE)
        name = self.styles.get(style.get(self.VAL), "") if style is not None else ""
        return name, ppr.find(self.NUMPR) is not None

    def paragraph(self, p: Any) -> None:
        text = self.Paragraph(p, self.document).text
        if not text.strip():
            return
        style, numbered = self._style(p)
        match = _HEADING_STYLE.match(style)
        if match or style == "title":
            line = heading_line(int(match.group(1)) if match else 1, text)
            if style == "title" and self.title is None:
                self.title = line.lstrip("#").strip() or None
            self.blocks.append(line)
            return
        lines = [markdown_safe(line) for line in text.split("\n")]
        body = "\n".join(line for line in lines if line)
        if numbered or style.startswith("list"):
            body = "- " + body.replace("\n", "\n  ")
        self.blocks.append(body)

    def cell_text(self, tc: Any) -> str:
        parts: list[str] = []
        for child in tc.iter(self.P):
            text = self.Paragraph(child, self.document).text.strip()
            if text:
                parts.append(" ".join(text.split()))
        return " ".join(parts)

    def table(self, tbl: Any) -> None:
        rows: list[str] = []
        for tr in tbl.iterchildren(self.TR):
            cells = [self.cell_text(tc) for tc in tr.iterchildren(self.TC)]
            if any(cells):
                rows.append(markdown_safe(" | ".join(cells)))
        if rows:
            self.blocks.append("\n".join(rows))


def parse_docx(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """Parse one .docx file: headings, paragraphs, lists and tables in document order."""
    check_office_container(full_path, "DOCX", ".doc", options)
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from lxml.etree import LxmlError

    try:
        document = docx.Document(str(full_path))
    except (PackageNotFoundError, *ZIP_ERRORS):
        raise ItemError(
            "not a valid DOCX (truncated, or not a ZIP package); re-save it in Word or LibreOffice"
        ) from None
    except (KeyError, ValueError, LxmlError, OSError) as exc:
        raise ItemError(
            f"damaged DOCX ({short_error(exc, full_path)}); re-save it in Word or LibreOffice"
        ) from None
    writer = _Writer(document)
    try:
        writer.walk(document.element.body)
    except (KeyError, ValueError, AttributeError, TypeError, LxmlError) as exc:
        raise ItemError(
            f"damaged DOCX ({short_error(exc, full_path)}); re-save it in Word or LibreOffice"
        ) from None
    warnings: list[str] = []
    body = cap_text("\n\n".join(writer.blocks), options, warnings)
    if not body.strip():
        raise ItemSkipped("no text in the document")
    metadata, created, updated, core_title = office_core_properties(full_path)
    return ParsedDocument(
        body=body + "\n",
        title=core_title or writer.title,
        metadata=metadata,
        created=created,
        updated=updated,
        warnings=tuple(warnings),
    )


_CORE_FIELDS = {
    "{http://purl.org/dc/elements/1.1/}title": "title",
    "{http://purl.org/dc/elements/1.1/}creator": "author",
    "{http://purl.org/dc/elements/1.1/}subject": "subject",
    "{http://schemas.openxmlformats.org/package/2006/metadata/core-properties}keywords": "keywords",
    "{http://schemas.openxmlformats.org/package/2006/metadata/core-properties}lastModifiedBy": (
        "last_modified_by"
    ),
    "{http://purl.org/dc/terms/}created": "created",
    "{http://purl.org/dc/terms/}modified": "modified",
}


def _w3c_date(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def office_core_properties(
    full_path: Path,
) -> tuple[dict[str, Any], datetime | None, datetime | None, str | None]:
    """An OOXML package's core properties: (metadata, created, modified, title).

    Read from ``docProps/core.xml`` directly: python-docx, python-pptx and openpyxl
    fill in defaults ("now", "python-docx") when the part is missing, which would
    make the parse depend on the clock.
    """
    from lxml import etree

    try:
        with zipfile.ZipFile(full_path) as package:
            raw = package.read("docProps/core.xml")
        root = etree.fromstring(
            raw, parser=etree.XMLParser(resolve_entities=False, no_network=True)
        )
    except (KeyError, OSError, etree.LxmlError, ValueError, *ZIP_ERRORS):
        return {}, None, None, None
    metadata: dict[str, Any] = {}
    created = updated = None
    for child in root:
        key = _CORE_FIELDS.get(child.tag) if isinstance(child.tag, str) else None
        text = " ".join((child.text or "").split())
        if not key or not text:
            continue
        if key == "created":
            created = _w3c_date(text)
        elif key == "modified":
            updated = _w3c_date(text)
        else:
            metadata[key] = text
    if created:
        metadata["created"] = created.isoformat()
    if updated:
        metadata["modified"] = updated.isoformat()
    title = metadata.get("title")
    if title and is_placeholder_title(title):
        title = None
    return metadata, created, updated, title
