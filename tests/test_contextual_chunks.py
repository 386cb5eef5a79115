"""Contextual chunk text (issue 31, item 2): ``[chunking] context = "title"`` puts the
document's title before each chunk's heading path in what is embedded, on a real index."""

from __future__ import annotations

from pathlib import Path

import tomli_w

from rag_serving.config import parse_config_file
from rag_serving.search import SearchEngine
from tests.conftest import build_index

BODY = (
    "Drain the first node, then upgrade its kubelet.\n\n"
    "## Rollback\n\n"
    "Keep the previous package at hand and reinstall it when a node fails its checks.\n"
)


def _config(root: Path, vault: Path, context: str) -> Path:
    path = root / "ragline.toml"
    path.write_text(tomli_w.dumps({
        "data_dir": str(root / "data"),
        "chunking": {"context": context},
        "sources": [{"name": "notes", "kind": "markdown", "path": str(vault)}],
    }))  # fmt: skip
    return path


def _embedded(path: Path) -> dict[str, list[str]]:
    engine = SearchEngine(parse_config_file(path))
    rows = engine.store.read("staged_chunks", columns=["doc_id", "embed_text"]).to_pylist()
    docs = engine.store.read("documents", columns=["doc_id", "path"]).to_pylist()
    paths = {d["doc_id"]: d["path"] for d in docs}
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(paths[row["doc_id"]], []).append(row["embed_text"])
    return {p: sorted(texts) for p, texts in out.items()}


def test_the_title_leads_each_chunk_and_follows_a_rename(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Kubernetes upgrades.md").write_text(BODY, encoding="utf-8")
    (vault / "Titled.md").write_text("# Titled\n\nA note with its title as heading.\n")
    path = _config(tmp_path, vault, "title")
    build_index(path)
    embedded = _embedded(path)
    assert embedded["Kubernetes upgrades.md"] == ["Kubernetes upgrades\n\n" + BODY.strip()]
    assert embedded["Titled.md"] == ["Titled\n\n# Titled\n\nA note with its title as heading."]

    # Same bytes under a new name: the chunks are made again, not copied with the old title.
    (vault / "Kubernetes upgrades.md").rename(vault / "Cluster upgrades.md")
    build_index(path)
    embedded = _embedded(path)
    assert "Kubernetes upgrades.md" not in embedded
    texts = embedded["Cluster upgrades.md"]
    assert texts == ["Cluster upgrades\n\n" + BODY.strip()]


def test_switching_the_setting_rechunks_and_headings_leave_the_title_out(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Kubernetes upgrades.md").write_text(BODY, encoding="utf-8")
    path = _config(tmp_path, vault, "title")
    build_index(path)
    assert _embedded(path)["Kubernetes upgrades.md"] == ["Kubernetes upgrades\n\n" + BODY.strip()]
    path = _config(tmp_path, vault, "headings")
    build_index(path)
    texts = _embedded(path)["Kubernetes upgrades.md"]
    assert texts == [BODY.strip()]
    hits = SearchEngine(parse_config_file(path)).search("kubelet", mode="bm25").hits
    assert hits and hits[0].path == "Kubernetes upgrades.md"
