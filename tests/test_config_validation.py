"""Config mistakes stop every command with exit code 2 and one line per problem naming
the config file and the key, through the real CLI; never a Dagster stack trace.

Covers what used to pass validation and then fail each run (cron, timezone, data_dir,
source paths), the documented defaults ([embedder] without provider), and the
siblings: constrained values, typos with suggestions, types, paths, unreadable files."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_serving.config import RaglineConfig, cron_problem, parse_config_file
from ragline.cli import _check_paths_for, cli
from tests.conftest import write_config

SOURCE = '[[sources]]\nname = "notes"\nkind = "markdown"\npath = "vault"\n'


def _project(tmp_path: Path, text: str) -> Path:
    """A config file ``text`` beside a small vault (``vault/``)."""
    vault = tmp_path / "vault"
    vault.mkdir(exist_ok=True)
    (vault / "One.md").write_text("# One\n\nalpha bravo\n", encoding="utf-8")
    path = tmp_path / "ragline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _run(path: Path, *args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["--config", str(path), *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.stderr.splitlines()


def _errors(path: Path, *args: str) -> list[str]:
    """The stderr lines of a command that must exit 2 (what it printed, file prefix cut)."""
    code, lines = _run(path, *args)
    assert code == 2, lines
    assert lines and all(line.startswith(f"error: {path}: ") for line in lines), lines
    return [line.removeprefix(f"error: {path}: ") for line in lines]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[freshness]\nreconcile_cron = "61 3 * * *"\n',
            "freshness.reconcile_cron: '61 3 * * *' is not a cron schedule: '61' is not a "
            "valid minute (0-59) (five fields: minute hour day-of-month month day-of-week, "
            'e.g. "0 3 * * *" for 03:00 every day)',
        ),
        (
            '[freshness]\nmaintenance_cron = "0 3 * *"\n',
            "freshness.maintenance_cron: '0 3 * *' is not a cron schedule: it has 4 fields, "
            'not 5 (five fields: minute hour day-of-month month day-of-week, e.g. "0 3 * * *" '
            "for 03:00 every day)",
        ),
        (
            '[freshness]\ntimezone = "Europe/Berln"\n',
            "freshness.timezone: unknown timezone 'Europe/Berln'; did you mean "
            "'Europe/Berlin', 'Europe/Belfast', 'Europe/Belgrade'? (an IANA name such as "
            '"Europe/Berlin" or "UTC")',
        ),
        (
            '[[sources]]\nname = "notes"\npath = "vault"\n',
            'sources[0].kind: source \'notes\' has no `kind`; add kind = "markdown", "documents", "git", "mail", "feeds" or "calibre"',
        ),
        (
            "[freshness]\nsensor_interval_s = 0\n",
            "freshness.sensor_interval_s: Input should be greater than or equal to 5 (got 0)",
        ),
        (
            "[chunking]\ntarget_tokens = -5\n",
            "chunking.target_tokens: Input should be greater than or equal to 16 (got -5)",
        ),
        (
            "[chunking]\ntarget_tokens = 300\nmax_tokens = 200\n",
            "chunking: target_tokens (300) is above max_tokens (200); lower target_tokens or "
            "raise max_tokens",
        ),
        ('[embedder]\nmodle = "x"\n', "embedder.modle: unknown key; did you mean 'model'?"),
        (
            '[embedder]\nhost = "http://127.0.0.1:11434"\n',
            'embedder.host: unknown key for provider "sentence-transformers"; it is a key of '
            'provider = "ollama" (set provider = "ollama" to use it)',
        ),
        (
            SOURCE.replace('"vault"\n', '"vault"\nincude = ["*.md"]\n'),
            "sources[0].incude: unknown key; did you mean 'include'?",
        ),
        ('dta_dir = "x"\n', "dta_dir: unknown key; did you mean 'data_dir'?"),
        ("[search.weights]\nbm2 = 1\n", "search.weights.bm2: unknown key; did you mean 'bm25'?"),
        (
            '[search]\nk = "ten"\n',
            "search.k: Input should be a valid integer, unable to parse string as an integer "
            "(got 'ten')",
        ),
        (
            '[sources]\nname = "notes"\n',
            "sources: write each source as a [[sources]] block (double brackets)",
        ),
        ('embedder = "ollama"\n', "embedder: must be a table ([embedder] or embedder = { ... })"),
        (
            SOURCE + SOURCE,
            "sources: source name 'notes' is used twice",
        ),
        (
            SOURCE.replace('"notes"', '"My Notes"'),
            "sources[0].name: 'My Notes' is not a valid source name: use 1-63 lowercase "
            "letters, digits, '-' or '_', starting with a letter or digit",
        ),
        (
            '[mcp]\ntokens = [{ user = "ann", token = "0123456789abcdef", sources = ["note"] }]\n'
            + SOURCE,
            "mcp.tokens[0].sources: user 'ann' is given unknown source 'note'; did you mean "
            "'notes'? (configured: notes; '*' for all)",
        ),
        ('a = 1\nb = [1,\nc = "x"\n', "not valid TOML: Invalid value (at line 4, column 1)"),
    ],
)
def test_a_bad_config_exits_2_with_one_line_naming_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = _project(tmp_path, 'data_dir = "data"\n' + text)
    for command in (["index"], ["status"], ["search", "alpha"]):
        assert _errors(path, *command) == [expected]
    assert not (tmp_path / "data").exists()  # nothing ran


def test_several_problems_are_one_line_each(tmp_path: Path) -> None:
    path = _project(
        tmp_path,
        '[freshness]\ntimezone = "Nowhere/Land"\nreconcile_cron = "* * *"\n'
        '[[sources]]\nname = "a"\npath = "vault"\n',
    )
    lines = _errors(path, "index")
    assert [line.split(":")[0] for line in lines] == [
        "freshness.reconcile_cron",
        "freshness.timezone",
        "sources[0].kind",
    ]


@pytest.mark.parametrize(
    "cron",
    [
        "@daily", "@hourly", "@weekly", "@monthly", "@yearly", "@midnight", "0 3 * * *",
        "*/15 * * * *", "0 0 L * *", "0 0 * * 5#3", "0 0 * * fri", "0 0 1 jan *",
        "0 0 * * MON-FRI", "0 0 * * 7", "5-1 * * * *", "0 0 ? * *", "0 0 1,15 * *",
        "0-30/5 * * * *", "0 0 * jan-mar *", "00 03 * * *", "0 0 29 2 *", " 0 3 * * * ",
        "*/60 * * * *", "5/15 * * * *", "0 0 * * fri#2", "0 0 1 1-feb *",
        "H 3 * * *", "0 3 * * * *", "61 3 * * *", "0 24 * * *", "0 0 30 2 *", "0 0 31 feb *",
        "0 0 0 * *", "0 0 * 13 *", "0 0 * * 8", "*/0 * * * *", "0 0 * * 5L", "0 0 LW * *",
        "0 3 * *", "a b c d e", "0 0 L-2 * *", "0 0 15W * *", "0 0 * * 1#6", "? * * * *",
        "0 0 * * 5#3/2", "1-2-3 * * * *", "-1 * * * *", "1,,2 * * * *", "",
    ],
)  # fmt: skip
def test_cron_check_agrees_with_dagster(cron: str) -> None:
    from dagster._utils.schedules import is_valid_cron_string

    assert (cron_problem(cron) is None) == is_valid_cron_string(cron)


def test_embedder_with_only_a_model_uses_the_documented_default_provider(tmp_path: Path) -> None:
    path = _project(tmp_path, '[embedder]\nmodel = "all-MiniLM-L6-v2"\nbatch_size = 8\n' + SOURCE)
    config = parse_config_file(path)
    assert config.embedder.provider == "sentence-transformers"
    assert (config.embedder.model, config.embedder.batch_size) == ("all-MiniLM-L6-v2", 8)
    code, lines = _run(path, "status")
    assert code == 0, lines


def test_data_dir_that_is_a_file_or_below_one(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    path = _project(tmp_path, 'data_dir = "afile"\n' + SOURCE)
    expected = f"data_dir: {tmp_path / 'afile'} is a file, not a folder; point data_dir at a folder"
    for command in (["index"], ["ui"], ["mcp"]):
        assert _errors(path, *command) == [expected]
    path.write_text('data_dir = "afile/index"\n' + SOURCE)
    below = f"data_dir: cannot create {tmp_path / 'afile/index'}: {tmp_path / 'afile'} is a file, not a folder"
    assert _errors(path, "index") == [below]
    assert _errors(path, "ui") == [below]


def test_source_path_missing_or_a_file_stops_index_before_any_run(tmp_path: Path) -> None:
    path = _project(
        tmp_path,
        'data_dir = "data"\n'
        + SOURCE
        + '[[sources]]\nname = "gone"\nkind = "documents"\npath = "unplugged"\n'
        + '[[sources]]\nname = "one"\nkind = "markdown"\npath = "vault/One.md"\n',
    )
    missing = (
        f"sources[1].path: source 'gone': {tmp_path / 'unplugged'} does not exist; "
        "fix `path` (or mount the disk that holds it)"
    )
    a_file = (
        f"sources[2].path: source 'one': {tmp_path / 'vault/One.md'} is a file, not a folder; "
        "give the folder that holds it (and select files with `include`)"
    )
    assert _errors(path, "index") == [missing, a_file]
    assert _errors(path, "index", "gone") == [missing]
    assert not (tmp_path / "data").exists()
    # `ragline ui` refuses a path that can never work; a missing folder (an unplugged
    # disk) only warns, so the other sources stay fresh.
    assert _errors(path, "ui") == [a_file]
    config = parse_config_file(path)
    unplugged_only = config.model_copy(update={"sources": config.sources[:2]})
    runner = CliRunner()
    with runner.isolation() as (_out, err, _):
        _check_paths_for("ui", unplugged_only)
        assert err.getvalue().decode().splitlines() == [f"warning: {path}: {missing}"]
    _check_paths_for("mcp", config)  # the MCP server searches what is indexed


def test_unknown_source_named_to_index_suggests(tmp_path: Path) -> None:
    path = _project(tmp_path, 'data_dir = "data"\n' + SOURCE)
    code, lines = _run(path, "index", "note")
    assert code == 2
    assert lines == ["error: unknown source 'note'; did you mean 'notes'?"]


def test_ollama_unreachable_names_the_configured_host(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    host = f"http://127.0.0.1:{port}"
    path = _project(
        tmp_path,
        f'data_dir = "data"\n[embedder]\nprovider = "ollama"\nhost = "{host}"\n'
        "connect_timeout_s = 2\n" + SOURCE,
    )
    result = CliRunner().invoke(cli, ["--config", str(path), "index", "--json"])
    assert result.exit_code == 1, result.output
    [outcome] = json.loads(result.stdout)
    assert outcome["error"] == (
        f"Ollama server not reachable at {host}; start it with `ollama serve` "
        "(or set embedder.host)"
    )


def test_relative_paths_follow_the_config_file_and_tilde_expands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    project.mkdir()
    path = _project(project, 'data_dir = "~/index"\n' + SOURCE.replace('"vault"', '"./vault"'))
    monkeypatch.chdir(tmp_path)  # not the config's folder
    config = parse_config_file(path)
    assert config.data_dir == home / "index"
    assert config.sources[0].path == project / "vault"
    path.write_text('data_dir = "../idx"\n' + SOURCE.replace('"vault"', '"~/notes"'))
    config = parse_config_file(path)
    assert config.data_dir == tmp_path / "idx"
    assert config.sources[0].path == home / "notes"
    assert config.embedder.model == "all-MiniLM-L6-v2"  # a name, not a path
    (project / "models" / "mini").mkdir(parents=True)
    path.write_text('[embedder]\nmodel = "models/mini"\n')
    assert parse_config_file(path).embedder.model == str(project / "models" / "mini")
    path.write_text('[embedder]\nmodel = "~/mini"\n')
    assert parse_config_file(path).embedder.model == str(home / "mini")


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ragline.toml"
    path.write_bytes(b'data_dir = "\xff\xfe"\n')
    [line] = _errors(path, "status")
    assert line.startswith("cannot read the config file: 'utf-8' codec can't decode byte 0xff")


def test_search_works_while_another_sources_folder_is_missing(
    tmp_path: Path, sample_index: RaglineConfig, sample_vault: Path
) -> None:
    path = write_config(
        tmp_path,
        [
            {"name": "notes", "kind": "markdown", "path": str(sample_vault / "notes")},
            {"name": "journal", "kind": "markdown", "path": str(tmp_path / "unplugged")},
        ],
        data_dir=sample_index.data_dir,
    )
    result = CliRunner().invoke(cli, ["--config", str(path), "search", "rust", "--json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)["hits"]
    assert hits and {hit["source"] for hit in hits} <= {"notes", "journal"}
