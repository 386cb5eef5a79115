"""Tests for rag_sources.formats.markdown: one Markdown / Obsidian note at a time."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rag_sources.formats.markdown import (
    Link,
    NoteParseError,
    NoteSkipped,
    ParsedNote,
    block_tokens,
    parse_markdown,
)

VAULT = (
    Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpora" / "obsidian-help-en"
)


def parse(text: str, path: str = "Folder/My Note.md") -> ParsedNote:
    return parse_markdown(text.encode("utf-8"), path)


def link(
    target: str,
    line: int,
    *,
    heading: str | None = None,
    block: str | None = None,
    alias: str | None = None,
    embed: bool = False,
) -> Link:
    return Link(target, heading, block, alias, embed, line)


# ---- headings --------------------------------------------------------------------


def test_only_the_start_of_a_huge_heading_line_is_parsed_as_inline_markup() -> None:
    # 200,000 emphasised words on one "# " line: before, markdown-it made every one of
    # their ~1,000,000 inline tokens (for a heading only its first 300 characters name).
    line = "# " + "*word* " * 200_000
    tokens = block_tokens(line + "\n\nbody\n")
    [inline] = [t for i, t in enumerate(tokens) if i and tokens[i - 1].type == "heading_open"]
    assert inline.children is not None and 0 < len(inline.children) < 2_000
    assert len(block_tokens(line, max_heading_chars=20)[1].children or []) < 200
    note = parse(line + "\n\nA [[Link]] and #tag after it.\n")  # the rest is body text
    assert note.body.startswith(line) and note.tags == ["tag"] and note.links[0].target == "Link"


# ---- frontmatter ---------------------------------------------------------------


def test_frontmatter_fields() -> None:
    note = parse(
        "---\n"
        "title: Real Title\n"
        "aliases:\n"
        "  - First\n"
        "  - Second\n"
        "tags: [Project, '#Work/Client']\n"
        "created: 2024-03-01\n"
        "modified: 2024-03-02T10:30:00+02:00\n"
        "rating: 4.5\n"
        "---\n"
        "# Heading\n"
        "Body text.\n"
    )
    assert note.title == "Real Title"
    assert note.aliases == ["First", "Second"]
    assert note.tags == ["project", "work/client"]
    assert note.created == datetime(2024, 3, 1, tzinfo=UTC)
    assert note.updated == datetime(2024, 3, 2, 8, 30, tzinfo=UTC)
    assert note.body == "# Heading\nBody text.\n"
    assert note.body_start_line == 11
    assert note.warnings == []
    assert note.frontmatter["created"] == "2024-03-01"
    assert note.frontmatter["modified"] == "2024-03-02T10:30:00+02:00"
    assert note.frontmatter["rating"] == 4.5
    json.dumps(note.frontmatter, allow_nan=False)  # JSON-safe


def test_title_is_file_stem_without_frontmatter_title() -> None:
    note = parse("# A different first heading\n\ntext\n", "Folder/My Note.md")
    assert note.title == "My Note"
    assert note.path == "Folder/My Note.md"
    assert note.frontmatter == {}
    assert note.body_start_line == 1


def test_alias_string_and_singular_keys() -> None:
    note = parse("---\nalias: Only One, with comma\ntag: alpha, beta gamma\n---\ntext\n")
    assert note.aliases == ["Only One, with comma"]
    assert note.tags == ["alpha", "beta", "gamma"]


def test_empty_property_values() -> None:
    note = parse("---\naliases:\ntags:\ntitle:\n---\ntext\n", "n.md")
    assert note.aliases == []
    assert note.tags == []
    assert note.title == "n"
    assert note.frontmatter == {"aliases": None, "tags": None, "title": None}


def test_naive_datetime_is_utc_and_bad_date_warns() -> None:
    note = parse("---\ndate: 2023-05-06 07:08:09\nupdated: next tuesday\n---\nx\n")
    assert note.created == datetime(2023, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert note.updated is None
    assert any("'updated' is not a date" in w for w in note.warnings)


def test_iso_string_dates() -> None:
    note = parse("---\ncreated: '2024-01-02T03:04:05Z'\nlast_modified: '2024-01-03'\n---\nx\n")
    assert note.created == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert note.updated == datetime(2024, 1, 3, tzinfo=UTC)


def test_broken_yaml_bad_indentation() -> None:
    text = "---\ntitle: Fine\ntags:\n  - a\n - b\n---\nBody #inline\n"
    note = parse(text, "x/Broken.md")
    assert note.frontmatter == {}
    assert note.title == "Broken"
    assert note.body == "Body #inline\n"
    assert note.body_start_line == 7
    assert note.tags == ["inline"]
    assert len(note.warnings) == 1
    assert note.warnings[0].startswith("invalid YAML frontmatter (line ")
    assert note.warnings[0].endswith("; metadata ignored")


def test_broken_yaml_unclosed_quote_names_line() -> None:
    note = parse('---\ntitle: ok\ndescription: "never closed\n---\nbody\n')
    assert note.body == "body\n"
    assert note.frontmatter == {}
    assert "invalid YAML frontmatter (line" in note.warnings[0]


def test_frontmatter_not_a_mapping() -> None:
    note = parse("---\n- just\n- a list\n---\nbody\n")
    assert note.frontmatter == {}
    assert note.body == "body\n"
    assert "expected key: value pairs" in note.warnings[0]


def test_unclosed_frontmatter_is_body() -> None:
    text = "---\ntitle: x\n\nSome text [[Link]]\n"
    note = parse(text)
    assert note.body == text
    assert note.body_start_line == 1
    assert note.frontmatter == {}
    assert "never closed" in note.warnings[0]
    assert note.links == [link("Link", 4)]


def test_frontmatter_only_note_is_indexed() -> None:
    note = parse("---\ntitle: Just metadata\ntags: [x]\n---\n")
    assert note.title == "Just metadata"
    assert note.tags == ["x"]
    assert note.body == ""
    assert note.body_start_line == 5


def test_broken_frontmatter_without_body_is_indexed_with_warning() -> None:
    note = parse("---\ntitle: [unclosed\n---\n", "b.md")
    assert note.body == ""
    assert note.title == "b"
    assert note.warnings and "invalid YAML frontmatter" in note.warnings[0]


def test_property_links_are_links() -> None:
    note = parse('---\nrelated: "[[Other note|Other]]"\nup:\n  - "[[Parent]]"\n---\nx\n')
    assert note.links == [link("Other note", 2, alias="Other"), link("Parent", 4)]


# ---- skipped and unreadable files ---------------------------------------------


@pytest.mark.parametrize("data", [b"", b"   \n\t\n", b"\xef\xbb\xbf\n"])
def test_empty_file_is_skipped(data: bytes) -> None:
    with pytest.raises(NoteSkipped, match="empty file"):
        parse_markdown(data, "e.md")


def test_empty_frontmatter_and_body_is_skipped() -> None:
    with pytest.raises(NoteSkipped, match="empty file"):
        parse_markdown(b"---\n---\n\n", "e.md")


def test_binary_is_skipped() -> None:
    with pytest.raises(NoteSkipped, match=r"binary content \(NUL bytes\)"):
        parse_markdown(b"hello\x00world", "b.md")


def test_utf16_is_a_parse_error() -> None:
    with pytest.raises(NoteParseError, match="UTF-16"):
        parse_markdown("# hi\n".encode("utf-16"), "u.md")


def test_invalid_utf8_names_offset() -> None:
    with pytest.raises(NoteParseError) as info:
        parse_markdown(b"hello world\n\xff more", "bad.md")
    assert str(info.value) == (
        "not valid UTF-8 (byte 0xff at offset 12); re-save the file as UTF-8"
    )


def test_invalid_utf8_offset_counts_bom() -> None:
    with pytest.raises(NoteParseError, match="offset 5"):
        parse_markdown(b"\xef\xbb\xbfab\xc3(", "bad.md")


def test_bom_and_crlf() -> None:
    data = b"\xef\xbb\xbf---\r\ntitle: T\r\n---\r\nline one\r\n[[Target]]\r\n"
    note = parse_markdown(data, "n.md")
    assert note.title == "T"
    assert note.body == "line one\n[[Target]]\n"
    assert note.links == [link("Target", 5)]


# ---- tags -----------------------------------------------------------------------


def test_inline_tags_rules() -> None:
    body = (
        "# Heading not a tag\n"
        "#Start of line and #nested/tag and #tag-with_dash, #Caf\u00e9.\n"
        "Numbers #123 are not tags but #y1984 is; #2024/q1 is.\n"
        "URL http://example.com/#frag and [link](#Local) and [[Note#Heading]] and C#.\n"
        "Inline `#code` and ``#more code`` are not tags; neither is \\#escaped.\n"
        "```\n#in-fence\n```\n"
        "\n    #indented-code\n\n"
        '<span style="color: #ff0000">red</span> %% #commented %%\n'
        "Repeat #START and #nested/Tag.\n"
    )
    note = parse("---\ntags: [fm]\n---\n" + body)
    assert note.tags == [
        "fm",
        "start",
        "nested/tag",
        "tag-with_dash",
        "caf\u00e9",
        "y1984",
        "2024/q1",
    ]


# ---- links ----------------------------------------------------------------------


def test_wikilink_forms_and_lines() -> None:
    body = (
        "Intro [[Plain]] and [[Folder/Note]].\n"
        "[[Note#Heading]] [[Note#A#B]] [[Note#^abc123]]\n"
        "[[Note|shown text]] [[Note#Heading|shown]]\n"
        "![[image.png]] ![[Note#^block|x]]\n"
        "[[#Same note heading]] [[#^localblock]]\n"
        "| a | [[Table link\\|alias]] |\n"
    )
    note = parse("---\ntitle: t\n---\n" + body)
    assert note.links == [
        link("Plain", 4),
        link("Folder/Note", 4),
        link("Note", 5, heading="Heading"),
        link("Note", 5, heading="A#B"),
        link("Note", 5, block="abc123"),
        link("Note", 6, alias="shown text"),
        link("Note", 6, heading="Heading", alias="shown"),
        link("image.png", 7, embed=True),
        link("Note", 7, block="block", alias="x", embed=True),
        link("", 8, heading="Same note heading"),
        link("", 8, block="localblock"),
        link("Table link", 9, alias="alias"),
    ]


def test_links_in_code_are_ignored() -> None:
    body = (
        "Real [[One]].\n"
        "Inline `[[Not a link]]` code.\n"
        "~~~md\n[[Fenced]]\n[x](fenced.md)\n~~~\n"
        "\n    [[Indented code]]\n\n"
        "- list\n  ```\n  [[Fenced in list]]\n  ```\n"
        "> ```\n> [[Fenced in quote]]\n> ```\n"
        "Real [[Two]].\n"
    )
    note = parse(body)
    assert [lk.target for lk in note.links] == ["One", "Two"]
    assert note.links[1].line == 17


def test_markdown_links_to_local_notes() -> None:
    body = (
        "[Other](other.md) [Spaced](Folder/My%20Note.md#Some%20Heading)\n"
        "[Angle](<Folder/With Space.md>) [No ext](Three%20laws) [Block](n.md#^b1)\n"
        "[Web](https://example.com/a.md) [Mail](mailto:x@y.z) [App](obsidian://open?x=1)\n"
        "[Image](pic.png) ![Embedded](embedded.md) [Here](#Local%20heading)\n"
        '[Titled](titled.md "A title")\n'
    )
    note = parse(body)
    assert note.links == [
        link("other.md", 1, alias="Other"),
        link("Folder/My Note.md", 1, heading="Some Heading", alias="Spaced"),
        link("Folder/With Space.md", 2, alias="Angle"),
        link("Three laws", 2, alias="No ext"),
        link("n.md", 2, block="b1", alias="Block"),
        link("embedded.md", 4, alias="Embedded", embed=True),
        link("", 4, heading="Local heading", alias="Here"),
        link("titled.md", 5, alias="Titled"),
    ]


def test_link_order_follows_the_text() -> None:
    note = parse("[a](a.md) [[b]] [c](c.md)\n[[d]]\n")
    assert [lk.target for lk in note.links] == ["a.md", "b", "c.md", "d"]


# ---- the real Obsidian Help vault ---------------------------------------------


def _vault_notes() -> list[Path]:
    if not VAULT.is_dir():
        pytest.fail(f"shared data not found at {VAULT}; deselect with -m 'not shared_data'")
    return sorted(VAULT.rglob("*.md"))


def _parse_vault_file(rel: str) -> ParsedNote:
    return parse_markdown((VAULT / rel).read_bytes(), rel)


@pytest.mark.shared_data
def test_vault_parses_every_note() -> None:
    paths = _vault_notes()
    assert len(paths) > 100
    for path in paths:
        rel = path.relative_to(VAULT).as_posix()
        note = parse_markdown(path.read_bytes(), rel)
        assert note.warnings == [], rel
        assert note.title == path.stem
        total_lines = path.read_text(encoding="utf-8").count("\n") + 1
        assert 1 <= note.body_start_line <= total_lines
        for lk in note.links:
            assert 1 <= lk.line <= total_lines, (rel, lk)
        json.dumps(note.frontmatter, allow_nan=False)


@pytest.mark.shared_data
def test_vault_aliases_note() -> None:
    _vault_notes()
    note = _parse_vault_file("Linking notes and files/Aliases.md")
    assert note.title == "Aliases"
    assert note.aliases == ["alias", "aliases", "How to/Add aliases to note"]
    assert note.frontmatter["permalink"] == "aliases"
    assert note.body_start_line == 10
    assert note.tags == []
    assert note.links[:3] == [
        link(
            "Internal links",
            15,
            heading="Change the link display text",
            alias="Change the link display text",
        ),
        link("Internal links", 17, block="callout-internal-links-link-text", embed=True),
        link("Properties", 21),
    ]
    # `[[Artificial Intelligence|AI]]` only appears inside inline code
    assert all(lk.target != "Artificial Intelligence" for lk in note.links)


@pytest.mark.shared_data
def test_vault_tags_note() -> None:
    _vault_notes()
    note = _parse_vault_file("Editing and formatting/Tags.md")
    # `#meeting` is inline code, `#1984` is numeric, the YAML example is in a fence
    assert note.tags == ["y1984", "tag", "camelcase", "pascalcase", "snake_case", "kebab-case"]
    assert note.aliases == ["How to/Working with tags"]
    assert link("", 48, heading="Nested tags") in note.links
    assert link("Functions", 38, heading="hasTag") in note.links


@pytest.mark.shared_data
def test_vault_internal_links_note() -> None:
    _vault_notes()
    note = _parse_vault_file("Linking notes and files/Internal links.md")
    assert link("Example.md", 168, alias="Custom name") in note.links
    assert link("Example.md", 169, heading="Details", alias="Section name") in note.links
    assert (
        link(
            "Help and support", 86, heading="Questions and advice#Report bugs and request features"
        )
        in note.links
    )
    assert link("internal-links-header.png", 96, heading="interface", embed=True) in note.links
    # The markdown-format examples on line 24 are inline code, not links.
    assert all(lk.line != 24 for lk in note.links)


@pytest.mark.shared_data
def test_vault_null_aliases_property() -> None:
    _vault_notes()
    note = _parse_vault_file("Plugins/Format converter.md")
    assert note.aliases == []
    assert note.frontmatter["aliases"] is None
    assert note.frontmatter["publish"] is True
