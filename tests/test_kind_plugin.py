"""A source kind from a package of its own (issue 28): tests/plugins/ragline-jsonl,
installed with pip into a folder of its own, adds the kind ``jsonl`` through the
``ragline.kinds`` entry-point group. With nothing in ragline changed, `ragline
sources add --kind jsonl`, `index`, `search` and `status` and the MCP `open` tool
work on a JSON-lines export of real notes (the Obsidian Hub), and a broken line is
recorded as a problem, not a failure. The kind's own search filter (`--channel`, the
MCP argument `channels`) and `neighbors` list (`same_channel`) appear in the CLI and
the MCP tools' schemas, and work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_config

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "tests" / "plugins" / "ragline-jsonl"
HUB = REPO.parent / "shared" / "data" / "corpora" / "obsidian-hub"
CHANNELS = ("Guides", "Workflows")
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin, installed by pip (its wheel built here) into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("plugin") / PLUGIN.name  # the build writes beside it
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(source)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert list(target.glob("ragline_jsonl-*.dist-info/entry_points.txt"))
    return target


def _export(path: Path, notes: list[Path]) -> list[dict[str, object]]:
    """One record per note (its file name as id, its text), and one broken line."""
    records = [
        {
            "id": note.stem,
            "title": note.stem,
            "text": note.read_text(encoding="utf-8"),
            "tags": ["hub"],
            "channel": CHANNELS[number % 2],
        }
        for number, note in enumerate(notes)
    ]
    lines = [json.dumps(r) for r in records]
    lines.insert(3, '{"title": "no id and no text"}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return records


def _ragline(site: Path, config: Path, *args: str, code: int = 0) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    done = subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(config), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert done.returncode == code, done.stdout + done.stderr
    return done.stdout + (done.stderr if code else "")


def test_a_kind_from_an_installed_package(site: Path, tmp_path: Path) -> None:
    notes = sorted((HUB / "04 - Guides, Workflows, & Courses").rglob("*.md"))[:12]
    export = tmp_path / "export.jsonl"
    records = _export(export, notes)
    config = tmp_path / "ragline.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')

    added = _ragline(
        site, config, "sources", "add", str(export), "--kind", "jsonl", "--name", "export"
    )
    assert 'kind = "jsonl"' in config.read_text(), added

    indexed = _ragline(site, config, "index", "--progress", "plain")
    assert "✓ export" in indexed, indexed

    target = records[5]
    phrase = " ".join(str(target["text"]).split()[20:32])
    found = json.loads(_ragline(site, config, "search", phrase, "--json", "--k", "3"))
    assert found["hits"][0]["source"] == "export"
    assert found["hits"][0]["path"] == target["id"]

    # The kind's filter: an option of `ragline search`, matching by the record's channel.
    assert "--channel" in _ragline(site, config, "search", "--help")
    own, other = target["channel"], next(c for c in CHANNELS if c != target["channel"])
    kept = json.loads(_ragline(site, config, "search", phrase, "--json", "--channel", own))
    assert kept["hits"][0]["path"] == target["id"]
    assert {h["path"] for h in kept["hits"]} <= {r["id"] for r in records if r["channel"] == own}
    left = json.loads(_ragline(site, config, "search", phrase, "--json", "--channel", other))
    assert target["id"] not in {h["path"] for h in left["hits"]}
    unknown = _ragline(site, config, "search", phrase, "--channel", "guide", code=2)
    assert "no indexed record is in channel 'guide'; did you mean 'guides'?" in unknown, unknown

    status = json.loads(_ragline(site, config, "status", "--json"))
    [source] = [s for s in status["sources"] if s["name"] == "export"]
    assert source["documents"] == len(records), source
    assert source["pending_changes"]["total"] == 0, source
    assert [(e["path"], e["message"]) for e in source["errors"]] == [
        ("line-4", 'line 4: not an object with an "id" and a "text"')
    ]

    with export.open(
        "a", encoding="utf-8"
    ) as handle:  # one more record: pending, by its own listing
        handle.write(json.dumps({"id": "late", "text": "a record added after the run"}) + "\n")
    status = json.loads(_ragline(site, config, "status", "--json"))
    [source] = [s for s in status["sources"] if s["name"] == "export"]
    assert source["pending_changes"]["new"] == 1, source

    opened = subprocess.run(
        [sys.executable, "-c", (
            "import json, sys\nfrom pathlib import Path\n"
            "from rag_serving.config import parse_config_file\n"
            "from rag_serving.mcp.auth import Access\n"
            "from rag_serving.mcp.service import RaglineService\n"
            "service = RaglineService(parse_config_file(Path(sys.argv[1])))\n"
            "from rag_serving.mcp.server import build_server\n"
            "access = Access('test', local=True)\n"
            "out = service.open(access, source='export', path=sys.argv[2])\n"
            "near = service.neighbors(access, source='export', path=sys.argv[2])\n"
            "import anyio\n"
            "tools = anyio.run(build_server(service.config, service=service).list_tools)\n"
            "[search] = [t for t in tools if t.name == 'search']\n"
            "print(json.dumps([out.model_dump(mode='json'), near.model_dump(mode='json'),\n"
            "                  search.input_schema['properties'].get('channels')]))\n"
        ), str(config), str(target["id"])],
        cwd=REPO, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert opened.returncode == 0, opened.stderr
    document, near, argument = json.loads(opened.stdout)
    assert document["title"] == target["id"]
    assert phrase.split()[0] in document["text"]
    # The kind's `neighbors` list, and its filter as an argument of the `search` tool.
    assert [r["id"] for r in near["same_channel"]] == sorted(
        str(r["id"]) for r in records if r["channel"] == own and r["id"] != target["id"]
    )
    assert near["thread"] == [] and near["commits"] == []  # the built-in kinds' lists
    assert argument["description"] == "Only records of these channels.", argument


def test_a_package_that_takes_a_built_in_name_is_one_line(site: Path, tmp_path: Path) -> None:
    """An installed package whose kind is called like a built-in one is refused, naming
    the package, before anything runs."""
    clash = tmp_path / "clash"
    (clash / "clash_kind").mkdir(parents=True)
    (clash / "clash_kind" / "__init__.py").write_text(
        "from rag_sources.kinds import KindInfo\n"
        "from rag_sources.kinds.mail.config import MailSourceConfig\n"
        'KIND = KindInfo(MailSourceConfig, "clash_kind:Nothing")\n'
    )
    dist = clash / "clash_kind-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-kind\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ragline.kinds]\nmail = clash_kind:KIND\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(clash), str(REPO)])}
    env.pop("RAGLINE_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(write_config(tmp_path, [])), "status"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert lines[-1] == (
        "error: the package 'clash-kind' declares the source kind 'mail', which 'ragline' "
        "already has; uninstall one of them"
    ), lines


def test_a_kind_may_not_take_a_name_of_ragline_or_of_another_kind() -> None:
    """A filter, hit field or `neighbors` list named like one of search's own or of a
    built-in kind would replace it in every schema: the registry refuses the kind."""
    from dataclasses import replace

    from rag_sources.hits import HitDetail
    from rag_sources.kinds import _name_clash, registered_kinds
    from rag_sources.kinds.mail.filters import SENDERS
    from rag_sources.kinds.mail.thread import THREAD

    kinds = registered_kinds()
    mine = replace(kinds["markdown"], relations=(), filters=(), hit_details=())
    other = [info for name, info in kinds.items() if name != "markdown"]
    assert _name_clash(mine, other) is None
    cases = [
        (replace(mine, filters=(replace(SENDERS, name="people"),)),
         "adds a search filter '--from', which the kind 'mail' already has"),
        (replace(mine, filters=(replace(SENDERS, name="tags", option="--who"),)),
         "adds a search filter 'tags', which is one of ragline's own"),
        (replace(mine, relations=(replace(THREAD, name="backlinks"),)),
         "adds a `neighbors` list 'backlinks', which is one of ragline's own"),
        (replace(mine, hit_details=(HitDetail("folder", "box", "A box."),)),
         "adds a hit field 'folder', which the kind 'mail' already has"),
        (replace(mine, hit_details=(HitDetail("title", "t", "Its title."),)),
         "adds a hit field 'title', which is one of ragline's own"),
    ]  # fmt: skip
    assert [_name_clash(info, other) for info, _ in cases] == [why for _, why in cases]
