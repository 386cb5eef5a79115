"""``ragline eval`` end to end on a tiny BEIR folder written here, through the real
stack (Dagster in-process, LanceDB, Tantivy, the bundled MiniLM model)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rag_serving.evaluation.beir import DatasetError, load_beir, load_qrels, resolve_split
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from ragline.cli import cli
from ragline.eval_command import note_name, render_note

DOCUMENTS = {
    "bread": ("Sourdough bread", "A sourdough starter is a fermented mix of flour and water "
              "that leavens bread. Feed the starter daily; fermentation gives the sour taste."),
    "yeast": ("Commercial yeast", "Instant yeast raises dough within an hour. Bakers who keep "
              "no sourdough starter use it for quick loaves."),
    "volcano": ("Volcanic eruptions", "Magma rises through the crust and erupts as lava, ash "
                "and gas. Stratovolcanoes erupt explosively."),
    "chess": ("Chess openings", "The queen's gambit offers a pawn for central control. The "
              "Sicilian defence answers e4 with c5."),
    "bees": ("Beekeeping", "A hive holds one queen bee, thousands of workers and combs of "
             "honey. Beekeepers wear veils and use smoke."),
    "tides": ("Ocean tides", "The gravity of the moon and the sun raises two bulges of water; "
              "the ocean tides rise and fall twice a day."),
    "leaves": ("Photosynthesis", "Chlorophyll in leaves captures sunlight and turns carbon "
               "dioxide and water into sugar and oxygen."),
    "git": ("Git branches", "Create a branch, commit, then merge or rebase it onto main. A "
            "rebase rewrites the commits of the branch."),
    "run": ("Marathon training", "Long slow runs, tempo runs and a taper prepare a runner for "
            "the 42 kilometre marathon."),
    "paper": ("Origami", "Origami folds a single square sheet of paper into cranes, boxes and "
              "flowers without cuts or glue."),
    "space": ("Black holes", "A black hole bends spacetime so strongly that not even light "
              "escapes past the event horizon."),
    "coffee": ("Coffee roasting", "Roasting turns green coffee beans brown; first crack marks "
               "a light roast, second crack a dark roast."),
    "wool": ("Knitting", "Knitting loops wool yarn with two needles into rows of knit and purl "
             "stitches."),
    "ice": ("Glaciers", "Glaciers are rivers of ice that carve valleys and leave moraines when "
            "they melt."),
    "empty": ("", ""),  # an empty document, as Cranfield has two
}  # fmt: skip

QUERIES = {
    "q1": "sourdough starter flour fermentation",
    "q2": "lava and magma in a volcanic eruption",
    "q3": "queen's gambit chess opening",
    "q4": "git rebase and merge branches",
    "q5": "roasting coffee beans",
    "q6": "moon gravity ocean tides",
    "q7": "knitting needles",  # not judged in the split: skipped
}

QRELS = [
    ("q1", "bread", 2), ("q1", "yeast", 1),
    ("q2", "volcano", 2),
    ("q3", "chess", 2), ("q3", "bees", 0),
    ("q4", "git", 2),
    ("q5", "coffee", 2),
    ("q6", "tides", 2), ("q6", "space", 1),
]  # fmt: skip

METRIC_KEYS = {"mode", "ndcg@10", "recall@100", "mrr@10", "queries"}


def write_beir(root: Path, documents: dict[str, tuple[str, str]] = DOCUMENTS) -> Path:
    """A BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/test.tsv."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc_id, (title, text) in documents.items():
            out.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    with (root / "queries.jsonl").open("w", encoding="utf-8") as out:
        for query_id, text in QUERIES.items():
            out.write(json.dumps({"_id": query_id, "text": text, "metadata": {}}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in QRELS]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def run_eval(*args: str) -> Result:
    return CliRunner().invoke(cli, ["eval", *map(str, args)], catch_exceptions=False)


def chunks_version(data_dir: Path) -> int:
    index_dir = data_dir / "index"
    generation = read_manifest(IndexLayout(index_dir).manifest_path).active
    assert generation is not None
    return IndexStore(index_dir).chunks(generation.table).version


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_beir(tmp_path_factory.mktemp("beir") / "tiny")


@pytest.fixture(scope="module")
def first_run(
    dataset: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Result, list[dict[str, Any]]]:
    data_dir = tmp_path_factory.mktemp("eval") / "work"
    result = run_eval(dataset, "--mode", "all", "--json", "--data-dir", data_dir)
    assert result.exit_code == 0, result.output
    return data_dir, result, json.loads(result.stdout)


def test_all_modes_report_standard_metrics(first_run: tuple[Path, Result, Any]) -> None:
    _, result, rows = first_run
    assert [row["mode"] for row in rows] == ["hybrid", "bm25", "vector"]
    for row in rows:
        assert set(row) == METRIC_KEYS
        assert row["queries"] == 6  # q7 has no judgements in the split
        for key in ("ndcg@10", "recall@100", "mrr@10"):
            assert 0.0 <= row[key] <= 1.0
    assert "6 queries evaluated, 1 skipped" in result.stderr
    assert "indexed 15 documents (1 skipped as empty)" in result.stderr


def test_easy_keyword_queries_score_high(first_run: tuple[Path, Result, Any]) -> None:
    rows = {row["mode"]: row for row in first_run[2]}
    assert rows["bm25"]["ndcg@10"] >= 0.8
    assert rows["bm25"]["mrr@10"] >= 0.8
    # vector search ranks every one of the 14 indexed documents; BM25 only those
    # sharing a word with the query (q6's "space" document shares none)
    assert rows["vector"]["recall@100"] == 1.0
    assert rows["bm25"]["recall@100"] == pytest.approx(11 / 12, abs=1e-6)
    assert rows["hybrid"]["ndcg@10"] >= 0.8


def test_corpus_is_written_as_markdown_notes(first_run: tuple[Path, Result, Any]) -> None:
    data_dir = first_run[0]
    note = data_dir / "corpus" / note_name("bread")
    assert note.read_text(encoding="utf-8").startswith(
        '---\ntitle: "Sourdough bread"\n---\n# Sourdough bread\n\nA sourdough starter'
    )
    assert (data_dir / "corpus" / note_name("empty")).read_bytes() == b""
    state = json.loads((data_dir / "eval-state.json").read_text(encoding="utf-8"))
    assert state["notes"][note_name("git")] == "git" and len(state["notes"]) == 15


def test_second_run_reuses_the_index(dataset: Path, first_run: tuple[Path, Result, Any]) -> None:
    data_dir = first_run[0]
    before = chunks_version(data_dir)
    result = run_eval(dataset, "--mode", "bm25", "--json", "--data-dir", data_dir,
                      "--limit-queries", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "reused index" in result.stderr
    assert chunks_version(data_dir) == before  # nothing was written, so nothing re-embedded
    (row,) = json.loads(result.stdout)
    assert row["mode"] == "bm25" and row["queries"] == 2


def test_changed_corpus_is_indexed_again(
    first_run: tuple[Path, Result, Any], tmp_path: Path
) -> None:
    data_dir = tmp_path / "work"
    shutil.copytree(first_run[0], data_dir)
    changed = dict(DOCUMENTS, ice=("Glaciers", "Glaciers carve fjords."))
    result = run_eval(write_beir(tmp_path / "changed", changed), "--mode", "bm25",
                      "--data-dir", data_dir, "--limit-queries", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "reused index" not in result.stderr and "indexed 15 documents" in result.stderr
    assert (data_dir / "corpus" / note_name("ice")).read_text().endswith("carve fjords.\n")
    assert "nDCG@10" in result.stdout and "bm25" in result.stdout  # the human table


def test_render_note_keeps_text_verbatim() -> None:
    from rag_serving.evaluation.beir import BeirDocument

    assert render_note(BeirDocument("1", "A  title\n", "Body.")) == (
        '---\ntitle: "A title"\n---\n# A title\n\nBody.\n'
    )
    from rag_sources.formats.markdown import parse_markdown

    quoted = render_note(BeirDocument("4", 'He said "yes": a: b', "x"))
    assert parse_markdown(quoted.encode(), "n.md").title == 'He said "yes": a: b'
    assert render_note(BeirDocument("2", "", "No title.\n")) == "No title.\n"
    assert render_note(BeirDocument("3", "", "---\nnot: yaml")) == "\n---\nnot: yaml\n"
    assert note_name("a/b") != note_name("a_b") and note_name("x").endswith(".md")


# ---- malformed input: exit code 2 with the file and line -------------------------


def _broken(tmp_path: Path, path: str, content: str) -> Path:
    root = write_beir(tmp_path / "broken")
    (root / path).write_text(content, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("path", "content", "message"),
    [
        ("corpus.jsonl", '{"_id": "a", "text": "x"}\n\n{"_id": "b", "text": \n',
         "corpus.jsonl:3: not valid JSON"),
        ("corpus.jsonl", '{"_id": "a", "text": "x"}\n{"_id": "b", "title": "t"}\n',
         'corpus.jsonl:2: "text" is missing'),
        ("corpus.jsonl", '{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n',
         "corpus.jsonl:2: duplicate _id 'a' (first on line 1)"),
        ("corpus.jsonl", '["not", "an", "object"]\n', "corpus.jsonl:1: expected a JSON object"),
        ("queries.jsonl", '{"text": "no id"}\n', 'queries.jsonl:1: missing or invalid "_id"'),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\tbread\t1\nq2 volcano 1\n",
         "test.tsv:3: expected 3 tab-separated fields"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\tbread\thigh\n",
         "test.tsv:2: score 'high' is not an integer"),
    ],
)  # fmt: skip
def test_malformed_input_names_file_and_line(
    tmp_path: Path, path: str, content: str, message: str
) -> None:
    result = run_eval(_broken(tmp_path, path, content), "--data-dir", tmp_path / "work")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert not (tmp_path / "work").exists()  # nothing is indexed before the data is valid


def test_missing_corpus_and_wrong_split(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "set")
    result = run_eval(root, "--split", "dev")
    assert result.exit_code == 2
    assert "no such split 'dev' (available: test)" in result.stderr
    (root / "corpus.jsonl").unlink()
    result = run_eval(root)
    assert result.exit_code == 2 and "corpus.jsonl: file not found" in result.stderr


def test_foreign_data_dir_is_refused(dataset: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("mine", encoding="utf-8")
    result = run_eval(dataset, "--data-dir", tmp_path)
    assert result.exit_code == 2 and "not made by `ragline eval`" in result.output
    assert (tmp_path / "notes.md").read_text(encoding="utf-8") == "mine"


# ---- the loader on its own ------------------------------------------------------


def test_split_resolution(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "set")
    assert resolve_split(root, None) == "test"
    (root / "qrels" / "test.tsv").rename(root / "qrels" / "train.tsv")
    assert resolve_split(root, None) == "train"  # the only split
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"available: dev, train"):
        resolve_split(root, None)


def test_loader_reads_qrels_with_or_without_header(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text("q1\td1\t2\r\nq1\td2\t0\n\nq2\td1\t1\n", encoding="utf-8")
    assert load_qrels(path) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d1": 1}}
    dataset = load_beir(write_beir(tmp_path / "set"))
    assert dataset.split == "test" and len(dataset.corpus) == 15
    assert dataset.judged_queries() == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert dataset.unjudged_queries() == ["q7"]
    assert dataset.qrels["q1"] == {"bread": 2, "yeast": 1}
