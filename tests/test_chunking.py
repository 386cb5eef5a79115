"""Tests for rag_sources.chunking, measured with the real all-MiniLM-L6-v2 tokenizer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_sources.chunking import Chunk, chunk_note, chunk_sections, heading_anchor
from rag_sources.formats.markdown import ParsedNote, parse_markdown
from rag_sources.formats.model import Section
from tests.tokenizer import Counter

VAULT = (
    Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpora" / "obsidian-help-en"
)

TARGET, MAX = 180, 254


def note_of(text: str, path: str = "Note.md") -> ParsedNote:
    return parse_markdown(text.encode("utf-8"), path)


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def check_invariants(
    note: ParsedNote,
    chunks: list[Chunk],
    count: Counter,
    file_lines: list[str],
    max_tokens: int = MAX,
    title: str = "",
) -> None:
    """The guarantees every chunking must keep."""
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    # no text lost, none duplicated, order kept
    assert squeeze("".join(c.text for c in chunks)) == squeeze(note.body)
    exact = count.embedder.count_tokens([c.embed_text for c in chunks])
    previous_end = 0
    for chunk, n in zip(chunks, exact, strict=True):
        assert chunk.token_count == n <= max_tokens
        assert chunk.text.strip()
        labels = chunk.heading_path
        if title and not (labels and labels[0].casefold() == title.casefold()):
            labels = [title, *labels]
        context = " > ".join(labels)
        if count.embedder.count_tokens([context])[0] <= max_tokens // 2:
            expected = f"{context}\n\n{chunk.text}" if context else chunk.text
            assert chunk.embed_text == expected
        else:  # an absurdly long heading path is shortened to half the budget
            assert chunk.embed_text.endswith(f"\n\n{chunk.text}")
        assert note.body_start_line <= chunk.line_start <= chunk.line_end <= len(file_lines)
        assert chunk.line_start >= previous_end
        previous_end = chunk.line_end
        span = "\n".join(file_lines[chunk.line_start - 1 : chunk.line_end])
        assert squeeze(chunk.text) in squeeze(span)
        assert file_lines[chunk.line_start - 1].strip()
        assert file_lines[chunk.line_end - 1].strip()


def run(
    text: str, count: Counter, target: int = TARGET, max_tokens: int = MAX
) -> tuple[ParsedNote, list[Chunk]]:
    note = note_of(text)
    chunks = chunk_note(note, count, target, max_tokens)
    check_invariants(note, chunks, count, text.split("\n"), max_tokens)
    return note, chunks


def paragraph(seed: int, sentences: int = 6) -> str:
    words = ["alpha", "vault", "index", "search", "note", "embedding", "token", "heading"]
    return " ".join(
        " ".join(words[(seed + i + j) % len(words)] for j in range(8)).capitalize() + "."
        for i in range(sentences)
    )


# ---- basics ---------------------------------------------------------------------


def test_empty_body_gives_no_chunks(count: Counter) -> None:
    note = note_of("---\ntitle: Only metadata\n---\n\n  \n")
    assert chunk_note(note, count, TARGET, MAX) == []


def test_small_note_is_one_chunk_with_common_heading_prefix(count: Counter) -> None:
    text = "Intro line.\n\n# Guide\n\n## Install\n\nRun it.\n\n## Use\n\nSearch it.\n"
    _, chunks = run(text, count)
    assert len(chunks) == 1
    (chunk,) = chunks
    assert chunk.heading_path == []  # the intro has no heading: common prefix is empty
    assert chunk.text == text.strip()
    assert chunk.embed_text == chunk.text
    assert (chunk.line_start, chunk.line_end) == (1, 11)


def test_merged_sections_keep_their_common_path(count: Counter) -> None:
    text = "# Guide\n\n## Install\n\nRun it.\n\n## Use\n\nSearch it.\n"
    _, chunks = run(text, count)
    assert [c.heading_path for c in chunks] == [["Guide"]]
    assert chunks[0].embed_text.startswith("Guide\n\n# Guide\n")


def test_heading_path_chain_and_line_numbers(count: Counter) -> None:
    body = (
        "# Install\n\n"
        + paragraph(0, 12)
        + "\n\n## On *Linux*\n\n"
        + paragraph(1, 12)
        + "\n\n### With `apt`\n\n"
        + paragraph(2, 12)
        + "\n\n# Use\n\n"
        + paragraph(3, 12)
        + "\n"
    )
    text = "---\ntitle: Setup\n---\n" + body
    note, chunks = run(text, count)
    assert note.body_start_line == 4
    assert [c.heading_path for c in chunks] == [
        ["Install"],
        ["Install", "On Linux"],
        ["Install", "On Linux", "With apt"],
        ["Use"],
    ]
    assert chunks[1].embed_text.startswith("Install > On Linux\n\n## On *Linux*\n")
    assert [(c.line_start, c.line_end) for c in chunks] == [(4, 6), (8, 10), (12, 14), (16, 18)]
    assert "Setup" not in chunks[0].embed_text  # the title is not embedded


def test_heading_inside_code_block_is_not_a_heading(count: Counter) -> None:
    text = "# Real\n\n```bash\n# not a heading\necho hi\n```\n\n    # indented code\n"
    _, chunks = run(text, count)
    assert [c.heading_path for c in chunks] == [["Real"]]


def test_setext_headings(count: Counter) -> None:
    text = "Top\n===\n\n" + paragraph(0, 14) + "\n\nSub\n---\n\n" + paragraph(1, 14) + "\n"
    _, chunks = run(text, count)
    assert [c.heading_path for c in chunks] == [["Top"], ["Top", "Sub"]]
    assert chunks[1].text.startswith("Sub\n---")


def test_bare_heading_stays_with_the_next_section(count: Counter) -> None:
    text = "# Chapter\n\n## Part\n\n" + "\n\n".join(paragraph(i, 5) for i in range(8)) + "\n"
    _, chunks = run(text, count)
    assert chunks[0].text.startswith("# Chapter\n\n## Part\n\n")
    assert all(c.heading_path == ["Chapter", "Part"] for c in chunks)


def test_headings_in_lists_and_quotes_do_not_split(count: Counter) -> None:
    text = "# Top\n\n> # quoted heading\n> text\n\n- # list heading\n"
    _, chunks = run(text, count)
    assert [c.heading_path for c in chunks] == [["Top"]]


def test_deterministic(count: Counter) -> None:
    text = "# A\n\n" + "\n\n".join(paragraph(i, 9) for i in range(12)) + "\n"
    note = note_of(text)
    assert chunk_note(note, count, TARGET, MAX) == chunk_note(note, count, TARGET, MAX)


# ---- splitting --------------------------------------------------------------------


def test_large_section_is_packed_on_block_boundaries(count: Counter) -> None:
    paragraphs = [paragraph(i, 4) for i in range(20)]
    text = "# Big\n\n" + "\n\n".join(paragraphs) + "\n"
    _, chunks = run(text, count)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.token_count <= TARGET
        assert chunk.heading_path == ["Big"]
        # every chunk is a run of whole paragraphs
        for part in chunk.text.split("\n\n"):
            assert part in paragraphs or part == "# Big"


def test_long_list_splits_between_items(count: Counter) -> None:
    items = [f"- item {i}: " + paragraph(i, 2) for i in range(40)]
    text = "## Items\n\n" + "\n".join(items) + "\n"
    _, chunks = run(text, count)
    assert len(chunks) > 3
    for chunk in chunks:
        lines = chunk.text.split("\n")
        assert all(line in items or line in ("## Items", "") for line in lines)


def test_long_table_splits_between_rows(count: Counter) -> None:
    rows = [f"| {i} | {paragraph(i, 1)} |" for i in range(60)]
    text = "| n | text |\n|---|---|\n" + "\n".join(rows) + "\n"
    _, chunks = run(text, count)
    assert len(chunks) > 3
    for chunk in chunks[1:]:
        assert all(line in rows for line in chunk.text.split("\n"))


def test_long_code_block_splits_on_lines(count: Counter) -> None:
    code = [f"    result_{i} = compute(value_{i}, option={i})" for i in range(120)]
    text = "# Code\n\n```python\n" + "\n".join(code) + "\n```\n"
    _, chunks = run(text, count)
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.token_count <= MAX


def test_long_paragraph_splits_on_sentences(count: Counter) -> None:
    text = "# Prose\n\n" + paragraph(0, 80) + "\n"
    _, chunks = run(text, count)
    assert len(chunks) > 3
    for chunk in chunks[1:]:
        assert chunk.text[0].isupper()
        assert chunk.text.endswith(".")


def test_long_line_without_sentences_splits_between_words(count: Counter) -> None:
    words = [f"word{i}" for i in range(900)]
    text = " ".join(words) + "\n"
    _, chunks = run(text, count)
    assert len(chunks) > 3
    assert [w for c in chunks for w in c.text.split()] == words  # no word cut in two


def test_line_without_any_whitespace_splits_at_tokens(count: Counter) -> None:
    text = "# Rule\n\n" + "-+" * 800 + "\n"
    _, chunks = run(text, count)
    assert len(chunks) > 3
    assert "".join(c.text for c in chunks).endswith("-+" * 800)


def test_overlong_heading_path_is_shortened(count: Counter) -> None:
    long_heading = " ".join(f"h{i}" for i in range(200))
    text = f"# {long_heading}\n\n## Child\n\n" + paragraph(0, 30) + "\n"
    _, chunks = run(text, count)
    for chunk in chunks:
        context = chunk.embed_text.split("\n\n", 1)[0]
        assert count.embedder.count_tokens([context])[0] <= MAX // 2


def test_a_huge_heading_names_its_chunks_by_its_start_and_stays_text(count: Counter) -> None:
    # A one-line note starting with "# ": before, every chunk carried the whole line as
    # its heading (a 5 MB note: gigabytes of heading paths and anchors).
    heading = " ".join(f"word{i}" for i in range(3_000))
    text = f"# {heading}\n\n{paragraph(0, 4)}\n"
    _, chunks = run(text, count)  # every character is still in the chunks' text
    assert len(chunks) > 10
    for chunk in chunks:
        [part] = chunk.heading_path
        assert len(part) <= 300 and heading.startswith(part) and part.startswith("word0 word1")
        assert heading_anchor(chunk.heading_path) == part
    note = note_of(text)
    capped = chunk_note(note, count, TARGET, MAX, max_heading_chars=40)
    assert {tuple(c.heading_path) for c in capped} == {("word0 word1 word2 word3 word4 word5",)}
    assert heading_anchor([heading], 25) == "word0 word1 word2 word3"


def test_section_heading_paths_from_parsers_are_capped(count: Counter) -> None:
    # A PDF outline entry, an EPUB chapter title or a book title can be megabytes.
    title = "Chapter one " + " ".join(["lorem"] * 20_000)
    body = "Page one text.\n\nMore text here.\n"
    deep = tuple(f"level {i}" for i in range(100))
    sections = [
        Section("page=1", "Page 1", 1, 1, (title,)),
        Section("page=2", "Page 2", 3, 3, deep),
    ]
    chunks = chunk_sections(body, 1, sections, count, TARGET, MAX, max_heading_chars=60)
    assert [c.anchor for c in chunks] == ["page=1", "page=2"]
    [part] = chunks[0].heading_path
    assert len(part) <= 60 and title.startswith(part) and title[len(part)] == " "
    assert len(chunks[1].heading_path) == 32 and chunks[1].heading_path[0] == "level 0"


def test_small_max_tokens(count: Counter) -> None:
    text = "# A\n\n" + paragraph(0, 10) + "\n\n```\n" + "x" * 50 + "\n```\n"
    _, chunks = run(text, count, target=12, max_tokens=16)
    assert all(c.token_count <= 16 for c in chunks)


def test_token_counts_are_batched(count: Counter) -> None:
    sections = [f"## Section {i}\n\n" + paragraph(i, 10 + i % 7) for i in range(60)]
    text = "\n\n".join(sections) + "\n"
    note = note_of(text)
    chunks = chunk_note(note, count, TARGET, MAX)
    assert len(chunks) >= 60
    # about one call per distinct heading path plus a few per split section
    assert count.calls < 200


def test_invalid_budgets(count: Counter) -> None:
    note = note_of("text\n")
    with pytest.raises(ValueError, match="target_tokens"):
        chunk_note(note, count, 300, 254)
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_note(note, count, 2, 4)


def test_heading_anchor() -> None:
    assert heading_anchor([]) == ""
    assert heading_anchor(["Install", "On Linux"]) == "Install#On Linux"
    assert heading_anchor(["Q: what | why?", "[[x]] ^y"]) == "Q what why?#x y"
    assert len(heading_anchor(["a" * 1_000_000, "b"])) == 302  # each heading capped


# ---- the real Obsidian Help vault ---------------------------------------------


@pytest.mark.shared_data
def test_vault_chunking_guarantees(count: Counter) -> None:
    if not VAULT.is_dir():
        pytest.fail(f"shared data not found at {VAULT}; deselect with -m 'not shared_data'")
    paths = sorted(VAULT.rglob("*.md"))
    assert len(paths) > 100
    total = 0
    for path in paths:
        rel = path.relative_to(VAULT).as_posix()
        data = path.read_bytes()
        note = parse_markdown(data, rel)
        chunks = chunk_note(note, count, TARGET, MAX)
        assert chunks or not note.body.strip(), rel
        file_lines = data.decode("utf-8-sig").replace("\r\n", "\n").split("\n")
        check_invariants(note, chunks, count, file_lines)
        total += len(chunks)
    assert total > len(paths)


@pytest.mark.shared_data
def test_vault_known_note_chunks(count: Counter) -> None:
    if not VAULT.is_dir():
        pytest.fail(f"shared data not found at {VAULT}; deselect with -m 'not shared_data'")
    rel = "Linking notes and files/Aliases.md"
    note = parse_markdown((VAULT / rel).read_bytes(), rel)
    chunks = chunk_note(note, count, TARGET, MAX)
    assert [c.heading_path for c in chunks] == [
        [],
        ["Add an alias to a note"],
        ["Link to a note using an alias"],
        ["Find unlinked mentions for an alias"],
    ]
    assert chunks[0].line_start == 11  # first non-blank body line
    assert chunks[1].text.startswith("## Add an alias to a note")
    assert (chunks[1].line_start, chunks[1].line_end) == (19, 32)
    # the YAML example inside the code fence does not start a section
    assert "# Dog" in chunks[1].text


def test_a_title_leads_the_embedded_context_but_not_the_heading_path(count: Counter) -> None:
    text = "Intro line.\n\n## Install\n\n" + paragraph(0, 30) + "\n"
    note = note_of(text)
    chunks = chunk_note(note, count, TARGET, MAX, title="Setup guide")
    check_invariants(note, chunks, count, text.split("\n"), title="Setup guide")
    assert chunks[0].embed_text.startswith("Setup guide\n\nIntro line.")
    assert chunks[-1].heading_path == ["Install"]
    assert chunks[-1].embed_text.startswith("Setup guide > Install\n\n")
    assert all(c.token_count <= MAX for c in chunks)


def test_a_title_that_is_already_the_first_heading_is_not_repeated(count: Counter) -> None:
    text = "# Setup Guide\n\nRun it.\n"
    [chunk] = chunk_note(note_of(text), count, TARGET, MAX, title="setup guide")
    assert chunk.embed_text == "Setup Guide\n\n# Setup Guide\n\nRun it."


def test_a_huge_title_keeps_the_context_within_half_the_budget(count: Counter) -> None:
    title = " ".join(f"t{i}" for i in range(400))
    text = "# Child\n\n" + paragraph(0, 30) + "\n"
    note = note_of(text)
    chunks = chunk_note(note, count, TARGET, MAX, title=title)
    check_invariants(note, chunks, count, text.split("\n"), title=title)
    for chunk in chunks:
        context = chunk.embed_text.split("\n\n", 1)[0]
        assert context.startswith("t0 t1")
        assert count.embedder.count_tokens([context])[0] <= MAX // 2
