"""After retrieval (issue 30): context budget fill, where `ask`'s time goes, and
clip-to-searchable seconds.

1. **Context fill** on the help vault's questions (the queries of
   tests/test_help_vault.py, each with the note that answers it): per budget, the
   share of the budget used, and the characters of the answering note in what an agent
   gets — with ``--context`` against the baseline of the same search's snippets.
2. **ask** on the same questions with the Ollama STAND-IN (tests/ollama_standin.py;
   no Ollama runs here): milliseconds in retrieval, context assembly, the "model"
   (instant here, so only ragline's side is a real figure) and the citation check.
3. **clip** of a real page and a 37-page PDF served on 127.0.0.1: seconds until the
   command returns with the clip searchable, against a `ragline index` of the same
   source with nothing new (the floor of any run), measured in the same run.

    .venv/bin/python -m benchmarks.after_retrieval
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import tomli_w

from benchmarks.report import save

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
HELP_VAULT = DATA / "corpora" / "obsidian-help-en"
HELP_SLICE = ["Getting started/**", "Linking notes and files/**", "Editing and formatting/**"]
QUESTIONS = [
    ("wikilink heading block link syntax", "Linking notes and files/Internal links.md"),
    ("embed pdf page", "Linking notes and files/Embed files.md"),
    ("aliases frontmatter", "Linking notes and files/Aliases.md"),
    ("callout fold", "Editing and formatting/Callouts.md"),
    ("show the contents of one note inside another note", "Linking notes and files/Embed files.md"),
    ("use alternative names for the same note", "Linking notes and files/Aliases.md"),
    (
        "keep my notes the same on my phone and my laptop",
        "Getting started/Sync your notes across devices.md",
    ),
]
BUDGETS = (1500, 4000, 8000)
K = 6
PDF = DATA / "corpora" / "pdf" / "papers" / "2206.10883v3.pdf"
EPUB_PAGE = ("corpora/epub", "xhtml")


def _ragline(config: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(config), *args],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    return time.perf_counter() - started, done


def context_fill(engine: Any) -> tuple[list[dict[str, Any]], str]:
    rows = []
    for budget in BUDGETS:
        used, useful, snippet_useful = [], [], []
        for query, expected in QUESTIONS:
            hits = engine.search(query, k=K, context=budget).hits
            texts = [(h.path, h.context.text if h.context else "") for h in hits]
            used.append(sum(len(t) for _, t in texts) / budget)
            useful.append(sum(len(t) for p, t in texts if p == expected))
            snippet_useful.append(sum(len(h.snippet) for h in hits if h.path == expected))
        rows.append({
            "budget": budget,
            "fill": statistics.mean(used),
            "answer_chars": statistics.mean(useful),
            "snippet_answer_chars": statistics.mean(snippet_useful),
        })  # fmt: skip
    table = "\n".join(
        f"| {r['budget']:,} | {r['fill']:.0%} | {r['answer_chars']:,.0f} | "
        f"{r['snippet_answer_chars']:,.0f} | {r['answer_chars'] / max(r['snippet_answer_chars'], 1):.1f}× |"
        for r in rows
    )
    return rows, (
        f"**Context fill** ({len(QUESTIONS)} help-vault questions, k={K}; the answering "
        "note's characters in what the agent gets, with `--context` and with the same "
        "search's snippets alone):\n\n| budget | budget used | answering note, context "
        "| answering note, snippets | ratio |\n|---|---|---|---|---|\n" + table
    )


def ask_shares(config_path: Path) -> tuple[dict[str, float], str]:
    sys.path.insert(0, str(REPO))
    from tests.ollama_standin import CHAT_MODEL, OllamaStandIn

    def reply(messages: list[dict[str, Any]], schema: Any) -> str:
        user = messages[-1]["content"]
        line = next(x for x in user.split("\n") if len(x.split()) >= 6 and not x.startswith("["))
        return f"{line.strip()} [1]. Nothing else is known about it [2]."

    totals: dict[str, list[float]] = {}
    with OllamaStandIn(chat_reply=reply) as standin:
        config = config_path.parent / "ask.toml"
        raw = (
            config_path.read_text() + f'\n[llm]\nhost = "{standin.host}"\nmodel = "{CHAT_MODEL}"\n'
        )
        config.write_text(raw)
        for query, _ in QUESTIONS:
            _, done = _ragline(config, "ask", query, "--json")
            assert done.returncode == 0, done.stderr
            import json

            for stage, ms in json.loads(done.stdout)["timings_ms"].items():
                totals.setdefault(stage, []).append(ms)
    means = {stage: statistics.mean(v) for stage, v in totals.items()}
    whole = sum(means.values())
    line = ", ".join(f"{stage} {ms:.0f} ms ({ms / whole:.0%})" for stage, ms in means.items())
    return means, (
        f"**ask**, mean of {len(QUESTIONS)} questions (the model is the stand-in, which answers "
        f"at once, so its share is not a real figure): {line}. Each `ragline ask` process also "
        "pays the cold start of a CLI search (loading the index and the encoder)."
    )


def clip_seconds(root: Path) -> tuple[dict[str, float], str]:
    sys.path.insert(0, str(REPO))
    from tests.feed_server import FeedServer

    epub = next(p for p in sorted((DATA / "corpora" / "epub").rglob("*.epub")))
    with zipfile.ZipFile(epub) as book:
        name = max(
            (n for n in book.namelist() if n.endswith((".xhtml", ".html"))),
            key=lambda n: book.getinfo(n).file_size,
        )
        page = book.read(name)
    notes = root / "clips-vault"
    notes.mkdir()
    (notes / "start.md").write_text("# Start\n\nThe clippings land in this vault.\n")
    config = root / "clip.toml"
    config.write_text(tomli_w.dumps({
        "data_dir": str(root / "clip-data"),
        "clip": {"source": "clips", "allow_hosts": ["127.0.0.1"]},
        "sources": [{"name": "clips", "kind": "markdown", "path": str(notes),
                     "attachments": ["pdf"]}],
    }))  # fmt: skip
    _, first = _ragline(config, "index")
    assert first.returncode == 0, first.stderr
    floor, again = _ragline(config, "index", "clips")
    assert again.returncode == 0, again.stderr
    results: dict[str, float] = {"index_nothing_new_s": floor}
    with FeedServer() as server:
        server.put("/page.html", page, content_type="text/html; charset=utf-8")
        server.put("/paper.pdf", PDF.read_bytes(), content_type="application/pdf")
        for label, path in (("page", "/page.html"), ("pdf_37_pages", "/paper.pdf")):
            seconds, done = _ragline(config, "clip", server.url(path))
            assert done.returncode == 0 and "Searchable now" in done.stdout, (
                done.stdout + done.stderr
            )
            results[f"{label}_s"] = seconds
    return results, (
        f"**clip to searchable** (the command's wall time, a fresh process each): a web page "
        f"({len(page) // 1024} KiB, from {epub.name}) {results['page_s']:.1f} s, a 37-page PDF "
        f"({PDF.stat().st_size // 1024} KiB) {results['pdf_37_pages_s']:.1f} s; baseline "
        f"`ragline index clips` with nothing new {floor:.1f} s in the same run — "
        f"{results['page_s'] / floor:.2f}× and {results['pdf_37_pages_s'] / floor:.2f}× of it."
    )


def main() -> None:
    from rag_serving.config import parse_config_file
    from rag_serving.search import SearchEngine

    with tempfile.TemporaryDirectory(prefix="ragline-bench-") as folder:
        root = Path(folder)
        config_path = root / "ragline.toml"
        config_path.write_text(tomli_w.dumps({
            "data_dir": str(root / "data"),
            "sources": [{"name": "help", "kind": "markdown", "path": str(HELP_VAULT),
                         "include": HELP_SLICE}],
        }))  # fmt: skip
        _, built = _ragline(config_path, "index")
        assert built.returncode == 0, built.stderr
        engine = SearchEngine(parse_config_file(config_path))
        fill, fill_md = context_fill(engine)
        shares, ask_md = ask_shares(config_path)
        clips, clip_md = clip_seconds(root)
    save(
        "after_retrieval",
        {"context_fill": fill, "ask_ms": shares, "clip": clips},
        "\n\n".join([fill_md, ask_md, clip_md]),
        ".venv/bin/python -m benchmarks.after_retrieval",
    )


if __name__ == "__main__":
    main()
