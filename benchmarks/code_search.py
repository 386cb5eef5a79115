"""Code search on a real repository (issue 31): do "where is X" questions find the
defining file, and do the hits point at the definition's own lines?

    git clone https://github.com/psf/requests /tmp/requests
    git -C /tmp/requests checkout 1f6589ec3a1ee910f9a65cc3ceac60b26677bc0e
    python benchmarks/code_search.py --repo /tmp/requests [--commits 500] [--cosqa]

``--data-dir`` and ``--cosqa-work`` keep the two indexes for a later run (reused
when present); ``--render`` rewrites the doc section from the saved JSON.

The questions (benchmarks/data/requests_code_questions.json) were written by reading
the code at that commit: each names the defining file and the definition's lines
(decorators and overloads included), and every range is checked against the
checkout before anything runs (its ``def``/``class`` must lie inside it).

The repository is indexed once as a ``git`` source (HEAD's files, code chunked by
syntax, and its last ``--commits`` commits with their diffs); every setting is then
measured on the same index in the same run:

- **before**: ``[search.code]`` switched off (intent, tests below code, symbol lines),
  i.e. the ranking of the base revision; also with ``--language python``, the
  workaround the issue names;
- each change alone, and **after** (the defaults, all three on).

Metrics, over the top 3 hits of a hybrid search (k = 10):

- **hit@3**: the defining file is among the top 3 hits;
- **line precision**: for the best-ranked hit in the defining file within the top 3,
  the share of its reported lines that lie inside the answer's range (the best of
  the answer's ranges), ``|reported ∩ answer| / |reported|``; 0 for a question
  without such a hit, so it is averaged over all questions;
- **inside**: the share of questions whose reported lines lie wholly inside the
  answer's range;
- **code first**: the share of questions whose top hit is a code chunk (not a test,
  not a commit, not documentation);
- **history hit@3**: for the "when / why did … change" questions, the commit is
  among the top 3.

With ``--cosqa`` it re-measures CoSQA-as-git (benchmarks/git_source.py's quality
step) before and after, in the same run.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tomli_w

from benchmarks.report import save
from rag_serving.config import RaglineConfig, parse_config_file

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "benchmarks" / "data" / "requests_code_questions.json"
SOURCE = "requests"
# `[search.code]` settings, and `collapse` ([search] collapse: one hit per document).
OFF = {"intent": False, "tests_below": False, "symbol_lines": False, "collapse": False}
SETTINGS: dict[str, dict[str, Any]] = {
    "before": OFF,
    "intent only": {**OFF, "intent": True},
    "tests below only": {**OFF, "tests_below": True},
    "symbol lines only": {**OFF, "symbol_lines": True},
    "one hit per document only": {**OFF, "collapse": True},
    "after": {},
}


def check_checkout(repo: Path, data: dict[str, Any]) -> None:
    """Fail unless ``repo`` is at the pinned commit and every answer's range holds its
    definition's ``def``/``class`` line (and end)."""
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if head != data["commit"]:
        raise SystemExit(f"{repo} is at {head}; run `git -C {repo} checkout {data['commit']}`")
    trees: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for item in data["questions"]:
        path = item["path"]
        if path not in trees:
            trees[path] = definitions(ast.parse((repo / path).read_text()))
        for answer in item["answers"]:
            start, end = answer["lines"]
            spans = trees[path].get(answer["symbol"])
            if not spans or not all(start <= a and b <= end for a, b in spans):
                raise SystemExit(f"{path}: {answer['symbol']} is not inside L{start}-L{end}")


def definitions(tree: ast.AST) -> dict[str, list[tuple[int, int]]]:
    """Qualified name → (def line, end line) of each definition (several: overloads)."""
    found: dict[str, list[tuple[int, int]]] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = prefix + child.name
                found.setdefault(name, []).append((child.lineno, child.end_lineno or 0))
                if isinstance(child, ast.ClassDef):
                    walk(child, name + ".")

    walk(tree, "")
    return found


def write_config(path: Path, data_dir: Path, repo: Path, commits: int) -> Path:
    source = {"name": SOURCE, "kind": "git", "path": str(repo), "history_months": 0,
              "history_max_commits": commits}  # fmt: skip
    path.write_bytes(tomli_w.dumps({"data_dir": str(data_dir), "sources": [source]}).encode())
    return path


def build(config: RaglineConfig) -> dict[str, Any]:
    from rag_serving.index.store import IndexStore
    from ragline.indexing import index_sources

    started = time.perf_counter()
    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    store = IndexStore(config.data_dir)
    return {
        "index_s": round(time.perf_counter() - started, 1),
        "embedded": outcome.metadata["embeddings"]["embedded"],
        "commits": store.count("files", "starts_with(path, '.git/commits/')"),
        "documents": store.count("documents"),
    }


def with_code(config: RaglineConfig, settings: dict[str, Any]) -> RaglineConfig:
    search = config.search
    code = search.code.model_copy(update={k: v for k, v in settings.items() if k != "collapse"})
    update: dict[str, Any] = {"code": code, "collapse": settings.get("collapse", True)}
    return config.model_copy(update={"search": search.model_copy(update=update)})


def role(hit: Any) -> str:
    from rag_serving.search.code_ranking import is_test_path

    if hit.file_type == "commit":
        return "commit"
    if hit.language is None:
        return "other"
    return "test" if is_test_path(hit.path) else "code"


def precision(lines: tuple[int, int], answers: list[dict[str, Any]]) -> tuple[float, bool]:
    """The share of ``lines`` inside the best answer range, and whether all are."""
    a, b = lines
    best = 0.0
    for answer in answers:
        s, e = answer["lines"]
        overlap = max(0, min(b, e) - max(a, s) + 1)
        best = max(best, overlap / (b - a + 1))
    return best, best == 1.0


def measure(config: RaglineConfig, data: dict[str, Any], language: bool) -> dict[str, Any]:
    from rag_serving.index.filters import SearchFilters
    from rag_serving.search.engine import SearchEngine

    engine = SearchEngine(config)
    filters = SearchFilters(languages=("python",)) if language else None
    hits3 = inside = first_code = 0
    total_precision = 0.0
    widths: list[int] = []
    per_question = []
    for item in data["questions"]:
        result = engine.search(item["question"], k=10, filters=filters, mode="hybrid")
        top = result.hits[:3]
        match = next((h for h in top if h.path == item["path"]), None)
        p, whole = precision((match.line_start, match.line_end), item["answers"]) if match else (0.0, False)  # fmt: skip
        hits3 += match is not None
        total_precision += p
        inside += whole
        first_code += bool(result.hits) and role(result.hits[0]) == "code"
        if match is not None:
            widths.append(match.line_end - match.line_start + 1)
        per_question.append({
            "question": item["question"], "hit": match is not None, "precision": round(p, 3),
            "lines": [match.line_start, match.line_end] if match else None,
            "top": [f"{role(h)}:{h.path}:{h.line_start}-{h.line_end}" for h in top],
        })  # fmt: skip
    n = len(data["questions"])
    history_hits = 0
    for item in data.get("history", []) if not language else []:
        result = engine.search(item["question"], k=10, mode="hybrid")
        wanted = f".git/commits/{item['commit']}"
        history_hits += any(h.path == wanted for h in result.hits[:3])
    return {
        "hit@3": round(hits3 / n, 3),
        "line_precision": round(total_precision / n, 3),
        "inside": round(inside / n, 3),
        "code_first": round(first_code / n, 3),
        "median_lines": sorted(widths)[len(widths) // 2] if widths else None,
        "history_hit@3": None if language else round(history_hits / len(data["history"]), 3),
        "questions": per_question,
    }


def cosqa(work: Path) -> dict[str, Any]:
    """CoSQA-as-git nDCG@10 per mode, before ([search.code] off) and after."""
    from benchmarks.git_source import cosqa_repo
    from benchmarks.git_source import write_config as cosqa_config
    from benchmarks.report import SHARED_DATA
    from rag_serving.evaluation.beir import load_beir
    from rag_serving.search.engine import SearchEngine
    from ragline.eval_command import evaluate
    from ragline.indexing import index_sources

    if (work / "cosqa").exists():  # kept from an earlier run (--cosqa-work)
        from rag_serving.evaluation.beir import load_corpus

        repo = work / "cosqa"
        documents, _ = load_corpus(SHARED_DATA / "eval" / "cosqa" / "corpus.jsonl")
        path_to_id = {f"snippets/{doc.id}.py": doc.id for doc in documents}
    else:
        repo, path_to_id = cosqa_repo(work)
    config = parse_config_file(
        cosqa_config(work / "cosqa.toml", work / "data", repo, history=False)
    )
    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    dataset = load_beir(SHARED_DATA / "eval" / "cosqa", "dev")
    out: dict[str, Any] = {}
    for name, settings in (("before", OFF), ("after", {})):
        engine = SearchEngine(with_code(config, settings))
        scores = evaluate(
            engine, dataset, sorted(dataset.qrels), ["bm25", "vector", "hybrid"], 10, path_to_id
        )
        out[name] = {s.mode: round(s.ndcg, 4) for s in scores}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repo", type=Path, help="a checkout of psf/requests at the pinned commit")
    parser.add_argument("--commits", type=int, default=500, help="history: the last N commits")
    parser.add_argument("--data-dir", type=Path, help="keep (and reuse) the index here")
    parser.add_argument("--cosqa", action="store_true", help="also CoSQA-as-git before/after")
    parser.add_argument("--cosqa-work", type=Path, help="keep (and reuse) CoSQA's repo and index")
    parser.add_argument("--render", action="store_true", help="rewrite the doc from the JSON")
    args = parser.parse_args()
    command = "python benchmarks/code_search.py --repo /tmp/requests --cosqa"
    if args.render:
        saved = json.loads((ROOT / "benchmarks/results/code_search.json").read_text())
        save("code_search", saved, markdown(saved), saved["command"])
        return
    if args.repo is None:
        parser.error("--repo is required (a checkout of psf/requests; see the docstring)")
    data = json.loads(QUESTIONS.read_text())
    check_checkout(args.repo, data)
    work = Path(tempfile.mkdtemp(prefix="ragline-code-search-"))
    data_dir = args.data_dir or work / "data"
    try:
        config = parse_config_file(
            write_config(work / "requests.toml", data_dir, args.repo.resolve(), args.commits)
        )
        result: dict[str, Any] = {"index": build(config), "commit": data["commit"],
                                  "questions": len(data["questions"]),
                                  "history_questions": len(data["history"])}  # fmt: skip
        print(json.dumps(result), flush=True)
        runs: dict[str, Any] = {}
        runs["before, --language python"] = measure(with_code(config, OFF), data, True)
        for name, settings in SETTINGS.items():
            runs[name] = measure(with_code(config, settings), data, False)
            print(name, {k: v for k, v in runs[name].items() if k != "questions"}, flush=True)
        for name in runs:  # per question: kept for before and after only
            if name not in ("before", "after"):
                runs[name].pop("questions")
        result["runs"] = runs
        if args.cosqa:
            result["cosqa"] = cosqa(args.cosqa_work or work)
            print(json.dumps(result["cosqa"]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save("code_search", result, markdown(result), command)


def markdown(data: dict[str, Any]) -> str:
    index = data["index"]
    lines = [
        f"psf/requests at {data['commit'][:10]} as one `git` source (HEAD's files and its "
        f"last {index['commits']} commits: {index['documents']} documents, "
        + (f"indexed in {index['index_s']} s" if index["embedded"] else "an index built before")
        + f"); {data['questions']} code questions and "
        f"{data['history_questions']} history questions "
        "(benchmarks/data/requests_code_questions.json), hybrid search, k = 10. Every row "
        "is the same index in the same run; *before* is `[search.code]` and "
        "`[search] collapse` switched off (the base revision's ranking; the link prior, on in "
        "every row, gives the same numbers here as without it). The "
        "repository: `git clone "
        "https://github.com/psf/requests /tmp/requests && git -C /tmp/requests checkout "
        f"{data['commit']}`.",
        "",
        "| setting | hit@3 | line precision | inside the range | median lines shown "
        "| top hit is code | history hit@3 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, run in data["runs"].items():
        history = "–" if run["history_hit@3"] is None else run["history_hit@3"]
        lines.append(
            f"| {name} | {run['hit@3']} | {run['line_precision']} | {run['inside']} "
            f"| {run['median_lines']} | {run['code_first']} | {history} |"
        )
    lines += [
        "",
        "hit@3: the defining file among the top 3 hits. Line precision: for the best-ranked "
        "hit in that file within the top 3, the share of its reported lines inside the "
        "answer's range (0 without such a hit; averaged over all questions). Inside: its "
        "lines lie wholly in the range. History hit@3: the commit among the top 3 for the "
        "“when / why did … change” questions.",
    ]
    if "cosqa" in data:
        before, after = data["cosqa"]["before"], data["cosqa"]["after"]
        lines += [
            "",
            "CoSQA dev as a `git` source (benchmarks/git_source.py's corpus), nDCG@10 in the "
            "same run:",
            "",
            "| setting | bm25 | vector | hybrid | hybrid − vector |",
            "|---|---|---|---|---|",
        ]
        for name, row in (("before", before), ("after", after)):
            lines.append(
                f"| {name} | {row['bm25']} | {row['vector']} | {row['hybrid']} "
                f"| {row['hybrid'] - row['vector']:+.4f} |"
            )
        lines += [
            "",
            "Its repository is code files only, no history, no tests: every candidate moves "
            "alike. The two changes tried to raise hybrid there lowered it "
            "(docs/decisions.md, “Code answers before history”).",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
