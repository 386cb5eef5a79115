"""Words in every script: tokens, terms and readable text for queries."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from rag_serving.index.analysis import NOSPACE_RUN

# Words around a link: about eight (a character of a script without spaces counts half).
_CONTEXT_WEIGHT = 8.0
_MIN_CONTEXT_WEIGHT = 3.0
# A fragment: 6–10 words, or 6–12 characters of a script without spaces.
_FRAGMENT_WORDS = (6, 10)
_FRAGMENT_CHARS = (6, 12)
_MAX_WORD_CHARS = 30  # longer "words" are hashes, base64, URLs: no one types them

_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MD_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
# Not shown to a reader: Obsidian and HTML comments, HTML tags.
_HIDDEN = re.compile(r"%%.*?%%|<!--.*?-->", re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|>|\||```|~~~)")
_SEGMENT_BREAK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|>|\|))|[.!?。！？؟।|]")
_MARKER = "\ue000"  # stands for the removed link in a context (a private-use character)


# ---- words in every script ----------------------------------------------------


@cache
def _token_pattern() -> re.Pattern[str]:
    """Words (a letter or digit, then letters, digits and combining marks, so a
    Devanagari or vowelled Arabic word stays whole) or single characters of the
    scripts written without spaces."""
    nospace = NOSPACE_RUN.pattern[1:-2]  # "[...]+" → the ranges inside the brackets
    first = _char_class(lambda c: unicodedata.category(c)[0] in "LN")
    rest = _char_class(lambda c: unicodedata.category(c)[0] in "LNM")
    return re.compile(f"(?P<c>[{nospace}])|(?P<w>[{first}][{rest}]*)")


def _char_class(wanted: Callable[[str], bool]) -> str:
    """A regex class of the characters (below U+30000) that are ``wanted`` and not of
    a script written without spaces."""
    ranges: list[tuple[int, int]] = []
    start: int | None = None
    for code in range(0x30001):
        char = chr(code)
        inside = code < 0x30000 and wanted(char) and not NOSPACE_RUN.match(char)
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            ranges.append((start, code - 1))
            start = None
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int
    char: bool  # one character of a script without spaces

    @property
    def weight(self) -> float:
        return 0.5 if self.char else 1.0


def tokens(text: str) -> list[Token]:
    """The words and no-space-script characters of ``text``, in order."""
    return [
        Token(m.group(0), m.start(), m.end(), m.group("c") is not None)
        for m in _token_pattern().finditer(text)
    ]


def join_tokens(toks: Sequence[Token]) -> str:
    """Tokens as query text: words spaced, runs of no-space characters kept together."""
    out: list[str] = []
    for i, tok in enumerate(toks):
        if i and not (tok.char and toks[i - 1].char):
            out.append(" ")
        out.append(tok.text)
    return "".join(out)


def terms(text: str) -> set[str]:
    """The terms whose document frequency makes a fragment distinctive: case-folded
    words, and the character bigrams (a lone character: itself) of no-space runs."""
    found: set[str] = set()
    run: list[str] = []
    for tok in tokens(text):
        if tok.char:
            run.append(tok.text)
            continue
        found.update(_run_terms(run))
        run = []
        found.add(tok.text.casefold())
    found.update(_run_terms(run))
    return found


def _run_terms(run: list[str]) -> list[str]:
    if len(run) == 1:
        return run
    return [run[i] + run[i + 1] for i in range(len(run) - 1)]


def readable(text: str) -> str:
    """Markdown as a reader sees it: links as their text; URLs, comments and HTML
    tags removed."""
    text = _HTML_TAG.sub(" ", _HIDDEN.sub(" ", text))
    text = _WIKILINK.sub(lambda m: _link_display(m.group(2)), text)
    text = _MD_LINK.sub(lambda m: m.group(1), text)
    return _URL.sub(" ", text)


def _link_parts(inner: str) -> tuple[str, str | None]:
    """The target of a wikilink's inside (``Note#Heading|alias``) and its alias."""
    inner = inner.replace("\\|", "|")
    target, sep, alias = inner.partition("|")
    return target.partition("#")[0].strip(), (alias.strip() or None) if sep else None


def _link_display(inner: str) -> str:
    target, alias = _link_parts(inner)
    if alias:
        return alias
    heading = inner.replace("\\|", "|").partition("|")[0].partition("#")[2].strip()
    return " ".join(x for x in (target.rsplit("/", 1)[-1], heading) if x)
