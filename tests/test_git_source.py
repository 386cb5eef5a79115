"""A `git` source through the real stack: a repository built with git in the test
(several languages, a rename, a deletion, a merge, a force-push), indexed by the
Dagster job into LanceDB and Tantivy, searched with the bundled model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.mcp.auth import Access
from rag_serving.mcp.service import RaglineService
from rag_serving.search import SearchFilters
from rag_serving.search.engine import SearchEngine
from rag_serving.status import index_status
from rag_sources.errors import ConfigError, FilterError
from rag_sources.where import sql_string
from ragline.cli import cli
from ragline.indexing import index_sources
from tests.conftest import write_config
from tests.git_repos import (
    MAKE_REPO_HEAD_FILES,
    MAKE_REPO_SUBJECTS,
    add_submodule,
    bare_clone,
    commit_files,
    force_push_rewrite,
    git,
    head_sha,
    make_repo,
    sha_of,
    shallow_clone,
)

LOCAL = Access(user="local", sources=None, local=True)


def git_source(repo: Path, **extra: object) -> dict[str, object]:
    return {"name": "code", "kind": "git", "path": str(repo), "history_months": 0, **extra}


def index(config: RaglineConfig, full: bool = False) -> dict:
    [outcome] = index_sources(config, [], full=full)
    assert outcome.success, outcome.error
    return outcome.metadata


@pytest.fixture(scope="module")
def indexed_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[RaglineConfig, Path, dict]:
    root = tmp_path_factory.mktemp("git-source")
    repo = make_repo(root / "repo")
    config = parse_config_file(write_config(root, [git_source(repo)], root / "data"))
    metadata = index(config)
    return config, repo, metadata


@pytest.fixture(scope="module")
def engine(indexed_repo: tuple[RaglineConfig, Path, dict]) -> SearchEngine:
    return SearchEngine(indexed_repo[0])


def test_files_of_the_ref_tree_are_indexed_and_skipped_by_rule(indexed_repo) -> None:
    config, repo, _ = indexed_repo
    (repo / "untracked.py").write_text("def untracked_helper():\n    return 1\n")
    (repo / "debug.log").write_text("ignored by .gitignore\n")
    try:
        store = SearchEngine(config).store
        files = {r["path"]: r for r in store.read("files").to_pylist()}
        paths = {p for p in files if not p.startswith(".git/")}
        assert paths == set(MAKE_REPO_HEAD_FILES)  # untracked and ignored files are out
        for path, rule in MAKE_REPO_HEAD_FILES.items():
            if rule is None:
                assert files[path]["error"] is None, path
                # the fingerprint and content hash are the blob id, as git has it
                blob = git(repo, "rev-parse", f"HEAD:{path}").strip()
                assert files[path]["content_hash"] == blob
            else:
                assert files[path]["fingerprint"] == "!skipped", path
                assert files[path]["error"], path
        issues = {i.path: i for i in index_status(config).sources[0].issues}
        assert "vendor" in issues["vendor/github.com/acme/lib/lib.go"].message
        assert "binary" in issues["assets/logo.png"].message
        assert "link" in issues["docs/latest.md"].message
    finally:
        (repo / "untracked.py").unlink()
        (repo / "debug.log").unlink()


def test_a_query_for_a_functions_purpose_finds_its_chunk_with_its_lines(
    indexed_repo, engine: SearchEngine
) -> None:
    _, repo, _ = indexed_repo
    hits = engine.search("how long to wait before retrying a failed upload", k=5).hits
    code = [h for h in hits if h.symbol]
    assert code, [h.path for h in hits]
    best = code[0]
    assert best.path == "src/app/retry.py"
    assert best.symbol in {"backoff_delay", "retry_upload"}
    lines = (repo / best.path).read_text().splitlines()
    defining = next(n for n, line in enumerate(lines, 1) if line.startswith(f"def {best.symbol}("))
    assert best.line_start <= defining <= best.line_end
    assert best.location == f"src/app/retry.py#L{best.line_start}-L{best.line_end}"
    assert best.language == "python"

    go = engine.search(
        "parse the server configuration", k=3, filters=SearchFilters(languages=("golang",))
    ).hits
    assert go and go[0].path == "server/main.go" and go[0].language == "go"
    rust = engine.search(
        "split text into tokens", filters=SearchFilters(symbols=("tokenize",))
    ).hits
    assert rust and all(h.symbol and h.symbol.endswith("tokenize") for h in rust)


def test_commit_messages_are_found_with_author_and_date(engine: SearchEngine, indexed_repo) -> None:
    _, repo, _ = indexed_repo
    hits = engine.search("why did uploads fail transient storage errors", k=5).hits
    commits = [h for h in hits if h.file_type == "commit"]
    assert commits
    top = commits[0]
    assert top.title == MAKE_REPO_SUBJECTS[1]
    assert top.path == f".git/commits/{sha_of(repo, MAKE_REPO_SUBJECTS[1])}"
    assert top.author == "Bob Chen"
    assert top.modified is not None and top.modified.date().isoformat() == "2024-02-03"
    by_bob = engine.search("backoff", filters=SearchFilters(authors=("bob@example.com",))).hits
    assert by_bob and all(h.author == "Bob Chen" for h in by_bob)
    march = engine.search(
        "tokenizer", filters=SearchFilters(types=("commit",), after=_day("2024-03-01"))
    ).hits
    assert march and all(h.modified >= _day("2024-03-01") for h in march)
    with pytest.raises(FilterError, match="did you mean"):
        engine.search("x", filters=SearchFilters(authors=("bob chn",)))
    with pytest.raises(FilterError, match=r"symbol 'retry_uplod'.*did you mean"):
        engine.search("x", filters=SearchFilters(symbols=("retry_uplod",)))


def test_all_commits_are_indexed_including_the_merged_branch(indexed_repo) -> None:
    config, _repo, _metadata = indexed_repo
    store = SearchEngine(config).store
    titles = {r["title"] for r in store.read("documents", where="file_type = 'commit'").to_pylist()}
    assert titles == set(MAKE_REPO_SUBJECTS)
    merge = store.read(
        "documents",
        where=f"title = {sql_string(MAKE_REPO_SUBJECTS[5])}",
        columns=["frontmatter_json"],
    ).to_pylist()[0]
    assert len(json.loads(merge["frontmatter_json"])["parents"]) == 2


def test_open_returns_the_whole_symbol_and_neighbors_its_file_and_commits(
    indexed_repo, engine: SearchEngine
) -> None:
    config, repo, _ = indexed_repo
    service = RaglineService(config)
    hit = engine.search(
        "exponential backoff delay", k=3, filters=SearchFilters(languages=("python",))
    ).hits[0]
    opened = service.open(LOCAL, id=hit.chunk_id)
    lines = (repo / hit.path).read_text().splitlines()
    assert opened.line_start <= hit.line_start and opened.line_end >= hit.line_end
    body = "\n".join(lines[opened.line_start - 1 : opened.line_end])
    assert f"def {hit.symbol.rsplit('.', 1)[-1]}(" in body
    neighbors = service.neighbors(LOCAL, id=hit.chunk_id)
    names = {s.name for s in neighbors.symbols}
    assert hit.symbol not in names and names  # the other symbols of the file
    subjects = [c.subject for c in neighbors.commits]
    assert subjects[:2] == [MAKE_REPO_SUBJECTS[1], MAKE_REPO_SUBJECTS[0]]  # newest first
    assert not any(b.source_note.path.startswith(".git/") for b in neighbors.backlinks)
    commit = service.neighbors(
        LOCAL, source="code", path=f".git/commits/{sha_of(repo, MAKE_REPO_SUBJECTS[1])}"
    )
    assert [link.resolved.path for link in commit.links if link.resolved] == ["src/app/retry.py"]


def test_cli_shows_code_and_commit_hits(indexed_repo) -> None:
    config, repo, _ = indexed_repo
    runner = CliRunner(env={"COLUMNS": "200"})
    out = runner.invoke(
        cli, ["--config", str(config.config_path), "search", "retry uploads backoff", "-k", "8"]
    )
    assert out.exit_code == 0, out.output
    assert "code:src/app/retry.py:" in out.output
    short = sha_of(repo, MAKE_REPO_SUBJECTS[1])[:10]
    assert f"code@{short} · 2024-02-03 · Bob Chen" in out.output
    diff = runner.invoke(
        cli,
        ["--config", str(config.config_path), "search", "assert_eq tokenize", "--type", "commit"],
    )
    assert "in the diff of search/src/lib.rs" in diff.output, diff.output
    as_json = runner.invoke(
        cli,
        [
            "--config",
            str(config.config_path),
            "search",
            "tokenize",
            "--symbol",
            "tokenize",
            "--json",
        ],
    )
    assert as_json.exit_code == 0, as_json.output
    hits = json.loads(as_json.output)["hits"]
    assert hits and hits[0]["language"] == "rust" and hits[0]["symbol"].endswith("tokenize")


def test_nothing_changed_means_nothing_read_and_a_rename_costs_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    config = parse_config_file(write_config(tmp_path, [git_source(repo)], tmp_path / "data"))
    index(config)
    again = index(config)
    assert again["raw_files"]["new"] == again["raw_files"]["changed"] == 0
    assert again["embeddings"]["embedded"] == 0

    git(repo, "mv", "server/main.go", "server/server.go")
    commit_files(
        repo,
        "Rename the Go entry point",
        {},
        ("Alice Martin", "alice@example.com"),
        "2024-04-01T10:00:00+00:00",
    )
    pending = index_status(config).sources[0].pending
    assert pending is not None  # the rename (one path gone, one new) and the new commit
    assert (pending.new, pending.deleted) == (2, 1), pending
    renamed = index(config)
    assert renamed["parsed_documents"]["reused_parses"] >= 1  # the blob was parsed before
    # Only the new commit's text is embedded: the renamed file's chunks keep their vectors.
    assert renamed["embeddings"]["embedded"] <= 3, renamed["embeddings"]
    status = index_status(config).sources[0]
    assert status.pending is not None and status.pending.total == 0


def test_branch_switch_re_embeds_only_new_blobs_and_force_push_drops_commits(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "experiment")
    commit_files(
        repo,
        "Try a linear backoff",
        {
            "src/app/linear.py": 'def linear_delay(attempt: int) -> float:\n    """Wait one second more each try."""\n    return float(attempt)\n'
        },
        ("Bob Chen", "bob@example.com"),
        "2024-05-01T10:00:00+00:00",
    )
    config = parse_config_file(
        write_config(tmp_path, [git_source(repo, ref="main")], tmp_path / "data")
    )
    index(config)
    switched = parse_config_file(
        write_config(tmp_path, [git_source(repo, ref="experiment")], tmp_path / "data")
    )
    after = index(switched)
    # One new blob (linear.py) and one new commit: their chunks alone are embedded.
    assert after["parsed_documents"]["new"] == 2, after["parsed_documents"]
    new_sha = head_sha(repo)
    store = SearchEngine(switched).store
    new_chunks = store.count(
        "staged_chunks",
        "doc_id IN ("
        + ", ".join(
            sql_string(d)
            for d in store.read(
                "documents",
                where=f"path IN ('src/app/linear.py', '.git/commits/{new_sha}')",
                columns=["doc_id"],
            )
            .column("doc_id")
            .to_pylist()
        )
        + ")",
    )
    assert after["embeddings"]["embedded"] == new_chunks, after["embeddings"]
    assert after["embeddings"]["unchanged"] > 20 * new_chunks  # the rest kept its vectors

    dropped, added = force_push_rewrite(repo, drop=2, new=1, prune=True)
    rewritten = index(switched)
    store = SearchEngine(switched).store
    keys = set(store.read("files", columns=["path"]).column("path").to_pylist())
    for sha in dropped:
        assert f".git/commits/{sha}" not in keys
    assert f".git/commits/{added[0]}" in keys
    assert head_sha(repo) == added[0]
    titles = {h.title for h in SearchEngine(switched).search("linear backoff", mode="bm25").hits}
    assert "Try a linear backoff" not in titles
    assert rewritten["raw_files"]["deleted"] >= 2


def test_history_window_by_count_and_history_off(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    config = parse_config_file(
        write_config(tmp_path, [git_source(repo, history_max_commits=3)], tmp_path / "data")
    )
    index(config)
    store = SearchEngine(config).store
    assert store.count("files", "starts_with(path, '.git/commits/')") == 3
    off = parse_config_file(
        write_config(tmp_path, [git_source(repo, history=False)], tmp_path / "data")
    )
    index(off)
    assert SearchEngine(off).store.count("files", "starts_with(path, '.git/commits/')") == 0


def _day(text: str):
    from rag_serving.index.filters import parse_date

    return parse_date(text, "--after")


def test_bad_repositories_are_clear_and_never_fail_other_sources(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.py").write_text("x = 1\n")
    empty = tmp_path / "empty"
    git(tmp_path, "init", "-q", str(empty))
    repo = make_repo(tmp_path / "repo")
    config_path = write_config(
        tmp_path,
        [
            {"name": "plain", "kind": "git", "path": str(plain)},
            {"name": "empty", "kind": "git", "path": str(empty)},
            {"name": "good", "kind": "git", "path": str(repo), "history_months": 0},
        ],
        tmp_path / "data",
    )
    runner = CliRunner(env={"COLUMNS": "200"})
    out = runner.invoke(cli, ["--config", str(config_path), "index"])
    assert out.exit_code == 2
    assert "plain" in out.output and "is not a git repository" in out.output
    config = parse_config_file(config_path)
    outcomes = {o.source: o for o in index_sources(config, ["empty", "good"], full=False)}
    assert outcomes["empty"].success and outcomes["good"].success
    # the repository is moved away: that source's run fails, the index is kept
    shutil.move(repo / ".git", tmp_path / "moved.git")
    [failed] = index_sources(config, ["good"], full=False)
    assert not failed.success and "not a git repository" in (failed.error or "")
    assert SearchEngine(config).search("retry", mode="bm25").hits


ROOT = Path(__file__).resolve().parents[1]


def test_this_projects_repository(tmp_path: Path) -> None:
    """This repository itself (its search package and recent history): a function
    found by its purpose with its exact lines, and a commit by its message."""
    clone = tmp_path / "ragline"
    git(tmp_path, "clone", "-q", "--no-local", str(ROOT), str(clone))
    source = git_source(
        clone,
        include=["rag_serving/search/**/*.py", "rag_serving/index/filters.py"],
        history_max_commits=20,
    )
    config = parse_config_file(write_config(tmp_path, [source], tmp_path / "data"))
    index(config)
    engine = SearchEngine(config)
    hits = engine.search(
        "turn a path filter into a prefix of source-relative POSIX paths, refusing '..'",
        k=5,
        filters=SearchFilters(languages=("python",)),
    ).hits
    best = next(h for h in hits if h.symbol)
    assert (best.path, best.symbol) == ("rag_serving/index/filters.py", "normalize_path_prefix")
    lines = (clone / best.path).read_text().splitlines()
    defining = next(
        n for n, line in enumerate(lines, 1) if line.startswith("def normalize_path_prefix(")
    )
    assert best.line_start <= defining <= best.line_end
    assert lines[best.line_end - 1].strip().startswith("return")  # the chunk ends with the function

    subject = git(clone, "log", "-1", "--skip=3", "--format=%s").strip()
    sha = git(clone, "log", "-1", "--skip=3", "--format=%H").strip()
    found = engine.search(subject, k=5, filters=SearchFilters(types=("commit",))).hits
    assert f".git/commits/{sha}" in [h.path for h in found[:3]], (subject, [h.title for h in found])


def test_bare_shallow_detached_and_submodule_repositories(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    other = make_repo(tmp_path / "other")
    add_submodule(repo, other, "third/other")
    commit_files(
        repo,
        "Add a file the Python parser cannot read",
        {"src/app/broken.py": "def )))( broken:\n" + "%%% ((( ]]] ;;; @@@\n" * 40},
        ("Alice Martin", "alice@example.com"),
        "2024-04-02T10:00:00+00:00",
    )
    bare = bare_clone(repo, tmp_path / "bare.git")
    shallow = shallow_clone(repo, tmp_path / "shallow", depth=2)
    detached = tmp_path / "detached"
    git(tmp_path, "clone", "-q", str(repo), str(detached))
    git(detached, "checkout", "-q", "--detach", "HEAD~4")  # the merge
    config = parse_config_file(
        write_config(
            tmp_path,
            [
                {**git_source(repo), "name": "main"},
                {**git_source(bare), "name": "bare"},
                {**git_source(shallow), "name": "shallow"},
                {**git_source(detached), "name": "detached"},
            ],
            tmp_path / "data",
        )
    )
    outcomes = {o.source: o for o in index_sources(config, [], full=False)}
    assert all(o.success for o in outcomes.values()), {s: o.error for s, o in outcomes.items()}
    store = SearchEngine(config).store

    def keys(source: str) -> set[str]:
        where = f"source = {sql_string(source)} AND error IS NULL"
        return set(store.read("files", where=where, columns=["path"]).column("path").to_pylist())

    assert keys("bare") == keys("main")  # a bare repository is read as it is
    assert len([k for k in keys("shallow") if k.startswith(".git/commits/")]) == 2
    detached_head = git(detached, "rev-parse", "HEAD").strip()
    assert f".git/commits/{detached_head}" in keys("detached")
    assert "docs/retry.md" not in keys("detached")  # added after the detached commit
    issues = {i.path: i for i in index_status(config).sources[0].issues}
    assert "submodule" in issues["third/other"].message
    broken = issues["src/app/broken.py"]
    assert broken.severity == "warning" and "line windows" in broken.message
    assert (
        SearchEngine(config)
        .search("broken", mode="bm25", filters=SearchFilters(sources=("main",)))
        .hits
    )


def test_init_and_sources_add_detect_a_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "uploader")
    notes = tmp_path / "notes"
    (notes / ".obsidian").mkdir(parents=True)
    target = tmp_path / "ragline.toml"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(notes), "-o", str(target)]).exit_code == 0
    result = runner.invoke(cli, ["--config", str(target), "sources", "add", str(repo)])
    assert result.exit_code == 0, result.output
    assert "kind git" in result.output and "found .git" in result.output
    source = parse_config_file(target).sources[1]
    assert (source.name, source.kind, source.ref, source.history) == ("uploader", "git", None, True)
    with pytest.raises(ConfigError, match="not a git ref name"):
        parse_config_file(
            write_config(
                tmp_path,
                [{"name": "x", "kind": "git", "path": str(repo), "ref": "a b"}],
                tmp_path / "d",
            )
        )


def test_the_sensor_watches_the_refs_commit_not_the_working_tree(tmp_path: Path) -> None:
    from dagster import build_sensor_context, instance_for_test

    from rag_assets.resources import RaglineConfigResource
    from rag_assets.sensors.source_changes import build_source_changes_sensor

    repo = make_repo(tmp_path / "repo")
    config_path = write_config(tmp_path, [git_source(repo)], tmp_path / "data")
    sensor = build_source_changes_sensor(30)
    settings = {"settings": RaglineConfigResource(config_path=str(config_path))}

    def tick(cursor: str | None):
        return sensor(build_sensor_context(instance=instance, cursor=cursor, resources=settings))

    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["code"])
        first = tick(None)
        assert [r.partition_key for r in first.run_requests] == ["code"]
        assert head_sha(repo) in json.loads(first.cursor)["code"]
        (repo / "src/app/retry.py").write_text("# an edit not committed\n")
        (repo / "scratch.py").write_text("untracked = True\n")
        assert not tick(first.cursor).run_requests  # uncommitted work is not indexed
        git(repo, "checkout", "-q", "--", "src/app/retry.py")
        sha = commit_files(
            repo, "Commit the scratch file", {}, ("Bob Chen", "bob@example.com"),
            "2024-04-03T10:00:00+00:00",
        )  # fmt: skip
        after = tick(first.cursor)
        assert [r.partition_key for r in after.run_requests] == ["code"]
        assert sha in json.loads(after.cursor)["code"]
