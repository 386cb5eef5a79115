"""Splitting a message's text into what its author wrote, quoted replies and the
signature, so that only the author's own words are embedded and indexed.

- quotes: lines starting with ``>``; the attribution line(s) before a quote block
  ("On Tue, 17 Nov 2009, Carl Worth wrote:", also across two lines, "X writes:",
  "Quoting X:", "Am … schrieb X:", "Le … a écrit :");
- an Outlook-style tail: ``-----Original Message-----`` or a ``____`` rule followed
  by ``From:`` header lines, to the end;
- the signature: from a ``-- `` line (RFC 3676; ``--`` too) to the end, when it is
  at most ``SIGNATURE_LINES`` lines (a longer tail is text, not a signature).
"""

from __future__ import annotations

import re

SIGNATURE_LINES = 20
_ATTRIBUTION_END = re.compile(
    r"(wrote|writes|said|schrieb|a écrit|escribió|scrisse|schreef|napisał)\s*:\s*$", re.I
)
_ATTRIBUTION_START = re.compile(r"^(On |Quoting |Am |Le |El |Il |Op |\* )", re.I)
_OUTLOOK = re.compile(r"^\s*(-{3,}\s*Original Message\s*-{3,}|_{20,})\s*$", re.I)
_HEADER_LINE = re.compile(r"^\s*\*?(From|Von|De|Sent|Date|To|Subject)\*?\s*:", re.I)

TEXT, QUOTE, SIGNATURE = "text", "quote", "signature"


def split_text(text: str) -> list[tuple[str, str]]:
    """``text`` as (kind, text) runs in order: kinds TEXT, QUOTE and SIGNATURE."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kinds = [TEXT] * len(lines)
    for index, line in enumerate(lines):
        if line.lstrip().startswith(">"):
            kinds[index] = QUOTE
    _mark_outlook_tail(lines, kinds)
    _mark_attributions(lines, kinds)
    _mark_signature(lines, kinds)
    runs: list[tuple[str, list[str]]] = []
    for line, kind in zip(lines, kinds, strict=True):
        if not line.strip() and runs:
            runs[-1][1].append(line)  # a blank line stays with the run before it
            continue
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(line)
        else:
            runs.append((kind, [line]))
    result = []
    for kind, run in runs:
        joined = "\n".join(run).strip("\n")
        if joined.strip():
            result.append((kind, joined))
    return result


def _mark_outlook_tail(lines: list[str], kinds: list[str]) -> None:
    for index, line in enumerate(lines):
        if not _OUTLOOK.match(line):
            continue
        following = [ln for ln in lines[index + 1 : index + 4] if ln.strip()]
        if line.strip().startswith("-") or (following and _HEADER_LINE.match(following[0])):
            for rest in range(index, len(lines)):
                kinds[rest] = QUOTE
            return


def _mark_attributions(lines: list[str], kinds: list[str]) -> None:
    """The line (or two) before each quote block that names who is quoted."""
    for index in range(len(lines)):
        if kinds[index] != QUOTE or (index > 0 and kinds[index - 1] == QUOTE):
            continue
        before = index - 1
        while before >= 0 and not lines[before].strip() and kinds[before] == TEXT:
            before -= 1
        if before < 0 or kinds[before] != TEXT:
            continue
        line = lines[before].strip()
        if _ATTRIBUTION_END.search(line) or (_ATTRIBUTION_START.match(line) and line.endswith(":")):
            kinds[before] = QUOTE
            previous = before - 1
            if (
                previous >= 0
                and kinds[previous] == TEXT
                and _ATTRIBUTION_START.match(lines[previous].strip())
                and not lines[previous].strip().endswith((".", ":"))
            ):
                kinds[previous] = QUOTE  # an attribution wrapped over two lines
            for blank in range(before + 1, index):
                kinds[blank] = QUOTE


def _mark_signature(lines: list[str], kinds: list[str]) -> None:
    for index in range(len(lines) - 1, -1, -1):
        if lines[index] in ("-- ", "--") and kinds[index] == TEXT:
            tail = [ln for ln in lines[index + 1 :] if ln.strip()]
            if 0 < len(tail) <= SIGNATURE_LINES:
                for rest in range(index, len(lines)):
                    if kinds[rest] == TEXT:
                        kinds[rest] = SIGNATURE
            return
