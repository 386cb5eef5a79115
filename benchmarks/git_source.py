"""`git` sources: code-search quality on CoSQA, indexing speed, no-change sensor tick.

    python benchmarks/git_source.py [--skip-quality] [--commits 1500]

1. **Quality.** CoSQA's dev corpus (6,267 Python functions) is committed as one
   repository (``snippets/<id>.py``), indexed as a ``git`` source (code chunked by
   syntax) and evaluated with ``ragline eval``'s scorer: nDCG@10 for bm25, vector and
   hybrid, in the same run, against the anchors measured on this machine (Tantivy
   BM25 0.383, MiniLM dense 0.603). Hybrid must beat dense alone.
2. **Speed.** This project's own repository and a generated one of ``--commits``
   commits are indexed from scratch: files/s, commits/s, and the embedder's share of
   the wall time; the baseline is reading the same blobs and commits (with diffs)
   through pygit2 alone, in the same run.
3. **Sensor tick.** The ``source_changes`` sensor with nothing changed on the
   generated repository, against the bare lookup of the ref's commit id.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tomli_w

from benchmarks.report import SHARED_DATA, save
from benchmarks.timing import median_seconds, median_sensor_tick, timed_index
from rag_serving.config import parse_config_file
from ragline.indexing import index_sources
from tests.git_repos import ALICE, commit_files, git, init_repo, make_many_commits

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = {"bm25": 0.383, "vector": 0.603}
SOURCE = "code"


def write_config(path: Path, data_dir: Path, repo: Path, **extra: object) -> Path:
    source = {"name": SOURCE, "kind": "git", "path": str(repo), "history_months": 0, **extra}
    path.write_bytes(tomli_w.dumps({"data_dir": str(data_dir), "sources": [source]}).encode())
    return path


# ---- 1. quality ---------------------------------------------------------------


def cosqa_repo(work: Path) -> tuple[Path, dict[str, str]]:
    """The CoSQA corpus as one commit; returns the repository and path → corpus id."""
    from rag_serving.evaluation.beir import load_corpus

    documents, _ = load_corpus(SHARED_DATA / "eval" / "cosqa" / "corpus.jsonl")
    repo = init_repo(work / "cosqa")
    files: dict[str, str] = {}
    path_to_id: dict[str, str] = {}
    for doc in documents:
        path = f"snippets/{doc.id}.py"
        files[path] = doc.text if doc.text.endswith("\n") else doc.text + "\n"
        path_to_id[path] = doc.id
    commit_files(repo, "CoSQA corpus", files, ALICE, "2024-01-01T00:00:00+00:00")
    return repo, path_to_id


def quality(work: Path) -> dict[str, object]:
    from rag_serving.evaluation.beir import load_beir
    from rag_serving.search.engine import SearchEngine
    from ragline.eval_command import evaluate

    repo, path_to_id = cosqa_repo(work)
    config = parse_config_file(
        write_config(work / "cosqa.toml", work / "cosqa-data", repo, history=False)
    )
    started = time.perf_counter()
    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    index_s = time.perf_counter() - started
    dataset = load_beir(SHARED_DATA / "eval" / "cosqa", "dev")
    engine = SearchEngine(config)
    scores = evaluate(
        engine, dataset, sorted(dataset.qrels), ["bm25", "vector", "hybrid"], 10, path_to_id
    )
    ndcg = {s.mode: round(s.ndcg, 3) for s in scores}
    chunks = engine.store.count(engine.generation.table)
    return {"ndcg@10": ndcg, "queries": scores[0].queries, "files": len(path_to_id),
            "chunks": chunks, "index_s": round(index_s, 1)}  # fmt: skip


# ---- 2. speed -------------------------------------------------------------------


def bare_read(repo_path: Path, history: bool) -> tuple[float, int, int]:
    """Seconds to read every blob of HEAD's tree and every commit with its diff
    through pygit2 alone: the reading a run cannot avoid."""
    from rag_sources.kinds.git.repository import open_repository

    started = time.perf_counter()
    repo = open_repository(repo_path)
    head = repo.resolve(None)
    blobs = commits = 0
    for entry in repo.tree_entries(head):
        if entry.type == "blob":
            repo.read_blob(entry.blob_id)
            blobs += 1
    if history:
        for sha, _ in repo.commit_ids(head):
            repo.commit(sha)
            commits += 1
    return time.perf_counter() - started, blobs, commits


def speed(name: str, repo: Path, work: Path) -> dict[str, object]:
    config = parse_config_file(write_config(work / f"{name}.toml", work / f"{name}-data", repo))
    run = timed_index(config)
    outcome, wall = run.outcome, run.wall_s
    from rag_serving.index.store import IndexStore

    store = IndexStore(config.data_dir)
    commits = store.count("files", "starts_with(path, '.git/commits/')")
    files = store.count("files") - commits
    indexed = store.count("documents", "file_type != 'commit'")
    bare_s, _, _ = bare_read(repo, history=True)
    started = time.perf_counter()
    [again] = index_sources(config, [], full=False)
    unchanged_s = time.perf_counter() - started
    return {
        "repository": name,
        "files": files,
        "files_indexed": indexed,
        "commits": commits,
        "chunks": outcome.metadata["embeddings"].get("new", 0),
        "wall_s": round(wall, 1),
        "files_per_s": round(files / wall, 1),
        "commits_per_s": round(commits / wall, 1),
        "embedder_s": round(run.embedder_s, 1),
        "embedder_share_of_wall": run.embedder_share,
        "bare_read_s": round(bare_s, 2),
        "wall_vs_bare_read": round(wall / bare_s, 1),
        "no_change_run_s": round(unchanged_s, 1),
        "no_change_embedded": again.metadata["embeddings"]["embedded"],
    }


def own_repository(work: Path) -> Path:
    """A clone of this project's repository (its committed state)."""
    target = work / "ragline"
    git(work, "clone", "-q", "--no-local", str(ROOT), str(target))
    return target


# ---- 3. sensor tick ------------------------------------------------------------


def sensor_tick(repo: Path, work: Path) -> dict[str, float]:
    from rag_sources.kinds.git.repository import open_repository

    config_path = write_config(work / "tick.toml", work / "tick-data", repo)
    bare = median_seconds(lambda: open_repository(repo).resolve(None))
    tick = median_sensor_tick(config_path, SOURCE)
    return {"sensor_tick_no_change_s": round(tick, 4), "bare_ref_lookup_s": round(bare, 4),
            "tick_vs_bare_lookup": round(tick / bare, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1500)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument(
        "--render", action="store_true", help="rewrite the doc section from the saved JSON"
    )
    args = parser.parse_args()
    if args.render:
        saved = json.loads((ROOT / "benchmarks/results/git_source.json").read_text())
        save("git_source", saved, markdown(saved, args), saved["command"])
        return
    work = Path(tempfile.mkdtemp(prefix="ragline-git-bench-"))
    try:
        generated = make_many_commits(work / "generated", args.commits)
        runs = [speed("ragline", own_repository(work), work), speed("generated", generated, work)]
        print(json.dumps(runs, indent=2), flush=True)
        tick = sensor_tick(generated, work)
        print(json.dumps(tick, indent=2), flush=True)
        data: dict[str, object] = {"speed": runs, "sensor": tick}
        if not args.skip_quality:
            data["quality"] = quality(work)
        data["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(data, indent=2))
    save("git_source", data, markdown(data, args), "python benchmarks/git_source.py")


def markdown(data: dict, args: argparse.Namespace) -> str:
    lines = []
    quality_data = data.get("quality")
    if quality_data:
        ndcg = quality_data["ndcg@10"]
        lines += [
            f"CoSQA dev ({quality_data['queries']} queries) as a `git` source: "
            f"{quality_data['files']} files, {quality_data['chunks']} code chunks, "
            f"indexed in {quality_data['index_s']} s.",
            "",
            "| mode | nDCG@10 | anchor | vs anchor |",
            "|---|---|---|---|",
            f"| bm25 | {ndcg['bm25']} | Tantivy BM25 0.383 | {ndcg['bm25'] / 0.383:.2f} |",
            f"| vector | {ndcg['vector']} | MiniLM dense 0.603 | {ndcg['vector'] / 0.603:.2f} |",
            f"| hybrid | {ndcg['hybrid']} | MiniLM dense 0.603 | {ndcg['hybrid'] / 0.603:.2f} |",
            "",
            f"Hybrid vs vector in the same run: {ndcg['hybrid'] / ndcg['vector']:.3f}.",
            "",
        ]
    lines += [
        "First index of each repository (files of HEAD's tree and every commit). The "
        "baseline, in the same run, is reading the same blobs and commits with their "
        "diffs through pygit2 alone.",
        "",
        "| repository | files (indexed) | commits | chunks | wall | files/s | commits/s "
        "| embedder share | everything but embedding | bare pygit2 read | no-change run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in data["speed"]:
        other = run["wall_s"] - run["embedder_s"]
        lines.append(
            f"| {run['repository']} | {run['files']} ({run['files_indexed']}) | {run['commits']} "
            f"| {run['chunks']} | {run['wall_s']} s | {run['files_per_s']} "
            f"| {run['commits_per_s']} | {run['embedder_share_of_wall']:.0%} "
            f"| {other:.1f} s ({other / run['bare_read_s']:.0f}× the bare read) "
            f"| {run['bare_read_s']} s | {run['no_change_run_s']} s, "
            f"{run['no_change_embedded']} embedded |"
        )
    tick = data["sensor"]
    lines += [
        "",
        f"No-change `source_changes` tick on the generated repository ({args.commits} commits): "
        f"{tick['sensor_tick_no_change_s']} s, against {tick['bare_ref_lookup_s']} s for the "
        f"bare lookup of the ref's commit id ({tick['tick_vs_bare_lookup']}×). "
        f"Peak RSS {data['peak_rss_mib']} MiB.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
