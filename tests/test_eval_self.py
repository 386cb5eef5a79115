"""``ragline eval --self``: known-item queries built from a real index (the sample
vault, and real Chinese notes of the Obsidian hub), a stored held-out set, history."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.evaluation.self_eval import (
    HISTORY_FILE,
    QUERIES_FILE,
    QUERY_TYPES,
    Corpus,
    Vocabulary,
    build_queries,
    distinctive_fragment,
    link_context,
    link_queries,
    rank_of,
    read_corpus,
    self_evaluate,
    terms,
    tokens,
)
from rag_serving.search import SearchEngine
from ragline.cli import cli
from tests.conftest import CHINESE_NOTES, HUB_PLUGINS, build_index, write_config

# A note of our own that links the hub's Chinese notes, in Chinese.
CHINESE_INDEX = """# 插件目录

## 农历与节气

想要更符合中国习惯的日历，可以看看 [[dust-calendar]] 这个插件，它能显示农历和节气。

## 背单词

学英语时用 [[openwords]] 管理单词本，每天复习一遍。
"""
# Measured on the sample vault (22 queries): hybrid MRR@10 0.94 / 0.95 (held out /
# tuning), hit@10 1.0; bm25 0.86 / 0.95; vector 0.93 / 0.90.
HYBRID_MRR_FLOOR = 0.8


def _copy_index(index: RaglineConfig, vault: Path, root: Path) -> RaglineConfig:
    """A copy of ``index`` and of the vault it reads, so a test may change both."""
    shutil.copytree(vault, root / "vault")
    shutil.copytree(index.data_dir, root / "data")
    text = Path(index.config_path or "").read_text()
    text = text.replace(str(index.data_dir), str(root / "data")).replace(
        str(vault), str(root / "vault")
    )
    (root / "ragline.toml").write_text(text)
    return parse_config_file(root / "ragline.toml")


@pytest.fixture()
def vault_copy(tmp_path: Path, sample_index: RaglineConfig, sample_vault: Path) -> RaglineConfig:
    return _copy_index(sample_index, sample_vault, tmp_path)


def run_cli(config: RaglineConfig, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["--config", str(config.config_path), "eval", "--self", *args], catch_exceptions=False
    )


def _by_type(queries: list, type_: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for query in queries:
        if query.type == type_:
            found.setdefault(query.path, []).append(query)
    return found


# ---- building the queries ---------------------------------------------------------


def test_queries_of_each_type_point_at_their_targets(sample_index: RaglineConfig) -> None:
    corpus = read_corpus(sample_index, ["notes", "journal"])
    built = build_queries(corpus, ["notes", "journal"])
    queries = built.queries
    paths = {d["doc_id"]: d["path"] for d in corpus.documents}

    links = _by_type(queries, "link")
    # [[Sourdough starter]] in Budget, ![[Compost#Ratio]] in Tomatoes, and
    # [[Budget#Groceries|the grocery budget]] in Sourdough starter.
    assert set(links) == {"Sourdough starter.md", "gardening/Compost.md", "finance/Budget.md"}
    (to_budget,) = links["finance/Budget.md"]
    assert paths[to_budget.origin] == "Sourdough starter.md"
    assert "grocery" not in to_budget.query  # the link's own text is removed
    assert to_budget.query.endswith("twice before baking See")
    (to_starter,) = links["Sourdough starter.md"]
    assert paths[to_starter.origin] == "finance/Budget.md"
    assert "400 euros flour for" in to_starter.query and "Sourdough" not in to_starter.query

    headings = {(q.path, q.heading) for q in queries if q.type == "heading"}
    assert {
        ("Kubernetes.md", "Rollback"),  # a heading inside a chunk that starts with another
        ("finance/Budget.md", "Groceries"),
        ("Sourdough starter.md", "Feeding"),
        ("Sourdough starter.md", "Storage"),
        ("2023-01-15.md", "Hiking"),
    } <= headings
    assert ("gardening/Compost.md", "Compost") not in headings  # the note's own title

    fragments = _by_type(queries, "fragment")
    assert len(fragments) == len(corpus.documents) == 8  # one per note
    texts = {c["doc_id"]: c["text"] for c in corpus.chunks}
    for path, (fragment,) in fragments.items():
        words = [t.text for t in tokens(texts[fragment.doc_id])]
        query_words = fragment.query.split()
        assert 6 <= len(query_words) <= 10, fragment.query
        assert " ".join(query_words) in " ".join(words), (path, fragment.query)
    # A distinctive run: "glacier", "Alps", "hut" are in no other note.
    assert "glacier" in fragments["2023-01-15.md"][0].query

    splits = {q.split for q in queries}
    assert splits == {"heldout", "tuning"}
    again = build_queries(read_corpus(sample_index, ["notes", "journal"]), ["notes", "journal"])
    assert [(q.id, q.split) for q in again.queries] == [(q.id, q.split) for q in queries]


def test_words_and_fragments_in_scripts_without_spaces() -> None:
    assert [t.text for t in tokens("🗂️ Weekly notes")] == ["Weekly", "notes"]
    assert [t.text for t in tokens("महाभारत की कथा")] == ["महाभारत", "की", "कथा"]
    assert [t.text for t in tokens("السَّرَطَان مرض")] == ["السَّرَطَان", "مرض"]
    assert terms("机器学习 Rust") == {"机器", "器学", "学习", "rust"}
    body = "想要更符合中国习惯的日历，可以看看 [[dust-calendar|日历插件]] 这个插件，它能显示农历和节气。"
    start = body.index("[[")
    context = link_context(body, start, body.index("]]") + 2)
    assert context == "惯的日历可以看看 这个插件它能显示"  # eight characters a side
    assert "日历插件" not in (context or "")


def test_a_link_context_stays_in_its_list_item() -> None:
    body = (
        "- [[buttons|Buttons]]: Create buttons that run commands\n"
        "- [[customjs|CustomJS]]: load and reuse custom JS inside your vault\n"
        "- [[macros]]: group several commands into one macro\n"
    )
    start = body.index("[[customjs")
    context = link_context(body, start, body.index("]]", start) + 2)
    assert context == "load and reuse custom JS inside your vault"


def test_the_same_words_around_links_to_different_notes_are_no_query() -> None:
    def note(name: str, body: str, links: list[str]) -> dict:
        targets = [{"target": t, "line": 1} for t in links]
        return {
            "doc_id": name,
            "source": "s",
            "path": f"{name}.md",
            "title": name,
            "aliases": [],
            "links_json": json.dumps(targets),
            "body": body,
        }

    template = "Plugin ID: {0}\nDeveloped by: [[{1}]]\nMobile compatible: yes\n"
    documents = [
        note("a", template.format("x", "alice"), ["alice"]),
        note("b", template.format("x", "bob"), ["bob"]),
        note("c", "Bread needs a strong flour, as [[alice]] explains in her notes.\n", ["alice"]),
        note("alice", "Alice", []),
        note("bob", "Bob", []),
    ]  # fmt: skip
    queries = link_queries(Corpus(documents, [], {}))
    assert [(q.query, q.path, q.origin) for q in queries] == [
        ("a strong flour as explains in her notes", "alice.md", "c")  # four words a side
    ]


# ---- running, storing, comparing ------------------------------------------------------


def test_cli_json_stored_set_reused_and_delta_recorded(vault_copy: RaglineConfig) -> None:
    first = run_cli(vault_copy, "--json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    query_set = report["query_set"]
    assert query_set["built_now"] is True and query_set["dropped"] == 0
    assert query_set["heldout"] + query_set["tuning"] == query_set["queries"] == 22
    assert set(query_set["by_type"]) == set(QUERY_TYPES)
    assert [m["mode"] for m in report["modes"]] == ["hybrid", "bm25", "vector"]
    for mode in report["modes"]:
        assert mode["delta"] is None
        for split in ("heldout", "tuning"):
            assert 0.0 <= mode[split]["mrr@10"] <= mode[split]["hit@10"] <= 1.0
            assert set(mode[split]["by_type"]) <= set(QUERY_TYPES)
    hybrid = report["modes"][0]
    assert hybrid["heldout"]["mrr@10"] >= HYBRID_MRR_FLOOR
    assert hybrid["tuning"]["mrr@10"] >= HYBRID_MRR_FLOOR
    assert hybrid["heldout"]["hit@10"] >= 0.9

    stored_path = vault_copy.data_dir / "eval" / QUERIES_FILE
    stored = json.loads(stored_path.read_text())
    assert stored["sources"] == ["journal", "notes"] and len(stored["queries"]) == 22

    second = json.loads(run_cli(vault_copy, "--json").stdout)
    assert second["query_set"]["built_now"] is False
    assert json.loads(stored_path.read_text())["queries"] == stored["queries"]  # reused as is
    assert second["previous"] == {"at": second["previous"]["at"], "settings_changed": []}
    for mode in second["modes"]:
        # Same index, same settings, same queries: nothing moved.
        assert mode["delta"]["heldout"] == {"mrr@10": 0.0, "hit@10": 0.0}

    # A fusion setting changed: the next run names it beside the change.
    config_path = Path(vault_copy.config_path or "")
    config_path.write_text(config_path.read_text() + '\n[search]\nfusion = "rrf"\n')
    third = run_cli(parse_config_file(config_path), "--json", "--modes", "hybrid")
    changed = json.loads(third.stdout)["previous"]["settings_changed"]
    assert "search.fusion: zscore → rrf" in changed
    history = (vault_copy.data_dir / "eval" / HISTORY_FILE).read_text().splitlines()
    assert len(history) == 3
    assert json.loads(history[-1])["settings"]["search"]["fusion"] == "rrf"

    # Rebuilt from the same index, the set comes out the same and still compares.
    rebuilt = run_cli(parse_config_file(config_path), "--json", "--modes", "hybrid",
                      "--rebuild-queries")  # fmt: skip
    fourth = json.loads(rebuilt.stdout)
    assert fourth["query_set"]["built_now"] is True
    assert json.loads(stored_path.read_text())["queries"] == stored["queries"]
    assert fourth["previous"]["settings_changed"] == []
    assert fourth["modes"][0]["delta"]["heldout"] == {"mrr@10": 0.0, "hit@10": 0.0}


def test_table_output_and_limit(vault_copy: RaglineConfig) -> None:
    result = run_cli(vault_copy, "notes", "--modes", "hybrid,bm25", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert "held-out set" in result.stdout and "tuning set" in result.stdout
    assert "MRR@10" in result.stdout and "Δ" in result.stdout
    assert "hybrid" in result.stdout and "bm25" in result.stdout
    assert "vector" not in result.stdout
    assert "6 queries (2 link, 2 heading, 2 fragment) from notes" in result.stderr
    again = run_cli(vault_copy, "notes", "--modes", "hybrid,bm25", "--limit", "2")
    assert "±0" in again.stdout and "no setting changed" in again.stderr


def test_a_deleted_target_is_dropped(vault_copy: RaglineConfig) -> None:
    before = self_evaluate(vault_copy, modes=["bm25"])
    targets = {q.path for q in before.evaluated}
    assert "Kubernetes.md" in targets
    gone = sum(q.path == "Kubernetes.md" for q in before.evaluated)
    (Path(vault_copy.config_path or "").parent / "vault" / "notes" / "Kubernetes.md").unlink()
    build_index(Path(vault_copy.config_path or ""))

    after = self_evaluate(vault_copy, modes=["bm25"])
    assert after.built is False
    assert after.dropped == gone >= 2
    assert "Kubernetes.md" not in {q.path for q in after.evaluated}
    assert len(after.evaluated) == len(before.evaluated) - gone

    rebuilt = self_evaluate(vault_copy, modes=["bm25"], rebuild=True)
    assert rebuilt.built is True and rebuilt.dropped == 0
    assert "Kubernetes.md" not in {q.path for q in rebuilt.evaluated}


def test_rank_counts_documents_and_leaves_out_the_linking_note(
    sample_index: RaglineConfig,
) -> None:
    corpus = read_corpus(sample_index, ["notes", "journal"])
    queries = build_queries(corpus, ["notes", "journal"]).queries
    (link,) = [q for q in queries if q.type == "link" and q.path == "Sourdough starter.md"]
    hits = SearchEngine(sample_index).search(link.query, k=50, mode="bm25").hits
    # The linking note (Budget) holds the query's words and comes first; it is left out.
    assert hits[0].doc_id == link.origin
    docs = list(dict.fromkeys(h.doc_id for h in hits if h.doc_id != link.origin))
    assert rank_of(link, hits) == docs.index(link.doc_id) + 1
    assert rank_of(link, [h for h in hits if h.doc_id != link.doc_id]) is None


# ---- errors -------------------------------------------------------------------------------


def test_clear_errors(vault_copy: RaglineConfig, tmp_path: Path) -> None:
    result = run_cli(vault_copy, "nope")
    assert result.exit_code == 2 and "unknown source 'nope'" in result.stderr
    assert result.stderr.count("\n") == 1

    empty = parse_config_file(
        write_config(tmp_path / "empty", [{"name": "notes", "kind": "markdown",
                                           "path": str(tmp_path)}])
    )  # fmt: skip
    result = run_cli(empty)
    assert result.exit_code == 1
    assert "no index at" in result.stderr and "ragline index" in result.stderr

    result = CliRunner().invoke(cli, ["--config", str(vault_copy.config_path), "eval"])
    assert result.exit_code == 2 and "--self to evaluate your index" in result.output

    run_cli(vault_copy, "notes", "--modes", "bm25")  # stores a set built from "notes" only
    result = run_cli(vault_copy, "journal", "--modes", "bm25")
    assert result.exit_code == 1
    assert "does not cover source 'journal'" in result.stderr
    assert "--rebuild-queries" in result.stderr


# ---- a corpus in Chinese ------------------------------------------------------------------


@pytest.fixture(scope="module")
def chinese_index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    if not HUB_PLUGINS.is_dir():
        pytest.fail(f"{HUB_PLUGINS} is missing: run with ../shared/data or -m 'not shared_data'")
    root = tmp_path_factory.mktemp("self-eval-chinese")
    vault = root / "vault"
    vault.mkdir()
    for name in CHINESE_NOTES:
        shutil.copy(HUB_PLUGINS / name, vault / name)
    (vault / "插件目录.md").write_text(CHINESE_INDEX, encoding="utf-8")
    return build_index(
        write_config(root, [{"name": "hub", "kind": "markdown", "path": str(vault)}])
    )


@pytest.mark.shared_data
def test_chinese_notes_give_chinese_queries(chinese_index: RaglineConfig) -> None:
    corpus = read_corpus(chinese_index, ["hub"])
    queries = build_queries(corpus, ["hub"]).queries
    links = {q.path: q.query for q in queries if q.type == "link"}
    assert links["dust-calendar.md"] == "惯的日历可以看看 这个插件它能显示"
    assert "openwords.md" in links
    headings = {q.query for q in queries if q.type == "heading"}
    assert {"农历与节气", "背单词"} <= headings

    vocabulary = Vocabulary(corpus)
    chunk = next(c for c in corpus.chunks if "博客园" in c["text"])
    found = distinctive_fragment(chunk["text"], vocabulary, chunk["doc_id"])
    assert found is not None and found[1] == "将笔记同步到博客园"  # the note's one sentence
    fragments = {q.path: q.query for q in queries if q.type == "fragment"}
    # Measured: three of the five are Chinese only (two hold a Latin word: "openwords", "md").
    chinese = [f for f in fragments.values() if all(t.char for t in tokens(f))]
    assert len(chinese) >= 3, fragments
    for fragment in chinese:
        assert 6 <= len(fragment) <= 12, fragment

    report = self_evaluate(chinese_index, modes=["hybrid", "bm25"])
    for result in report.results:
        for scores in result.splits.values():
            assert 0.0 <= scores.mrr <= scores.hit <= 1.0
    hybrid = report.results[0]
    # Every Chinese heading and fragment is found in the top ten, in either half.
    for split in ("heldout", "tuning"):
        for type_ in ("heading", "fragment"):
            if type_ in hybrid.by_type[split]:
                assert hybrid.by_type[split][type_].hit == 1.0, (split, type_)
