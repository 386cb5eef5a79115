"""Shared fixtures. Indexes are built once per session through the real stack:
Dagster (in-process), LanceDB, Tantivy and the bundled MiniLM model."""

from __future__ import annotations

import os

# Tests own their Dagster instances: never write to a user's DAGSTER_HOME.
os.environ.pop("DAGSTER_HOME", None)
os.environ.pop("RAGLINE_CONFIG", None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from tests.sample_vault import write_sample_vault

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
HELP_VAULT = SHARED_DATA / "corpora" / "obsidian-help-en"
# The hub's community plugin notes, and the ones written in Chinese.
HUB_PLUGINS = (
    SHARED_DATA
    / "corpora"
    / "obsidian-hub"
    / "02 - Community Expansions"
    / "02.05 All Community Expansions"
    / "Plugins"
)
CHINESE_NOTES = ["dust-calendar.md", "openwords.md", "sync-cnblog.md", "image-classify-paste.md"]
# A slice of the Obsidian help vault: small enough to embed in seconds.
HELP_SLICE = [
    "Getting started/**",
    "Linking notes and files/**",
    "Editing and formatting/**",
    "Files and folders/**",
]

# The real tokenizer fixtures (`embedder`, `count`) of the chunker tests.
pytest_plugins = ["tests.tokenizer"]


def write_config(
    directory: Path, sources: list[dict[str, object]], data_dir: Path | None = None
) -> Path:
    """Write a ragline.toml with the given sources into ``directory``."""
    import tomli_w

    directory.mkdir(parents=True, exist_ok=True)
    payload: dict[str, object] = {
        "data_dir": str(data_dir or directory / "data"),
        "sources": sources,
    }
    path = directory / "ragline.toml"
    path.write_bytes(tomli_w.dumps(payload).encode())
    return path


def build_index(config_path: Path, full: bool = False) -> RaglineConfig:
    from ragline.indexing import index_sources

    config = parse_config_file(config_path)
    outcomes = index_sources(config, [], full=full)
    failed = [o for o in outcomes if not o.success]
    assert not failed, [o.error for o in failed]
    return config


@pytest.fixture(scope="session")
def sample_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small vault written by the tests: known notes, tags, dates and broken files."""
    return write_sample_vault(tmp_path_factory.mktemp("vault"))


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory, sample_vault: Path) -> RaglineConfig:
    """The sample vault indexed as two sources ("notes" and "journal")."""
    root = tmp_path_factory.mktemp("sample-index")
    config_path = write_config(
        root,
        [
            {
                "name": "notes",
                "kind": "markdown",
                "path": str(sample_vault / "notes"),
                "exclude": ["drafts/**"],
            },
            {"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")},
        ],
    )
    return build_index(config_path)


@pytest.fixture(scope="session")
def help_index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    """A slice of the real Obsidian help vault, read in place from ../shared/data."""
    if not HELP_VAULT.is_dir():
        pytest.fail(f"{HELP_VAULT} is missing: run with ../shared/data or -m 'not shared_data'")
    root = tmp_path_factory.mktemp("help-index")
    config_path = write_config(
        root,
        [{"name": "help", "kind": "markdown", "path": str(HELP_VAULT), "include": HELP_SLICE}],
    )
    return build_index(config_path)


@pytest.fixture()
def engine_for() -> Iterator[object]:
    from rag_serving.search import SearchEngine

    engines: list[SearchEngine] = []

    def make(config: RaglineConfig) -> SearchEngine:
        engine = SearchEngine(config)
        engines.append(engine)
        return engine

    yield make
