"""What search and the MCP tools tell a caller stays within what it may see, and
every answer stays small however big the index's content or its problem list is
(issue 26, items 1, 3 and 11): real git and Markdown sources indexed by the Dagster
job into LanceDB and Tantivy, served by the MCP service with per-token access."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rag_serving.config import RaglineConfig
from rag_serving.index.store import IndexStore
from rag_serving.mcp.auth import Access
from rag_serving.mcp.search import SearchRequest
from rag_serving.mcp.service import DEFAULT_OPEN_CHARS, RaglineService
from rag_serving.search import SearchFilters
from rag_serving.search.engine import SearchEngine
from rag_sources.errors import FilterError
from rag_sources.where import sql_string
from ragline.cli import cli
from tests.conftest import build_index, write_config
from tests.git_repos import commit_files, init_repo

ALPHA_ONLY = Access(user="alice", sources=frozenset({"alpha"}))
LOCAL = Access(user="local", sources=None, local=True)
# Functions only the hidden repository defines.
BETA_SYMBOLS = ("rotate_vault_credentials", "RotationPolicy", "decrypt_wallet_seed")
BROKEN_NOTES = 45  # more than any list in a status answer may hold
LONG_LINE_CHARS = 300_000
HUB_LINKS = 260  # links of one note to another: more than `neighbors` lists


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    root = tmp_path_factory.mktemp("serving-bounds")
    alpha = init_repo(root / "alpha")
    commit_files(
        alpha,
        "alpha: upload helpers",
        {
            "upload.py": "def retry_upload(path):\n    return send(path)\n\n\n"
            "def rotate_logs(folder):\n    return folder\n",
        },
    )
    beta = init_repo(root / "beta")
    commit_files(
        beta,
        "beta: secrets",
        {
            "vault.py": "def rotate_vault_credentials(key):\n    return key\n\n\n"
            "class RotationPolicy:\n    def decrypt_wallet_seed(self, seed):\n        return seed\n",
        },
    )
    notes = root / "notes"
    notes.mkdir()
    (notes / "Long line.md").write_text(
        "# Long\n\n" + "lorem ipsum " * (LONG_LINE_CHARS // 12) + "\n"
    )
    (notes / "Fine.md").write_text("# Fine\n\nA note about glaciers.\n")
    title = " ".join(f"word{n}" for n in range(8_000))  # ~60 kB, under the frontmatter cap
    (notes / "Long title.md").write_text(f"---\ntitle: {title}\n---\n\nA note about moraines.\n")
    links = "".join(f"- [[Fine]] number {n}\n" for n in range(HUB_LINKS))
    (notes / "Hub.md").write_text("# Hub\n\n" + links)
    for number in range(BROKEN_NOTES):
        (notes / f"binary {number:02}.md").write_bytes(b"\x00\x01binary\x00" * 4)
    sources = [
        {"name": "alpha", "kind": "git", "path": str(alpha), "history_months": 0},
        {"name": "beta", "kind": "git", "path": str(beta), "history_months": 0},
        {"name": "notes", "kind": "markdown", "path": str(notes)},
    ]
    return build_index(write_config(root, sources, root / "data"))


def _error(service: RaglineService, access: Access, **request: object) -> str:
    with pytest.raises(FilterError) as failure:
        service.search(access, SearchRequest(query="rotate", **request))  # type: ignore[arg-type]
    return str(failure.value)


def test_a_hidden_sources_symbol_fails_like_an_absent_one_and_is_never_suggested(
    index: RaglineConfig,
) -> None:
    service = RaglineService(index)
    hidden = _error(service, ALPHA_ONLY, symbols=("rotate_vault_credentials",))
    # A name nobody defines, as close to the caller's own names as the hidden one.
    absent = _error(service, ALPHA_ONLY, symbols=("rotate_vault_credentialx",))
    assert hidden.replace("rotate_vault_credentials", "X") == absent.replace(
        "rotate_vault_credentialx", "X"
    )
    near = _error(service, ALPHA_ONLY, symbols=("rotate_vault",))
    for error in (hidden, absent, near):
        assert not any(name in error.replace("rotate_vault", "") for name in BETA_SYMBOLS), error
    assert "rotate_logs" in near  # suggestions come from what the caller sees
    # The owner of every source finds it, and is offered it when close.
    hits = service.search(
        LOCAL, SearchRequest(query="rotate", symbols=("rotate_vault_credentials",))
    )
    assert {hit.source for hit in hits.hits} == {"beta"}
    assert "rotate_vault_credentials" in _error(
        service, LOCAL, symbols=("rotate_vault_credential",)
    )


def test_a_source_filter_scopes_symbol_suggestions_on_the_command_line_too(
    index: RaglineConfig,
) -> None:
    engine = SearchEngine(index)
    with pytest.raises(FilterError) as failure:
        engine.search(
            "rotate", filters=SearchFilters(sources=("alpha",), symbols=("RotationPolicyX",))
        )
    shown = str(failure.value).replace("RotationPolicyX", "")
    assert "no indexed code defines symbol" in shown
    assert not any(name in shown for name in BETA_SYMBOLS), shown


def test_status_groups_problems_and_stays_small(index: RaglineConfig) -> None:
    service = RaglineService(index)
    notes = next(s for s in service.status(LOCAL).sources if s.name == "notes")
    assert notes.problem_counts["skipped"] + notes.problem_counts["error"] == BROKEN_NOTES
    listed = notes.errors + notes.skipped + notes.warnings + notes.pending
    assert 0 < len(listed) <= 4 * 20
    [group] = [g for g in notes.problem_groups if g.count > 1]
    assert group.count == BROKEN_NOTES and len(group.examples) == 3
    assert len(notes.model_dump_json()) < 20_000

    out = CliRunner().invoke(cli, ["--config", str(index.config_path), "status"])
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if "notes" in line and "binary" in line]
    assert len(lines) == 1 and f"{BROKEN_NOTES} items" in lines[0], out.output


def test_remote_callers_never_read_server_paths_in_problem_messages(index: RaglineConfig) -> None:
    store = IndexStore(index.data_dir)
    notes_root = str(index.source("notes").path)
    leaked = (
        f"OCR failed: {notes_root}/binary 00.md: /usr/lib/python3/dist-packages/pytesseract/"
        "pytesseract.py line 264"
    )
    store.file_issues().update(
        where=f"source = 'notes' AND path = {sql_string('binary 00.md')}",
        values={"message": leaked},
    )
    reader = RaglineService(index)
    remote = Access(user="bob", sources=frozenset({"notes"}))
    notes = reader.status(remote).sources[0]
    shown = notes.model_dump_json()
    assert "binary 00.md" in shown  # the item is still named, by its path in the source
    assert notes_root not in shown and "/usr/lib" not in shown and "<path>" in shown
    local = next(s for s in reader.status(LOCAL).sources if s.name == "notes").model_dump_json()
    assert "/usr/lib/python3" in local


def test_open_caps_characters_and_says_where_the_rest_starts(index: RaglineConfig) -> None:
    service = RaglineService(index)
    first = service.open(LOCAL, source="notes", path="Long line.md", max_lines=1, start_line=3)
    assert first.truncated and len(first.text) == DEFAULT_OPEN_CHARS
    assert (first.next_line, first.next_char) == (3, DEFAULT_OPEN_CHARS)
    parts, answer = [first.text], first
    while answer.next_line is not None:
        answer = service.open(
            LOCAL,
            source="notes",
            path="Long line.md",
            start_line=answer.next_line,
            start_char=answer.next_char or 0,
            max_lines=1,
            max_chars=100_000,
        )
        assert len(answer.text) <= 100_000
        parts.append(answer.text)
    line = service.open(
        LOCAL, source="notes", path="Long line.md", start_line=3, max_lines=1, max_chars=400_000
    )
    assert not line.truncated and len(line.text) >= LONG_LINE_CHARS - 12
    assert "".join(parts) == line.text and len(parts) == 4
    # A whole note of normal lines is cut on a line boundary.
    fine = service.open(LOCAL, source="notes", path="Fine.md")
    assert not fine.truncated and fine.next_line is None


def test_neighbors_lists_are_capped_and_say_how_many_more(index: RaglineConfig) -> None:
    service = RaglineService(index)
    hub = service.neighbors(LOCAL, source="notes", path="Hub.md")
    assert len(hub.links) == 200 and hub.omitted == {"links": HUB_LINKS - 200}
    fine = service.neighbors(LOCAL, source="notes", path="Fine.md")
    assert len(fine.backlinks) == 200 and fine.omitted == {"backlinks": HUB_LINKS - 200}


def test_a_huge_title_is_cut_in_every_hit_and_answer(index: RaglineConfig) -> None:
    hits = SearchEngine(index).search("moraines", filters=SearchFilters(sources=("notes",))).hits
    [hit] = [h for h in hits if h.path == "Long title.md"]
    assert hit.title.startswith("word0 word1") and hit.title.endswith("…")
    assert len(hit.title) <= 300
    opened = RaglineService(index).open(LOCAL, source="notes", path="Long title.md")
    assert opened.title == hit.title
