"""Hostile or broken YAML frontmatter: always a warning on the note, never a lost
note, a hang or a huge row (issue 13, items 4 and 5)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from rag_serving.config import RaglineConfig
from rag_serving.index.store import IndexStore
from rag_serving.search import SearchEngine
from rag_sources.formats.markdown import (
    MAX_FRONTMATTER_CHARS,
    MAX_FRONTMATTER_DEPTH,
    ParsedNote,
    parse_markdown,
    parse_markdown_document,
)
from rag_sources.formats.model import json_safe
from rag_sources.where import sql_string
from tests.conftest import build_index, write_config

REPO = Path(__file__).resolve().parents[1]

# 325 bytes that expand to 9**7 = 4.8 million strings (88 s, 1.8 GB and 351 MB of
# stored JSON before aliases were refused).
ALIAS_BOMB = """---
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
---
The quokka laughs a billion times in this body.
"""

BAD_DATE = """---
title: Trip planning
created: 2024-13-45
tags: [travel]
---
Pack the marmalade sandwiches for the lighthouse walk.
"""


def parse(text: str) -> ParsedNote:
    return parse_markdown(text.encode("utf-8"), "Note.md")


# ---- aliases --------------------------------------------------------------------


def test_alias_bomb_is_refused_quickly_and_stores_no_metadata() -> None:
    start = time.monotonic()
    doc = parse_markdown_document(ALIAS_BOMB.encode(), "bomb.md")
    elapsed = time.monotonic() - start
    assert elapsed < 2.0, f"took {elapsed:.1f}s"
    assert doc.metadata == {}
    assert len(json.dumps(json_safe(doc.metadata))) < 10  # the stored frontmatter_json
    assert doc.warnings == (
        "invalid YAML frontmatter (line 3): aliases (*a) are not allowed; metadata ignored",
    )
    assert "quokka laughs" in doc.body


def test_a_self_referencing_alias_is_refused_not_recursed() -> None:
    note = parse("---\nloop: &a [*a]\ntitle: Kept title?\n---\nbody words\n")
    assert note.frontmatter == {} and note.title == "Note"
    assert note.warnings == [
        "invalid YAML frontmatter (line 2): aliases (*a) are not allowed; metadata ignored"
    ]


def test_merge_keys_need_aliases_and_are_refused_too() -> None:
    note = parse("---\nbase: &b {x: 1}\nchild:\n  <<: *b\n---\nbody\n")
    assert note.frontmatter == {}
    assert "aliases (*b) are not allowed" in note.warnings[0]


def test_an_anchor_without_alias_is_harmless() -> None:
    note = parse("---\nstatus: &s draft\n---\nbody\n")
    assert note.frontmatter == {"status": "draft"} and note.warnings == []


# ---- nesting and size -----------------------------------------------------------


@pytest.mark.parametrize(
    "yaml_text",
    [
        "x: " + "[" * 5000 + "]" * 5000,  # flow nesting: RecursionError before
        "".join("  " * i + "k:\n" for i in range(200)),  # block nesting
    ],
    ids=["flow", "block"],
)
def test_deep_nesting_is_a_warning_not_a_recursion_error(yaml_text: str) -> None:
    note = parse(f"---\n{yaml_text}\n---\nthe body stays\n")
    assert note.frontmatter == {}
    assert len(note.warnings) == 1
    assert (
        f"nested deeper than {MAX_FRONTMATTER_DEPTH} levels; metadata ignored" in (note.warnings[0])
    )
    assert note.body.strip() == "the body stays"


def test_nesting_within_the_limit_is_kept() -> None:
    depth = MAX_FRONTMATTER_DEPTH - 1  # lists inside the top-level mapping
    note = parse("---\nx: " + "[" * depth + "1" + "]" * depth + "\n---\nbody\n")
    assert note.warnings == []
    value = note.frontmatter["x"]
    for _ in range(depth - 1):
        value = value[0]
    assert value == [1]
    one_more = parse("---\nx: " + "[" * (depth + 1) + "1" + "]" * (depth + 1) + "\n---\nbody\n")
    assert one_more.frontmatter == {} and "nested deeper" in one_more.warnings[0]


def test_oversized_frontmatter_is_ignored_with_a_warning() -> None:
    big = "summary: '" + "a" * MAX_FRONTMATTER_CHARS + "'"
    note = parse(f"---\ntitle: Big\n{big}\n---\nbody of the big note\n")
    assert note.frontmatter == {} and note.title == "Note"
    assert re.fullmatch(
        r"frontmatter is [\d,]+ characters long \(the limit is 100,000\); metadata ignored, "
        r"move long text into the body",
        note.warnings[0],
    )
    assert note.body.strip() == "body of the big note"


def test_frontmatter_that_expands_past_the_json_limit_is_ignored() -> None:
    # Under the character limit, but `~,` becomes `null, ` in JSON: three times larger.
    yaml_text = "x: [" + "~," * (MAX_FRONTMATTER_CHARS // 2 - 10) + "]"
    assert len(yaml_text) < MAX_FRONTMATTER_CHARS
    start = time.monotonic()
    note = parse(f"---\n{yaml_text}\n---\nbody\n")
    assert time.monotonic() - start < 10
    assert note.frontmatter == {}
    assert re.fullmatch(
        r"frontmatter takes [\d,]+ characters as JSON \(the limit is 200,000\); "
        r"metadata ignored, move long text into the body",
        note.warnings[0],
    )


# ---- values YAML cannot construct -----------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("2024-13-45", "month must be in 1..12"),
        ("2024-02-30", "day is out of range for month"),
        ("0000-01-01", "year 0 is out of range"),
        ("2024-01-01T25:00:00", "hour must be in 0..23"),
        ("2024-01-01 10:61:00", "minute must be in 0..59"),
    ],
)
def test_an_impossible_date_is_a_warning_naming_key_and_value(value: str, reason: str) -> None:
    note = parse(f"---\ntitle: Trip\ncreated: {value}\ntags: [travel]\n---\nbody\n")
    assert note.warnings == [
        f"frontmatter 'created': '{value}' is not a valid date ({reason}); kept as text"
    ]
    assert note.created is None
    assert note.frontmatter == {"title": "Trip", "created": value, "tags": ["travel"]}
    assert note.title == "Trip" and note.tags == ["travel"]  # the rest is still read


@pytest.mark.parametrize(
    "value",
    ["0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00", "'0001-01-01T00:00:00+05:00'"],
)
def test_a_date_out_of_range_in_utc_is_a_warning(value: str) -> None:
    note = parse(f"---\nupdated: {value}\n---\nbody\n")
    assert note.updated is None
    assert len(note.warnings) == 1
    assert note.warnings[0].startswith("frontmatter 'updated' is out of range in UTC (")
    assert note.frontmatter["updated"].startswith(value.strip("'")[:19])


def test_bad_values_anywhere_are_named_by_their_key_path() -> None:
    note = parse(
        "---\n2024-13-45: as a key\ntrip:\n  start: 2024-02-30\n  days: [2024-01-01, 2024-13-01]\n"
        "---\nbody\n"
    )
    assert note.warnings == [
        "frontmatter '2024-13-45': '2024-13-45' is not a valid date (month must be in 1..12); "
        "kept as text",
        "frontmatter 'trip.start': '2024-02-30' is not a valid date "
        "(day is out of range for month); kept as text",
        "frontmatter 'trip.days[1]': '2024-13-01' is not a valid date "
        "(month must be in 1..12); kept as text",
    ]
    assert note.frontmatter == {
        "2024-13-45": "as a key",
        "trip": {"start": "2024-02-30", "days": ["2024-01-01", "2024-13-01"]},
    }


def test_many_bad_values_give_a_bounded_number_of_warnings() -> None:
    lines = "".join(f"k{i}: 2024-13-{i % 28 + 1:02d}\n" for i in range(500))
    note = parse(f"---\n{lines}---\nbody\n")
    assert len(note.warnings) == 6
    assert note.warnings[-1] == "frontmatter: 495 more values kept as text"
    assert len(note.frontmatter) == 500


@pytest.mark.parametrize(
    ("yaml_text", "expected", "warning"),
    [
        ("n: !!int soon", "soon", "'n': 'soon' is not a valid integer"),
        ("n: !!float soon", "soon", "'n': 'soon' is not a valid number"),
        ("n: !!bool soon", "soon", "'n': 'soon' is not a valid boolean (not written as one)"),
        ("n: !!timestamp soon", "soon", "'n': 'soon' is not a valid date (not written as one)"),
        ("n: " + "9" * 5000, "9" * 5000, "is not a valid integer (5,000 characters long)"),
        ("n: !!int", "", "'n': '' is not a valid integer (not written as one)"),
    ],
)
def test_other_scalars_that_raise_are_kept_as_text(
    yaml_text: str, expected: str, warning: str
) -> None:
    note = parse(f"---\n{yaml_text}\n---\nbody\n")
    assert note.frontmatter == {"n": expected}
    assert len(note.warnings) == 1 and warning in note.warnings[0]
    assert note.warnings[0].endswith("; kept as text")


def test_a_scalar_tag_on_a_list_or_map_is_a_warning() -> None:
    note = parse("---\nx: !!int [1]\ny: 2\n---\nbody\n")
    assert note.frontmatter == {}
    assert note.warnings == [
        "invalid YAML frontmatter (line 2): the tag 'tag:yaml.org,2002:int' needs a single "
        "value; metadata ignored"
    ]


def test_numbers_past_64_bits_are_stored_as_text() -> None:
    note = parse("---\nbig: 123456789012345678901234567890\nhex: 0x" + "f" * 5000 + "\n---\nb\n")
    assert note.warnings == []
    assert note.frontmatter["big"] == "123456789012345678901234567890"
    assert note.frontmatter["hex"] == "0x" + "f" * 5000
    json.dumps(note.frontmatter)  # storable
    assert json_safe({"n": 2**70, "m": -(2**63)}) == {"n": str(2**70), "m": -(2**63)}
    assert json_safe(2**20_000).startswith("0x1")  # decimal would pass Python's digit limit


def test_nan_and_infinity_are_stored_as_text() -> None:
    note = parse("---\nx: .nan\ny: -.inf\n---\nbody\n")
    assert note.frontmatter == {"x": "nan", "y": "-inf"}
    json.dumps(note.frontmatter, allow_nan=False)


# ---- unsafe tags, non-mappings, junk ---------------------------------------------


def test_python_tags_are_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    note = parse(
        f"---\nx: !!python/object/apply:os.system ['touch {marker}']\n"
        "y: !!python/name:os.system\n---\nbody\n"
    )
    assert not marker.exists()
    assert note.frontmatter == {}
    assert "could not determine a constructor for the tag" in note.warnings[0]
    assert note.warnings[0].endswith("metadata ignored")


@pytest.mark.parametrize(
    ("yaml_text", "what"),
    [("- a\n- b", "a list"), ("just a sentence", "a str"), ("42", "a int")],
)
def test_frontmatter_that_is_not_a_mapping_is_a_warning(yaml_text: str, what: str) -> None:
    note = parse(f"---\n{yaml_text}\n---\nbody\n")
    assert note.frontmatter == {}
    assert note.warnings == [
        f"invalid YAML frontmatter (line 2): expected key: value pairs, got {what}; "
        "metadata ignored"
    ]


def test_control_characters_in_frontmatter_are_a_warning() -> None:
    note = parse("---\nx: \x01\x02\x7f\n---\nbody\n")
    assert note.frontmatter == {}
    assert note.warnings[0].startswith("invalid YAML frontmatter")
    assert note.body.strip() == "body"


def test_no_module_loads_yaml_unsafely() -> None:
    unsafe = re.compile(
        r"yaml\.(load|load_all|full_load|full_load_all|unsafe_load|unsafe_load_all)\(|"
        r"\b(Unsafe|Full)?Loader\b(?<!SafeLoader)|UnsafeLoader|FullLoader|CLoader"
    )
    offenders = []
    for package in ("rag_assets", "rag_serving", "ragline"):
        for path in (REPO / package).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if unsafe.search(line) and "SafeLoader" not in line:
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


# ---- through the whole pipeline --------------------------------------------------


@pytest.fixture(scope="module")
def hostile_vault_index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    vault = tmp_path_factory.mktemp("hostile-vault")
    (vault / "bomb.md").write_text(ALIAS_BOMB)
    (vault / "bad date.md").write_text(BAD_DATE)
    (vault / "fine.md").write_text("---\ntitle: Fine\n---\nAn ordinary note about teapots.\n")
    root = tmp_path_factory.mktemp("hostile-index")
    return build_index(
        write_config(root, [{"name": "notes", "kind": "markdown", "path": str(vault)}])
    )


def test_hostile_notes_are_indexed_and_searchable(hostile_vault_index: RaglineConfig) -> None:
    engine = SearchEngine(hostile_vault_index)
    bomb = engine.search("quokka laughs billion", k=3, mode="bm25")
    assert [h.path for h in bomb.hits][:1] == ["bomb.md"]
    trip = engine.search("marmalade sandwiches lighthouse", k=3, mode="bm25")
    assert [h.path for h in trip.hits][:1] == ["bad date.md"]
    assert trip.hits[0].title == "Trip planning"  # the other keys were still read


def test_hostile_notes_carry_their_warnings(hostile_vault_index: RaglineConfig) -> None:
    store = IndexStore(hostile_vault_index.data_dir)
    issues = {
        row["path"]: row for row in store.read("file_issues", where="source = 'notes'").to_pylist()
    }
    assert set(issues) == {"bomb.md", "bad date.md"}
    assert {row["severity"] for row in issues.values()} == {"warning"}
    assert "aliases (*a) are not allowed" in issues["bomb.md"]["message"]
    assert "'created': '2024-13-45' is not a valid date" in issues["bad date.md"]["message"]
    docs = {
        row["path"]: row
        for row in store.read(
            "documents",
            where=f"path IN ({sql_string('bomb.md')}, {sql_string('bad date.md')})",
            columns=["path", "frontmatter_json"],
        ).to_pylist()
    }
    assert json.loads(docs["bomb.md"]["frontmatter_json"]) == {}
    assert json.loads(docs["bad date.md"]["frontmatter_json"])["created"] == "2024-13-45"
