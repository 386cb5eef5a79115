"""The config file: validation, error messages naming file and key, lookup order, init."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_serving.config import find_config_path, parse_config_file
from rag_sources.errors import ConfigError
from ragline.cli import cli


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_config_resolves_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "vault").mkdir()
    path = _write(
        tmp_path,
        'data_dir = "idx"\n[search]\nrrf_k = 30\n[search.weights]\nbm25 = 0.5\n'
        '[[sources]]\nname = "notes"\nkind = "markdown"\npath = "vault"\nexclude = ["x/**"]\n',
    )
    config = parse_config_file(path)
    assert config.data_dir == tmp_path / "idx"
    assert config.sources[0].path == tmp_path / "vault"
    assert config.sources[0].exclude == ["x/**"]
    assert config.search.rrf_k == 30 and config.search.weights.bm25 == 0.5
    assert config.embedder.provider == "sentence-transformers"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[sources]]\nname = "Bad Name"\nkind = "markdown"\npath = "."\n', "sources[0].name"),
        (
            '[[sources]]\nname = "a"\nkind = "markdwn"\npath = "."\n',
            "sources[0].kind: unknown kind 'markdwn'",
        ),
        (
            '[[sources]]\nname = "a"\nkind = "markdown"\n',
            "sources[0].path: required key is missing",
        ),
        (
            '[[sources]]\nname = "a"\nkind = "markdown"\npath = "."\nincude = []\n',
            "sources[0].incude: unknown key",
        ),
        ('[embedder]\nprovider = "openai"\n', "embedder.provider: unknown provider 'openai'"),
        ("[search]\nrrf_k = 0\n", "search.rrf_k"),
        ('[chunking]\ntarget_tokens = "big"\n', "chunking.target_tokens"),
        ("data_dir = \n", "not valid TOML"),
        (
            '[[sources]]\nname = "a"\nkind = "markdown"\npath = "."\n'
            '[[sources]]\nname = "a"\nkind = "markdown"\npath = "."\n',
            "used twice",
        ),
    ],
)
def test_bad_config_names_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        parse_config_file(path)
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_bad_config_exits_2_with_one_message(tmp_path: Path) -> None:
    path = _write(tmp_path, '[search]\nmode = "fuzzy"\n')
    result = CliRunner().invoke(cli, ["--config", str(path), "status"])
    assert result.exit_code == 2
    assert "search.mode" in result.output and str(path) in result.output
    assert "Traceback" not in result.output


def test_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = _write(tmp_path, "")
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    from_env = _write(env_dir, "")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    local = _write(cwd, "")
    xdg = tmp_path / "xdg"
    (xdg / "ragline").mkdir(parents=True)
    user = _write(xdg / "ragline", "")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.setenv("RAGLINE_CONFIG", str(from_env))
    assert find_config_path(explicit) == explicit
    assert find_config_path() == from_env
    monkeypatch.delenv("RAGLINE_CONFIG")
    assert find_config_path() == local
    local.unlink()
    assert find_config_path() == user
    user.unlink()
    with pytest.raises(ConfigError, match="ragline init"):
        find_config_path()


def test_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "nope.toml"), "status"])
    assert result.exit_code == 2
    assert "nope.toml" in result.output


def test_init_writes_a_loadable_starter_config(tmp_path: Path) -> None:
    vault = tmp_path / "My Vault"
    vault.mkdir()
    target = tmp_path / "conf" / "ragline.toml"
    runner = CliRunner()
    result = runner.invoke(cli, ["init", str(vault), "--output", str(target)])
    assert result.exit_code == 0, result.output
    config = parse_config_file(target)
    assert [s.name for s in config.sources] == ["my-vault"]
    assert config.sources[0].path == vault
    again = runner.invoke(cli, ["init", str(vault), "--output", str(target)])
    assert again.exit_code == 2 and "--force" in again.output


def test_init_rejects_a_missing_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["init", str(tmp_path / "missing"), "-o", str(tmp_path / "c.toml")]
    )
    assert result.exit_code == 2
    assert "not a folder" in result.output


def test_init_detects_the_kind_and_says_why(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "paper.pdf").write_bytes(b"%PDF-1.4")
    papers = tmp_path / "papers"
    papers.mkdir()
    for name in ("a.pdf", "b.docx", "notes.md"):
        (papers / name).write_bytes(b"x")
    notes = tmp_path / "notes"
    notes.mkdir()
    for name in ("one.md", "two.md", "three.md", "four.md", "image.png"):
        (notes / name).write_bytes(b"x")
    runner = CliRunner()
    for folder, kind, why in (
        (vault, "markdown", ".obsidian/"),
        (papers, "documents", "2 of 3 files are not Markdown"),
        (notes, "markdown", "4 of 5 files are Markdown"),
    ):
        target = tmp_path / f"{folder.name}.toml"
        result = runner.invoke(cli, ["init", str(folder), "-o", str(target)])
        assert result.exit_code == 0, result.output
        assert f"Source kind: {kind}" in result.output and why in result.output
        assert parse_config_file(target).sources[0].kind == kind
    forced = runner.invoke(
        cli, ["init", str(vault), "-o", str(tmp_path / "f.toml"), "--kind", "documents"]
    )
    assert "Source kind: documents (given with --kind)" in forced.output
    assert parse_config_file(tmp_path / "f.toml").sources[0].kind == "documents"


def test_sources_add_appends_a_detected_source_and_keeps_comments(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / ".obsidian").mkdir(parents=True)
    papers = tmp_path / "My Papers"
    papers.mkdir()
    (papers / "a.pdf").write_bytes(b"%PDF")
    target = tmp_path / "ragline.toml"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(notes), "-o", str(target)]).exit_code == 0
    result = runner.invoke(cli, ["--config", str(target), "sources", "add", str(papers)])
    assert result.exit_code == 0, result.output
    assert "Added source 'my-papers': kind documents" in result.output
    config = parse_config_file(target)
    assert [(s.name, s.kind) for s in config.sources] == [
        ("notes", "markdown"),
        ("my-papers", "documents"),
    ]
    assert config.sources[1].ocr == "auto"
    assert "# ragline configuration" in target.read_text()  # comments kept
    again = runner.invoke(cli, ["--config", str(target), "sources", "add", str(papers)])
    assert again.exit_code == 2 and "a source named 'my-papers' exists" in again.output
    same = runner.invoke(
        cli, ["--config", str(target), "sources", "add", str(papers), "--name", "other"]
    )
    assert same.exit_code == 2 and "is already the source 'my-papers'" in same.output


def test_documents_and_attachment_options_are_validated(tmp_path: Path) -> None:
    for text, expected in (
        (
            '[[sources]]\nname = "a"\nkind = "documents"\npath = "."\nocr = "always"\n',
            "sources[0].ocr",
        ),
        (
            '[[sources]]\nname = "a"\nkind = "documents"\npath = "."\nocr_languages = ["en"]\n',
            "'en' is not a Tesseract language code",
        ),
        (
            '[[sources]]\nname = "a"\nkind = "markdown"\npath = "."\nattachments = ["pfd"]\n',
            "unknown attachment type 'pfd'; supported: pdf",
        ),
        (
            '[[sources]]\nname = "a"\nkind = "documents"\npath = "."\nattachments = ["pdf"]\n',
            "sources[0].attachments: unknown key",
        ),
    ):
        with pytest.raises(ConfigError) as excinfo:
            parse_config_file(_write(tmp_path, text))
        assert expected in str(excinfo.value)
