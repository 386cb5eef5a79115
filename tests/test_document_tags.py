"""Auto-tags for a source's new documents (issue 30, item 3): real indexing runs of a
small vault, the model played by the Ollama stand-in (tests/ollama_standin.py), a
named stand-in: no Ollama server can be installed here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tomli_w

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.index.store import IndexStore
from rag_serving.search import SearchEngine, SearchFilters
from ragline.indexing import SourceRunOutcome, index_sources
from ragline.output import outcome_line
from tests.ollama_standin import CHAT_MODEL, OllamaStandIn

NOTES = {
    "pumps.md": "---\ntags: [hydraulics]\n---\n# Pumps\n\nA pump moves water with an impeller.\n",
    "valves.md": "---\ntags: [hydraulics, maintenance]\n---\n# Valves\n\nGate valves seal.\n",
}
NEW_NOTE = "# Seals\n\nMechanical seals keep the pump shaft from leaking.\n"


def setup(tmp_path: Path, host: str, auto_tags: bool = True) -> RaglineConfig:
    vault = tmp_path / "vault"
    vault.mkdir(exist_ok=True)
    for name, text in NOTES.items():
        (vault / name).write_text(text, encoding="utf-8")
    payload: dict[str, Any] = {
        "data_dir": str(tmp_path / "data"),
        "sources": [
            {"name": "notes", "kind": "markdown", "path": str(vault), "auto_tags": auto_tags}
        ],
        "llm": {"host": host, "model": CHAT_MODEL, "connect_timeout_s": 2, "read_timeout_s": 10},
    }
    path = tmp_path / "ragline.toml"
    path.write_bytes(tomli_w.dumps(payload).encode())
    return parse_config_file(path)


def index(config: RaglineConfig) -> SourceRunOutcome:
    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    return outcome


def document_tags(config: RaglineConfig) -> dict[str, list[str]]:
    store = IndexStore(config.data_dir, index_uri=config.index_uri)
    rows = store.read("documents", columns=["path", "tags"]).to_pylist()
    return {r["path"]: list(r["tags"]) for r in rows}


def tagged_paths(config: RaglineConfig, query: str, tag: str) -> set[str]:
    engine = SearchEngine(config, read_consistency_s=0)
    return {h.path for h in engine.search(query, k=5, filters=SearchFilters(tags=(tag,))).hits}


def test_a_new_document_is_tagged_once_and_keeps_its_tags_through_edits(tmp_path: Path) -> None:
    reply = '{"tags": ["Hydraulics", "Sealing Parts", "!!"]}'
    with OllamaStandIn(chat_reply=lambda messages, schema: reply) as standin:
        config = setup(tmp_path, standin.host)
        first = index(config)
        # The first index (the backlog) is not tagged: no model call.
        assert standin.chat_requests == []
        assert "first index is not tagged" in first.metadata["parsed_documents"]["auto_tags"]
        vault = config.sources[0].path
        (vault / "seals.md").write_text(NEW_NOTE, encoding="utf-8")
        second = index(config)
        [request] = standin.chat_requests
        prompt = json.dumps(request.body["messages"])
        # the model is shown the index's tags to prefer, and the document
        assert "hydraulics" in prompt and "maintenance" in prompt and "Mechanical seals" in prompt
        assert "1 new document(s) tagged" in second.metadata["parsed_documents"]["auto_tags"]
        tags = document_tags(config)
        assert tags["seals.md"] == ["hydraulics", "sealing-parts"]
        assert tags["pumps.md"] == ["hydraulics"]  # documents of the first index untouched
        # the file itself is not written to
        assert (vault / "seals.md").read_text(encoding="utf-8") == NEW_NOTE
        assert tagged_paths(config, "mechanical seals", "sealing-parts") == {"seals.md"}
        # An edit re-parses the note: its model tags stay, the model is not asked again.
        (vault / "seals.md").write_text(NEW_NOTE + "\nLip seals too.\n", encoding="utf-8")
        index(config)
        assert len(standin.chat_requests) == 1
        assert document_tags(config)["seals.md"] == ["hydraulics", "sealing-parts"]
        # A deleted note's model tags are forgotten.
        (vault / "seals.md").unlink()
        index(config)
        store = IndexStore(config.data_dir, index_uri=config.index_uri)
        assert store.read("model_tags", columns=["path"]).to_pylist() == []


def test_indexing_goes_on_when_the_model_is_down(tmp_path: Path) -> None:
    standin = OllamaStandIn().start()
    host = standin.host
    standin.stop()
    config = setup(tmp_path, host)
    index(config)
    vault = config.sources[0].path
    for n in range(3):
        (vault / f"new-{n}.md").write_text(f"# New {n}\n\nFresh text {n}.\n", encoding="utf-8")
    outcome = index(config)
    note = outcome.metadata["parsed_documents"]["auto_tags"]
    assert f"auto-tags skipped: no Ollama server answers at {host}" in note
    assert "auto-tags skipped: no Ollama server answers" in outcome_line(outcome)  # printed
    assert {p for p in document_tags(config) if p.startswith("new-")} == {
        "new-0.md", "new-1.md", "new-2.md"
    }  # fmt: skip
    assert "3 document(s) to tag when the model answers" in note
    # The model answers again: the notes it missed are tagged on the next run, unchanged
    # as they are, and found by their tags; after that it is not asked about them again.
    reply = '{"tags": ["Fresh"]}'
    with OllamaStandIn(chat_reply=lambda messages, schema: reply) as standin:
        config = setup(tmp_path, standin.host)
        outcome = index(config)
        assert len(standin.chat_requests) == 3
        assert "3 new document(s) tagged" in outcome.metadata["parsed_documents"]["auto_tags"]
        tags = document_tags(config)
        assert all(tags[f"new-{n}.md"] == ["fresh"] for n in range(3))
        assert tags["pumps.md"] == ["hydraulics"]
        assert tagged_paths(config, "fresh text", "fresh") == {"new-0.md", "new-1.md", "new-2.md"}
        index(config)
        assert len(standin.chat_requests) == 3


def test_without_auto_tags_the_model_is_never_asked(tmp_path: Path) -> None:
    with OllamaStandIn(chat_reply=lambda messages, schema: '{"tags": ["x"]}') as standin:
        config = setup(tmp_path, standin.host, auto_tags=False)
        index(config)
        (config.sources[0].path / "seals.md").write_text(NEW_NOTE, encoding="utf-8")
        outcome = index(config)
        assert standin.chat_requests == []
        assert "auto_tags" not in outcome.metadata["parsed_documents"]
        assert document_tags(config)["seals.md"] == []
