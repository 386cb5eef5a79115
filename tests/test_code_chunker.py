"""Tests for rag_sources.code: syntax-aware chunks of source files, measured with the
real all-MiniLM-L6-v2 tokenizer, on real-looking sources in 16 languages."""

from __future__ import annotations

import re
import time
from collections import Counter as Tally
from collections.abc import Sequence
from itertools import pairwise

import pytest

from rag_sources.chunking import Chunk
from rag_sources.code import (
    CODE_CHUNKER_VERSION,
    CODE_LANGUAGES,
    chunk_code,
    code_symbols,
    language_for,
)
from rag_sources.code import languages as code_languages
from rag_sources.code.languages import parse
from tests.code_snippets import PYTHON, SNIPPETS, Snippet
from tests.tokenizer import Counter

TARGET, MAX = 180, 254
CONTAINERS = {"class", "struct", "interface", "trait", "impl", "enum", "module", "namespace",
              "object", "protocol", "extension", "record"}  # fmt: skip


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def check(
    source: str,
    chunks: list[Chunk],
    count: Counter,
    path: str,
    max_tokens: int = MAX,
    first_line: int = 1,
) -> None:
    """The guarantees every code chunking keeps."""
    lines = source.split("\n")
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    exact = count.embedder.count_tokens([c.embed_text for c in chunks])
    covered: Tally[int] = Tally()
    for chunk, n in zip(chunks, exact, strict=True):
        assert chunk.token_count == n <= max_tokens
        assert chunk.anchor == f"L{chunk.line_start}-L{chunk.line_end}"
        first, last = chunk.line_start - first_line, chunk.line_end - first_line
        assert 0 <= first <= last < len(lines)
        assert chunk.embed_text.endswith("\n" + chunk.text)
        header = chunk.embed_text[: -len(chunk.text) - 1]
        assert count.embedder.count_tokens([header])[0] <= max(max_tokens // 4, 1)
        if first < last or chunk.text == lines[first].rstrip("\r"):
            # whole lines, exactly as in the file, no blank line at either end
            assert chunk.text == "\n".join(lines[first : last + 1]).rstrip("\r")
            assert lines[first].strip() and lines[last].strip()
        else:  # a slice of one over-long line
            assert chunk.text.strip() and chunk.text in lines[first]
        for row in range(first, last + 1):
            covered[row] += 1
    # every non-blank line is in exactly one chunk (a line cut into slices excepted)
    sliced = {
        c.line_start - first_line for c in chunks if c.text != _lines_text(lines, c, first_line)
    }
    for row, line in enumerate(lines):
        if line.strip() and row not in sliced:
            assert covered[row] == 1, (path, row + first_line, line)
    assert squeeze("".join(c.text for c in chunks)) == squeeze(source)
    # ordered, not overlapping (but for slices of one line)
    for a, b in pairwise(chunks):
        assert a.line_end < b.line_start or a.line_end == b.line_start == a.line_start


def _lines_text(lines: list[str], chunk: Chunk, first_line: int) -> str:
    return "\n".join(lines[chunk.line_start - first_line : chunk.line_end - first_line + 1])


def line_of(source: str, marker: str) -> int:
    """1-based line of the first line containing ``marker``."""
    for number, line in enumerate(source.split("\n"), 1):
        if marker in line:
            return number
    raise AssertionError(f"{marker!r} not in the source")


_LEADING = re.compile(r"^\s*(//|#|/\*|\*|@|\[)")
_ACCESS = re.compile(r"^\s*(public|private|protected):")


def expected_range(source: str, marker: str, braces: bool = False) -> tuple[int, int]:
    """Lines of a definition by a layout rule the snippets follow: it starts at its
    leading comments/decorators/attributes and ends before the first line indented less
    than its first line, or as much after a blank line (C++ access labels excepted)."""
    lines = source.split("\n")
    at = line_of(source, marker) - 1
    start = at
    while start > 0 and lines[start - 1].strip() and _LEADING.match(lines[start - 1]):
        start -= 1
    if braces:  # a body that is not indented (a C++ namespace): match the braces
        depth = 0
        for row in range(at, len(lines)):
            depth += lines[row].count("{") - lines[row].count("}")
            if depth == 0 and "{" in "".join(lines[at : row + 1]):
                return start + 1, row + 1
    indent = len(lines[at]) - len(lines[at].lstrip())
    end = at
    for row in range(at + 1, len(lines)):
        line = lines[row]
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth < indent:  # the enclosing block goes on or ends
            break
        if depth == indent and not lines[row - 1].strip() and not _ACCESS.match(line):
            break
        end = row
    return start + 1, end + 1


def chunk_at(chunks: list[Chunk], line: int) -> Chunk:
    (found,) = [c for c in chunks if c.line_start <= line <= c.line_end]
    return found


# ---- every language ---------------------------------------------------------------


def test_snippets_cover_every_language() -> None:
    assert {s.language for s in SNIPPETS} == set(CODE_LANGUAGES)
    assert len(CODE_LANGUAGES) == 16


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.language for s in SNIPPETS])
def test_symbols_with_kinds_and_line_ranges(snippet: Snippet, count: Counter) -> None:
    source = snippet.source
    symbols = {(s.kind, s.qualified_name): s for s in code_symbols(source, snippet.language)}
    chunks = chunk_code(source, snippet.language, snippet.path, count, TARGET, MAX)
    check(source, chunks, count, snippet.path)
    for kind, qualified, marker in snippet.symbols:
        start, end = expected_range(source, marker, braces=kind == "namespace")
        symbol = symbols.get((kind, qualified))
        assert symbol is not None, (kind, qualified, sorted(symbols))
        assert (symbol.line_start, symbol.line_end) == (start, end), (kind, qualified)
        assert symbol.name == qualified.rsplit(".", 1)[-1]
        # the chunk holding the definition's first line is filterable by its symbol
        chunk = chunk_at(chunks, line_of(source, marker))
        assert f"symbol:{qualified}" in chunk.facets
        assert f"symbol:{symbol.name}" in chunk.facets
        assert f"symbol_kind:{kind}" in chunk.facets
    # every chunk names its file and language first
    assert all(c.embed_text.startswith(f"{snippet.path} · {snippet.language}") for c in chunks)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.language for s in SNIPPETS])
def test_small_target_gives_one_chunk_per_definition(snippet: Snippet, count: Counter) -> None:
    """With a small target every class over it is cut into its members, and each
    function/method is a chunk of its own, named and placed in its enclosing class."""
    source = snippet.source
    chunks = chunk_code(source, snippet.language, snippet.path, count, 30, MAX, first_line=11)
    check(source, chunks, count, snippet.path, first_line=11)
    for kind, qualified, marker in snippet.symbols:
        if kind in CONTAINERS:
            continue
        start, end = expected_range(source, marker)
        chunk = chunk_at(chunks, line_of(source, marker) + 10)
        assert chunk.heading_path == [f"{kind} {qualified}"]
        assert chunk.line_start <= start + 10 and chunk.line_end >= end + 10
        header = chunk.embed_text.split("\n", 1)[0]
        assert header.endswith(f"{kind} {chunk_name(qualified, kind, snippet.language)}")
        context = header[len(f"{snippet.path} · {snippet.language}") :]
        for enclosing in qualified.split(".")[:-1]:  # classes, modules, namespaces
            assert enclosing in context, header


def chunk_name(qualified: str, kind: str, language: str) -> str:
    """A definition's name in its chunk's context line: Go methods and C++ out-of-class
    methods keep their receiver/class, a PHP namespace set by `namespace A;` is kept,
    others are relative to the enclosing definition."""
    parts = qualified.split(".")
    if kind == "method" and language in ("go", "cpp"):
        return ".".join(parts[-2:])
    if language == "php" and kind == "function":
        return qualified
    return parts[-1]


def test_method_chunk_carries_its_class_context(count: Counter) -> None:
    chunks = chunk_code(PYTHON, "python", "upload/client.py", count, 30, MAX)
    chunk = chunk_at(chunks, line_of(PYTHON, "def retry_upload"))
    assert chunk.heading_path == ["method UploadClient.retry_upload"]
    assert chunk.facets == (
        "symbol:UploadClient.retry_upload",
        "symbol:retry_upload",
        "symbol_kind:method",
    )
    assert chunk.embed_text.startswith(
        "upload/client.py · python · class UploadClient · method retry_upload\n"
        "    # Retries the upload with exponential backoff.\n"
        "    def retry_upload(self, path: str) -> bool:\n"
    )
    # the decorator stays with its method, the class header is a chunk of the class
    send = chunk_at(chunks, line_of(PYTHON, "def _send"))
    assert send.text.lstrip().startswith("@staticmethod")
    header = chunk_at(chunks, line_of(PYTHON, "class UploadClient"))
    assert header.heading_path == ["class UploadClient"]
    assert "def " not in header.text


# ---- sizes -------------------------------------------------------------------------


def big_function(statements: int) -> str:
    body = "".join(
        f"    result_{i} = transform_value(\n"
        f"        payload[{i}], factor={i} * scale, name='step {i}'\n"
        f"    )\n"
        for i in range(statements)
    )
    return (
        "import math\n\n\n"
        "# Normalises every value of the payload.\n"
        "def normalise(payload, scale):\n" + body + "    return math.fsum([result_0, result_1])\n"
    )


def test_large_function_is_split_at_statement_boundaries(count: Counter) -> None:
    source = big_function(60)
    chunks = chunk_code(source, "python", "norm.py", count, TARGET, MAX)
    check(source, chunks, count, "norm.py")
    parts = [c for c in chunks if "symbol:normalise" in c.facets]
    assert len(parts) >= 4
    for k, chunk in enumerate(parts, 1):
        assert chunk.heading_path[0].startswith("function normalise (part")
        assert f"(part {k})" in chunk.heading_path[0] or "(parts" in chunk.heading_path[0]
        assert chunk.facets == ("symbol:normalise", "symbol_kind:function")
        first = source.split("\n")[chunk.line_start - 1]
        # a part starts where a statement starts, never inside one
        assert k == 1 or first.startswith("    result_") or first.startswith("    return")
        assert chunk.token_count <= TARGET + 30
    assert "# Normalises" in parts[0].text  # the leading comment stays with part 1
    assert parts[1].embed_text.startswith("norm.py · python · function normalise (part 2)\n")


def test_large_class_becomes_header_and_member_chunks(count: Counter) -> None:
    methods = "".join(
        f"    def handler_{i}(self, event):\n"
        f"        '''Handles event kind {i} for the dispatcher.'''\n"
        f"        return self.route(event, kind={i}, retries=self.retries + {i})\n\n"
        for i in range(12)
    )
    source = (
        "class Dispatcher:\n"
        "    '''Routes events to handlers.'''\n\n"
        "    retries = 3\n"
        "    timeout = 30.0\n\n" + methods
    )
    chunks = chunk_code(source, "python", "dispatch.py", count, 60, MAX)
    check(source, chunks, count, "dispatch.py")
    head = chunks[0]
    assert head.heading_path == ["class Dispatcher"]
    assert "retries = 3" in head.text
    for i in range(12):
        chunk = chunk_at(chunks, line_of(source, f"def handler_{i}("))
        assert f"symbol:Dispatcher.handler_{i}" in chunk.facets
        assert "class Dispatcher · method handler_" in chunk.embed_text.split("\n", 1)[0]
    assert len(chunks) >= 6


def test_tiny_neighbours_are_grouped(count: Counter) -> None:
    funcs = "\n".join(f"func f{i}() int {{ return {i} }}\n" for i in range(12))
    source = 'package tiny\n\nimport "fmt"\n\n' + funcs + "\nvar x = fmt.Sprint(1)\n"
    chunks = chunk_code(source, "go", "tiny.go", count, TARGET, MAX)
    check(source, chunks, count, "tiny.go")
    assert len(chunks) == 1
    (chunk,) = chunks
    assert chunk.heading_path == []  # several top-level functions: no single heading
    for i in range(12):
        assert f"symbol:f{i}" in chunk.facets
    assert chunk.embed_text.startswith("tiny.go · go · function f0, function f1, ")
    # with a small target they are grouped in several chunks, none tiny
    chunks = chunk_code(source, "go", "tiny.go", count, 60, MAX)
    check(source, chunks, count, "tiny.go")
    assert len(chunks) > 1
    assert all(c.token_count >= 25 for c in chunks)


def test_every_language_within_a_tiny_budget(count: Counter) -> None:
    """Target 12 / maximum 24 forces splits down to lines and slices of lines."""
    for snippet in SNIPPETS:
        chunks = chunk_code(snippet.source, snippet.language, snippet.path, count, 12, 24)
        check(snippet.source, chunks, count, snippet.path, max_tokens=24)


def test_over_long_line_is_cut_into_slices(count: Counter) -> None:
    line = "const table = [" + ", ".join(f'"entry number {i}"' for i in range(400)) + "];"
    source = "// data\n" + line + "\nexport function f() { return table; }\n"
    chunks = chunk_code(source, "javascript", "table.js", count, TARGET, MAX)
    check(source, chunks, count, "table.js")
    slices = [c for c in chunks if c.line_start == c.line_end == 2]
    assert len(slices) > 5


# ---- fallbacks -----------------------------------------------------------------------


def prose_like(paragraphs: int) -> str:
    return "\n\n".join(
        "\n".join(f"      MOVE FIELD-{p}-{i} TO OUTPUT-{p}-{i} OF RECORD-{p}." for i in range(5))
        for p in range(paragraphs)
    )


@pytest.mark.parametrize("language", [None, "cobol"])
def test_unknown_language_gives_line_windows(language: str | None, count: Counter) -> None:
    source = prose_like(30)
    chunks = chunk_code(source, language, "legacy/PAY.cbl", count, TARGET, MAX)
    check(source, chunks, count, "PAY.cbl")
    assert len(chunks) > 3
    lines = source.split("\n")
    for chunk in chunks:
        assert chunk.heading_path == [] and chunk.facets == ()
        assert chunk.embed_text.startswith("legacy/PAY.cbl\n")
        assert chunk.token_count <= TARGET
    for chunk in chunks[:-1]:  # windows end at a paragraph's end
        assert not lines[chunk.line_end].strip()


def test_a_few_syntax_errors_keep_the_other_definitions(count: Counter) -> None:
    broken = PYTHON.replace("def main() -> None:", "def main( -> None:\n    ))((")
    problems: list[str] = []
    chunks = chunk_code(broken, "python", "c.py", count, 30, MAX, problems=problems)
    check(broken, chunks, count, "c.py")
    assert problems == []
    facets = {f for c in chunks for f in c.facets}
    assert {"symbol:UploadClient.retry_upload", "symbol:RetryPolicy"} <= facets


GUARDED_C = """\
#ifndef GUARD_H
#define GUARD_H

#if defined(_MSC_VER)
#define INLINE __inline
#else
#define INLINE inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

static INLINE int add_one(int x) {
    return x + 1;
}

#if defined(FAST)
static INLINE int twice(int x) {
    return x << 1;
#else
static INLINE int twice(int x) {
    return x * 2;
#endif
}

#ifdef __cplusplus
}
#endif

#endif
"""


def test_file_wrapped_in_one_error_node_keeps_its_functions(count: Counter) -> None:
    """An #if splitting a function makes tree-sitter-c return one ERROR node for the
    whole header (as in numpy's libdivide.h); the functions inside it still count."""
    tree = parse(GUARDED_C.encode(), "c")
    assert tree is not None and tree.root_node.type == "ERROR"
    problems: list[str] = []
    chunks = chunk_code(GUARDED_C, "c", "guard.h", count, 30, MAX, problems=problems)
    check(GUARDED_C, chunks, count, "guard.h")
    assert problems == []
    one = chunk_at(chunks, line_of(GUARDED_C, "int add_one"))
    assert one.heading_path == ["function add_one"]
    assert "symbol:twice" in {f for c in chunks for f in c.facets}


def test_mostly_broken_file_falls_back_to_windows(count: Counter) -> None:
    source = "\n".join(f"}} ) ]] def ( class {i} :: <<< >>> ;;; {{{{" for i in range(80))
    problems: list[str] = []
    chunks = chunk_code(source, "python", "junk.py", count, TARGET, MAX, problems=problems)
    check(source, chunks, count, "junk.py")
    assert problems == [
        "junk.py: python syntax errors in most lines; indexed as line windows, without symbols"
    ]
    assert all(c.facets == () and c.heading_path == [] for c in chunks)
    assert chunks[0].embed_text.startswith("junk.py · python\n")


def test_pathological_input_does_not_hang(count: Counter) -> None:
    # tree-sitter-ruby needs minutes for this; the parse stops at its time limit
    source = "%w(" * 50_000
    problems: list[str] = []
    started = time.monotonic()
    chunks = chunk_code(source, "ruby", "x.rb", count, TARGET, MAX, problems=problems)
    elapsed = time.monotonic() - started
    assert elapsed < code_languages.PARSE_TIMEOUT_S + 8
    assert problems == [
        "x.rb: the ruby parser failed or ran out of time; indexed as line windows, without symbols"
    ]
    check(source, chunks, count, "x.rb")
    assert parse(source.encode(), "ruby", timeout_s=0.05) is None
    # the parser is reset: the next file of the language parses
    assert parse(b"def ok\n  1\nend\n", "ruby") is not None


def test_parse_timeout_falls_back(count: Counter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code_languages, "PARSE_TIMEOUT_S", 0.0)
    monkeypatch.setattr(code_languages, "PARSE_S_PER_MB", 0.0)
    source = PYTHON * 20
    problems: list[str] = []
    chunks = chunk_code(source, "python", "c.py", count, TARGET, MAX, problems=problems)
    assert problems == [
        "c.py: the python parser failed or ran out of time; indexed as line windows, without symbols"
    ]
    check(source, chunks, count, "c.py")
    assert code_symbols(source, "python") == []


# ---- behaviour -------------------------------------------------------------------------


def test_empty_and_blank_files() -> None:
    def never(texts: Sequence[str]) -> list[int]:
        raise AssertionError("no tokenizer call for an empty file")

    assert chunk_code("", "python", "e.py", never, TARGET, MAX) == []
    assert chunk_code("\n  \n\t\n", "go", "e.go", never, TARGET, MAX) == []


def test_budget_is_checked(count: Counter) -> None:
    with pytest.raises(ValueError, match="target_tokens must be in"):
        chunk_code(PYTHON, "python", "c.py", count, 300, MAX)


def test_deterministic(count: Counter) -> None:
    for snippet in SNIPPETS[:6]:
        a = chunk_code(snippet.source, snippet.language, snippet.path, count, 40, MAX)
        b = chunk_code(snippet.source, snippet.language, snippet.path, count, 40, MAX)
        assert a == b


def test_crlf_lines_are_kept(count: Counter) -> None:
    source = PYTHON.replace("\n", "\r\n")
    chunks = chunk_code(source, "python", "c.py", count, 30, MAX)
    check(source, chunks, count, "c.py")
    chunk = chunk_at(chunks, line_of(source, "def retry_upload"))
    assert chunk.heading_path == ["method UploadClient.retry_upload"]


def test_big_file_is_fast_and_counts_in_batches(count: Counter) -> None:
    parts = []
    for i in range(140):  # about 5,000 lines
        parts.append(PYTHON.replace("UploadClient", f"UploadClient{i}").replace("main", f"main{i}"))
    source = "\n".join(parts)
    assert len(source.split("\n")) > 5000
    started = time.monotonic()
    chunks = chunk_code(source, "python", "big.py", count, TARGET, MAX)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, elapsed
    assert count.calls <= 6, count.calls  # lines, labels, headers, embed texts: batched
    check(source, chunks, count, "big.py")
    assert {f"symbol:UploadClient{i}.retry_upload" for i in range(140)} <= {
        f for c in chunks for f in c.facets
    }


def test_version_is_a_string() -> None:
    assert CODE_CHUNKER_VERSION.startswith("code-")


# ---- language detection ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "head", "language"),
    [
        ("src/app.py", None, "python"),
        ("types.pyi", None, "python"),
        ("web/a.js", None, "javascript"),
        ("web/a.mjs", None, "javascript"),
        ("web/a.cjs", None, "javascript"),
        ("web/App.jsx", None, "javascript"),
        ("src/a.ts", None, "typescript"),
        ("src/a.mts", None, "typescript"),
        ("src/a.cts", None, "typescript"),
        ("src/App.tsx", None, "tsx"),
        ("main.go", None, "go"),
        ("lib.rs", None, "rust"),
        ("A.java", None, "java"),
        ("A.kt", None, "kotlin"),
        ("build.gradle.kts", None, "kotlin"),
        ("a.c", None, "c"),
        ("a.h", None, "c"),
        ("a.cpp", None, "cpp"),
        ("a.cc", None, "cpp"),
        ("a.cxx", None, "cpp"),
        ("a.hpp", None, "cpp"),
        ("A.cs", None, "csharp"),
        ("a.rb", None, "ruby"),
        ("Rakefile", None, "ruby"),
        ("sub/Gemfile", None, "ruby"),
        ("x.gemspec", None, "ruby"),
        ("index.php", None, "php"),
        ("A.swift", None, "swift"),
        ("A.scala", None, "scala"),
        ("build.sc", None, "scala"),
        ("run.sh", None, "bash"),
        ("run.bash", None, "bash"),
        ("env.zsh", None, "bash"),
        ("home/.bashrc", None, "bash"),
        (".zshrc", None, "bash"),
        ("A.PY", None, "python"),
        ("bin/tool", "#!/usr/bin/env python3\nprint(1)\n", "python"),
        ("bin/tool", "#!/usr/bin/python3.11 -u", "python"),
        ("bin/tool", "#!/usr/bin/env -S node --no-warnings", "javascript"),
        ("bin/tool", "#!/bin/sh", "bash"),
        ("bin/tool", "#!/usr/bin/env bash", "bash"),
        ("bin/tool", "#!/usr/bin/env ruby", "ruby"),
        ("bin/tool", "#!/usr/bin/php", "php"),
        ("bin/tool", "#!/usr/bin/env perl", None),
        ("bin/tool", "print('no shebang')", None),
        ("bin/tool", None, None),
        ("README.md", None, None),
        ("data.json", None, None),
        ("Makefile", None, None),
        ("notes/.sh", None, None),
    ],
)
def test_language_for(path: str, head: str | None, language: str | None) -> None:
    assert language_for(path, head) == language


def test_a_shebang_only_counts_on_the_first_line() -> None:
    assert language_for("tool", "\n#!/bin/bash\n") is None
