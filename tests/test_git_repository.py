"""rag_sources.kinds.git: reading real repositories built with the git program, and the skip rules."""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from rag_sources.kinds.git.repository import RepositoryError, open_repository
from rag_sources.kinds.git.rules import (
    NO_ATTRIBUTES,
    UNDECODABLE_REASON,
    PathAttributes,
    content_skip_reason,
    entry_type_skip_reason,
    path_skip_reason,
)
from tests.git_repos import (
    ALICE,
    BOB,
    MAKE_REPO_HEAD_FILES,
    MAKE_REPO_SUBJECTS,
    add_submodule,
    bare_clone,
    commit_files,
    force_push_rewrite,
    git,
    head_sha,
    init_repo,
    make_many_commits,
    make_repo,
    sha_of,
    shallow_clone,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """make_repo's repository, shared by the tests that only read it."""
    return make_repo(tmp_path_factory.mktemp("git") / "project")


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    """make_repo's repository for a test that changes it."""
    return make_repo(tmp_path / "project")


def numstat(path: Path, sha: str) -> dict[str, tuple[int | None, int | None, str | None]]:
    """git's own per-file +/- lines of ``sha`` against its first parent (renames on):
    path -> (additions, deletions, old path); None counts for a binary file."""
    parents = git(path, "rev-list", "--parents", "-n1", sha).split()[1:]
    base = [parents[0], sha] if parents else ["--root", sha]
    out = git(path, "diff-tree", "-r", "-z", "--numstat", "-M", "--no-commit-id", *base)
    fields = out.split("\0")
    result: dict[str, tuple[int | None, int | None, str | None]] = {}
    i = 0
    while i < len(fields) - 1:
        adds, dels, name = fields[i].split("\t")
        old = None
        if name == "":  # a rename: old and new paths follow
            old, name = fields[i + 1], fields[i + 2]
            i += 3
        else:
            i += 1
        result[name] = (
            None if adds == "-" else int(adds),
            None if dels == "-" else int(dels),
            old,
        )
    return result


def our_numstat(info) -> dict[str, tuple[int | None, int | None, str | None]]:
    return {
        c.path: (None, None, c.old_path) if c.binary else (c.additions, c.deletions, c.old_path)
        for c in info.changes
    }


# --- opening --------------------------------------------------------------------------


def test_a_folder_that_is_not_a_repository_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    with pytest.raises(RepositoryError) as err:
        open_repository(tmp_path / "notes")
    text = str(err.value)
    assert "\n" not in text
    assert f"{tmp_path / 'notes'} is not a git repository (no .git folder)" in text
    assert 'kind = "documents"' in text


def test_a_missing_folder_and_a_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="does not exist; fix `path`"):
        open_repository(tmp_path / "nowhere")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(RepositoryError, match="is a file, not a folder"):
        open_repository(tmp_path / "file.txt")


def test_a_subfolder_of_a_repository_names_the_top_and_never_opens_the_outer_one(
    built: Path,
) -> None:
    with pytest.raises(RepositoryError) as err:
        open_repository(built / "src" / "app")
    text = str(err.value)
    assert f"is inside the git repository {built}, not its top folder" in text
    assert 'include = ["src/app/**"]' in text


def test_a_repository_nested_in_another_opens_itself(tmp_path: Path) -> None:
    outer = make_repo(tmp_path / "outer")
    inner = init_repo(outer / "tools" / "inner")
    sha = commit_files(inner, "Inner commit", {"inner.txt": "inside\n"})
    repo = open_repository(inner)
    assert repo.info.path == inner
    assert repo.resolve(None) == sha
    assert [e.path for e in repo.tree_entries(sha)] == ["inner.txt"]


def test_the_dot_git_folder_opens_its_repository(built: Path) -> None:
    repo = open_repository(built / ".git")
    assert repo.info.path == built
    assert repo.info.git_dir == built / ".git"
    assert repo.resolve(None) == head_sha(built)


def test_a_linked_worktree_opens_with_its_own_head(fresh: Path, tmp_path: Path) -> None:
    git(fresh, "worktree", "add", "-q", str(tmp_path / "wt"), "feature/search")
    repo = open_repository(tmp_path / "wt")
    assert repo.info.path == tmp_path / "wt"
    assert repo.info.head_ref == "refs/heads/feature/search"
    assert repo.resolve(None) == sha_of(fresh, MAKE_REPO_SUBJECTS[3])


def test_a_broken_dot_git_folder_is_reported(tmp_path: Path) -> None:
    (tmp_path / "broken" / ".git").mkdir(parents=True)
    with pytest.raises(RepositoryError, match=r"\.git is not a valid git repository"):
        open_repository(tmp_path / "broken")


def test_a_repository_owned_by_another_user_gets_the_safe_directory_advice(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "theirs")
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(repo):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), 12345, 12345)
        os.lchown(repo, 12345, 12345)
        with pytest.raises(RepositoryError) as err:
            open_repository(repo)
        text = str(err.value)
    else:  # files cannot be given away without root: libgit2's own message, mapped
        from rag_sources.kinds.git.repository import _open_error

        text = str(_open_error(repo, f"repository path '{repo}' is not owned by current user"))
    assert "dubious ownership" in text
    assert f"git config --global --add safe.directory {repo}" in text


# --- repository shapes --------------------------------------------------------------------


def test_info_of_a_normal_repository(built: Path) -> None:
    info = open_repository(built).info
    assert (info.path, info.bare, info.shallow, info.empty, info.detached) == (
        built,
        False,
        False,
        False,
        False,
    )
    assert info.head_ref == "refs/heads/main"


def test_a_bare_clone_lists_the_same_tree_and_history(built: Path, tmp_path: Path) -> None:
    bare = bare_clone(built, tmp_path / "project.git")
    repo, source = open_repository(bare), open_repository(built)
    assert repo.info.bare and repo.info.path == bare and repo.info.head_ref == "refs/heads/main"
    head = repo.resolve(None)
    assert head == source.resolve(None)
    assert list(repo.tree_entries(head)) == list(source.tree_entries(head))
    assert repo.commit_ids(head) == source.commit_ids(head)


def test_a_shallow_clone_ends_its_history_at_the_boundary_without_error(
    built: Path, tmp_path: Path
) -> None:
    clone = shallow_clone(built, tmp_path / "shallow", depth=2)
    repo = open_repository(clone)
    assert repo.info.shallow
    head = repo.resolve(None)
    ids = [sha for sha, _ in repo.commit_ids(head)]
    assert ids == git(built, "rev-list", "-2", "HEAD").split()
    assert repo.commit_ids(head, since=datetime(2000, 1, 1, tzinfo=UTC)) == repo.commit_ids(head)
    newest, boundary = (repo.commit(sha) for sha in ids)
    assert not newest.shallow_boundary and newest.changes  # its parent is in the clone
    assert boundary.shallow_boundary
    assert boundary.changes == () and boundary.patch is None
    # The parent it really has, though the clone does not hold it.
    assert boundary.parents == (sha_of(built, MAKE_REPO_SUBJECTS[5]),)
    assert not repo.has_commit(boundary.parents[0])
    # The whole tree is there.
    assert {e.path for e in repo.tree_entries(head)} == set(MAKE_REPO_HEAD_FILES)


def test_a_detached_head(fresh: Path) -> None:
    target = sha_of(fresh, MAKE_REPO_SUBJECTS[2])
    git(fresh, "checkout", "-q", "--detach", target)
    repo = open_repository(fresh)
    assert repo.info.detached and repo.info.head_ref is None
    assert repo.resolve(None) == target
    assert repo.resolve("main") == head_sha(fresh, "main")


def test_an_empty_repository_resolves_to_nothing_without_error(tmp_path: Path) -> None:
    repo = open_repository(init_repo(tmp_path / "empty"))
    assert repo.info.empty and repo.info.head_ref is None and not repo.info.detached
    assert repo.resolve(None) is None
    assert repo.resolve("main") is None


def test_head_on_a_branch_without_commits_names_the_branches_that_have_some(
    fresh: Path,
) -> None:
    git(fresh, "checkout", "-q", "--orphan", "gh-pages")
    repo = open_repository(fresh)
    with pytest.raises(RepositoryError) as err:
        repo.resolve(None)
    assert "HEAD is the branch 'gh-pages', which has no commits yet" in str(err.value)
    assert "feature/search, main" in str(err.value)


def test_refs_resolve_to_commits_and_unknown_ones_list_close_matches(fresh: Path) -> None:
    git(
        fresh,
        "tag",
        "-a",
        "v1.0",
        "-m",
        "Release 1.0",
        "HEAD~1",
        env={"GIT_COMMITTER_DATE": "2024-05-01T00:00:00+00:00"},
    )
    git(fresh, "tag", "tree-tag", "HEAD^{tree}")
    repo = open_repository(fresh)
    assert repo.resolve("v1.0") == head_sha(fresh, "HEAD~1")  # annotated tag peeled
    assert repo.resolve("feature/search") == sha_of(fresh, MAKE_REPO_SUBJECTS[3])
    assert repo.resolve("HEAD~2") == head_sha(fresh, "HEAD~2")
    short = head_sha(fresh)[:10]
    assert repo.resolve(short) == head_sha(fresh)
    with pytest.raises(RepositoryError) as err:
        repo.resolve("mian")
    assert "ref 'mian' not found in the repository; did you mean main?" in str(err.value)
    assert str(fresh) not in str(err.value)  # messages reach remote MCP callers
    with pytest.raises(RepositoryError, match="did you mean feature/search"):
        repo.resolve("feature/serch")
    with pytest.raises(RepositoryError, match=r"did you mean v1\.0"):
        repo.resolve("v1.1")
    with pytest.raises(RepositoryError, match="is a tree, not a commit"):
        repo.resolve("tree-tag")


def test_a_ref_that_moves_is_seen_by_an_open_repository(fresh: Path) -> None:
    repo = open_repository(fresh)
    before = repo.resolve(None)
    after = commit_files(
        fresh, "One more", {"more.txt": "more\n"}, BOB, "2024-04-01T00:00:00+00:00"
    )
    assert before != after
    assert repo.resolve(None) == after
    assert repo.commit_ids(after)[0][0] == after


# --- trees and blobs ----------------------------------------------------------------------


def test_tree_entries_match_git_ls_tree(built: Path) -> None:
    repo = open_repository(built)
    head = repo.resolve(None)
    entries = list(repo.tree_entries(head))
    assert [e.path for e in entries] == sorted(MAKE_REPO_HEAD_FILES)
    listed = {}
    for line in git(built, "ls-tree", "-r", "-l", "HEAD").splitlines():
        meta, path = line.split("\t")
        mode, _, blob_id, size = meta.split()
        listed[path] = (int(mode, 8), blob_id, int(size))
    assert {e.path: (e.mode, e.blob_id, e.size) for e in entries} == listed
    by_path = {e.path: e for e in entries}
    assert by_path["docs/latest.md"].type == "link"
    assert repo.read_blob(by_path["docs/latest.md"].blob_id) == b"retry.md"
    assert by_path["src/app/retry.py"].type == "blob"
    retry = repo.read_blob(by_path["src/app/retry.py"].blob_id)
    assert b"def backoff_delay" in retry
    assert repo.blob_size(by_path["src/app/retry.py"].blob_id) == len(retry)
    # An older commit has the file under its old name.
    first = sha_of(built, MAKE_REPO_SUBJECTS[0])
    assert "src/app/helpers.py" in {e.path for e in repo.tree_entries(first)}


def test_a_submodule_is_typed_and_pins_its_commit(built: Path, tmp_path: Path) -> None:
    library = make_repo(tmp_path / "library")
    host = make_repo(tmp_path / "host")
    add_submodule(host, library, "libs/library")
    repo = open_repository(host)
    entries = {e.path: e for e in repo.tree_entries(repo.resolve(None))}
    sub = entries["libs/library"]
    assert sub.type == "submodule" and sub.size is None and sub.mode == 0o160000
    assert sub.blob_id == head_sha(library)
    assert entries[".gitmodules"].type == "blob"
    assert not any(p.startswith("libs/library/") for p in entries)
    # The submodule's checkout (its .git is a file pointing into the host's .git) opens
    # as its own repository, not as the host.
    inner = open_repository(host / "libs" / "library")
    assert inner.info.path == host / "libs" / "library"
    assert inner.resolve(None) == head_sha(library)
    assert "submodule" in entry_type_skip_reason("submodule")
    assert "symbolic link" in entry_type_skip_reason("link")
    assert entry_type_skip_reason("blob") is None


def test_a_path_with_a_dot_git_component_is_never_listed(fresh: Path) -> None:
    config = git(
        fresh, "hash-object", "-w", "--stdin", input=b"[core]\n\tfsmonitor = evil\n"
    ).strip()
    inner = git(fresh, "mktree", input=f"100644 blob {config}\tconfig\n".encode()).strip()
    readme = git(fresh, "rev-parse", "HEAD:README.md").strip()
    outer = git(
        fresh,
        "mktree",
        input=(
            f"040000 tree {inner}\t.GIT\n100644 blob {readme}\tREADME.md\n"
            f"040000 tree {inner}\tsub\n"
        ).encode(),
    ).strip()
    crafted = git(fresh, "commit-tree", outer, "-m", "crafted").strip()
    paths = [e.path for e in open_repository(fresh).tree_entries(crafted)]
    assert paths == ["README.md", "sub/config"]


def test_a_file_name_that_is_not_utf8_round_trips_and_is_reported(fresh: Path) -> None:
    name = b"caf\xe9.txt"
    with open(os.path.join(os.fsencode(fresh), name), "wb") as handle:
        handle.write(b"latin-1 name\n")
    sha = commit_files(fresh, "Add a file with a Latin-1 name")
    repo = open_repository(fresh)
    odd = [e for e in repo.tree_entries(sha) if e.path.startswith("caf")]
    assert len(odd) == 1
    assert odd[0].path.encode("utf-8", "surrogateescape") == name
    assert path_skip_reason(odd[0].path, odd[0].size, 1_000_000) == UNDECODABLE_REASON
    change = repo.commit(sha).changes[0]
    assert change.path.encode("utf-8", "surrogateescape") == name


def test_a_missing_object_is_a_clear_error(built: Path) -> None:
    repo = open_repository(built)
    with pytest.raises(RepositoryError, match="is missing from"):
        repo.read_blob("0" * 40)
    with pytest.raises(RepositoryError, match="is not in"):
        repo.commit("0" * 40)
    assert not repo.has_commit("0" * 40)
    assert repo.has_commit(repo.resolve(None))


# --- history --------------------------------------------------------------------------


def test_commit_ids_cover_merged_branches_newest_first(built: Path) -> None:
    repo = open_repository(built)
    head = repo.resolve(None)
    ids = repo.commit_ids(head)
    assert [sha for sha, _ in ids] == git(built, "rev-list", "HEAD").split()
    assert len(ids) == len(MAKE_REPO_SUBJECTS)
    assert sha_of(built, MAKE_REPO_SUBJECTS[3]) in dict(ids)  # on the merged branch
    dates = [when for _, when in ids]
    assert dates == sorted(dates, reverse=True)
    assert ids[0][1] == datetime(2024, 3, 12, 8, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert ids[0][1].utcoffset() == timedelta(hours=-5)
    assert [sha for sha, _ in repo.commit_ids(head, max_count=3)] == [s for s, _ in ids[:3]]
    since = datetime(2024, 3, 2, tzinfo=UTC)
    windowed = repo.commit_ids(head, since=since)
    assert [s for s, _ in windowed] == git(
        built, "rev-list", "--since=2024-03-02T00:00:00Z", "HEAD"
    ).split()
    assert len(windowed) == 4
    assert repo.commit_ids(head, since=since.replace(tzinfo=None)) == windowed
    assert repo.commit_ids(head, max_count=0) == []


def test_a_commit_with_a_wrong_clock_does_not_end_the_window_early(tmp_path: Path) -> None:
    path = init_repo(tmp_path / "skew")
    commit_files(path, "January", {"a.txt": "1\n"}, ALICE, "2024-01-10T00:00:00+00:00")
    march = commit_files(path, "March", {"a.txt": "2\n"}, ALICE, "2024-03-10T00:00:00+00:00")
    commit_files(path, "Clock wrong", {"a.txt": "3\n"}, BOB, "2023-01-01T00:00:00+00:00")
    april = commit_files(path, "April", {"a.txt": "4\n"}, ALICE, "2024-04-10T00:00:00+00:00")
    repo = open_repository(path)
    since = datetime(2024, 2, 1, tzinfo=UTC)
    ids = [sha for sha, _ in repo.commit_ids(april, since=since)]
    assert ids == [april, march]
    # (`git rev-list --since` stops at the wrong clock and gives April alone.)
    assert git(path, "rev-list", "--since=2024-02-01T00:00:00Z", "HEAD").split() == [april]
    # Past the slack (five older commits in a row) the walk stops.
    for i in range(6):
        commit_files(path, f"Old {i}", {"a.txt": f"old {i}\n"}, BOB, "2023-01-01T00:00:00+00:00")
    newest = commit_files(path, "May", {"a.txt": "5\n"}, ALICE, "2024-05-10T00:00:00+00:00")
    assert [sha for sha, _ in repo.commit_ids(newest, since=since)] == [newest]


def test_commit_details_authors_dates_and_messages(built: Path) -> None:
    repo = open_repository(built)
    info = repo.commit(sha_of(built, MAKE_REPO_SUBJECTS[1]))
    assert (info.author_name, info.author_email) == BOB
    assert info.authored_at == datetime(2024, 2, 3, 14, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert info.authored_at.utcoffset() == timedelta(hours=-5)
    assert info.committed_at == info.authored_at
    assert info.subject == "Retry uploads with exponential backoff"
    assert info.message.startswith(info.subject + "\n\nTransient storage errors")
    assert [(c.path, c.status) for c in info.changes] == [("src/app/retry.py", "modified")]
    assert info.patch is not None and "+def backoff_delay" in info.patch
    assert "diff --git a/src/app/retry.py b/src/app/retry.py" in info.patch
    assert info.truncated_changes == 0
    carol = repo.commit(sha_of(built, MAKE_REPO_SUBJECTS[3]))
    assert carol.author_name == "Carol Díaz"
    assert carol.authored_at.utcoffset() == timedelta(hours=5, minutes=30)


def test_rename_deletion_root_and_merge_against_the_first_parent(built: Path) -> None:
    repo = open_repository(built)
    rename = repo.commit(sha_of(built, MAKE_REPO_SUBJECTS[2]))
    assert [(c.status, c.path, c.old_path, c.additions, c.deletions) for c in rename.changes] == [
        ("renamed", "src/app/text_utils.py", "src/app/helpers.py", 0, 0)
    ]
    deletion = repo.commit(sha_of(built, MAKE_REPO_SUBJECTS[4]))
    assert [(c.status, c.path, c.deletions) for c in deletion.changes] == [
        ("deleted", "notes/old.md", 3)
    ]
    root = repo.commit(sha_of(built, MAKE_REPO_SUBJECTS[0]))
    assert root.parents == ()
    assert {c.status for c in root.changes} == {"added"}
    assert len(root.changes) == 8
    merge = repo.commit(sha_of(built, MAKE_REPO_SUBJECTS[5]))
    assert merge.parents == (
        sha_of(built, MAKE_REPO_SUBJECTS[4]),
        sha_of(built, MAKE_REPO_SUBJECTS[3]),
    )
    assert [(c.status, c.path) for c in merge.changes] == [
        ("added", "search/Cargo.toml"),
        ("added", "search/src/lib.rs"),
    ]
    binary = repo.commit(sha_of(built, MAKE_REPO_SUBJECTS[7]))
    logo = next(c for c in binary.changes if c.path == "assets/logo.png")
    assert logo.binary and (logo.additions, logo.deletions) == (0, 0)
    link = next(c for c in binary.changes if c.path == "docs/latest.md")
    assert not link.binary and link.additions == 1


def test_line_counts_equal_git_numstat_for_every_commit(built: Path) -> None:
    repo = open_repository(built)
    for sha, _ in repo.commit_ids(repo.resolve(None)):
        assert our_numstat(repo.commit(sha)) == numstat(built, sha), sha


def test_patch_text_only_for_small_commits_and_changes_capped(fresh: Path) -> None:
    big = "\n".join(f"line {i}" for i in range(500)) + "\n"
    sha = commit_files(
        fresh, "Add a big file", {"big.txt": big}, ALICE, "2024-04-01T00:00:00+00:00"
    )
    repo = open_repository(fresh)
    info = repo.commit(sha)
    assert info.changes[0].additions == 500
    assert info.patch is None  # 500 lines > 400
    assert repo.commit(sha, patch_limit=1000).patch.count("\n+line ") == 500
    assert repo.commit(sha, patch_limit=1000, patch_max_bytes=1000).patch is None
    many = commit_files(
        fresh,
        "Touch five files",
        {f"many/{i}.txt": f"{i}\n" for i in range(5)},
        ALICE,
        "2024-04-02T00:00:00+00:00",
    )
    capped = repo.commit(many, max_files=2)
    assert [c.path for c in capped.changes] == ["many/0.txt", "many/1.txt"]
    assert capped.truncated_changes == 3
    assert capped.patch is None  # not all files listed: no partial patch
    whole = repo.commit(many)
    assert len(whole.changes) == 5 and whole.truncated_changes == 0
    assert whole.patch is not None and whole.patch.count("diff --git") == 5


def test_commits_that_are_not_utf8_are_decoded_without_error(fresh: Path) -> None:
    # Declared Latin-1 (git writes an "encoding" header): decoded with it.
    (fresh / "latin.txt").write_text("x\n")
    git(fresh, "add", "latin.txt")
    git(
        fresh,
        "-c",
        "i18n.commitEncoding=ISO-8859-1",
        "commit",
        "-q",
        "-F",
        "-",
        env={"GIT_AUTHOR_NAME": "Ren\xe9 Caf\xe9"},
        input="Caf\xe9 cr\xe8me\n".encode("latin-1"),
    )
    declared = open_repository(fresh).commit(head_sha(fresh))
    assert declared.subject == "Café crème"
    # Undeclared bytes that are not UTF-8: replaced, never an exception.
    tree = git(fresh, "rev-parse", "HEAD^{tree}").strip()
    raw = (
        f"tree {tree}\nparent {head_sha(fresh)}\n".encode()
        + b"author Ren\xe9 <rene@example.com> 1700000000 +0200\n"
        + b"committer Ren\xe9 <rene@example.com> 1700000000 +0200\n\nCaf\xe9 au lait\n\nbody \xff\n"
    )
    odd = git(
        fresh, "hash-object", "-t", "commit", "-w", "--stdin", "--literally", input=raw
    ).strip()
    info = open_repository(fresh).commit(odd)
    assert info.author_name == "Ren\ufffd"
    assert info.subject == "Caf\ufffd au lait"
    assert info.message == "Caf\ufffd au lait\n\nbody \ufffd\n"
    assert info.authored_at == datetime(
        2023, 11, 15, 0, 13, 20, tzinfo=timezone(timedelta(hours=2))
    )


def test_after_a_force_push_the_old_commits_are_no_longer_listed(fresh: Path) -> None:
    repo = open_repository(fresh)
    before = {sha for sha, _ in repo.commit_ids(repo.resolve(None))}
    dropped, added = force_push_rewrite(fresh, drop=2, new=2, prune=True)
    assert set(dropped) <= before
    # The handle opened before the rewrite follows the ref...
    after = {sha for sha, _ in repo.commit_ids(repo.resolve(None))}
    assert not set(dropped) & after
    assert set(added) <= after
    assert len(after) == len(before)
    # ...and one opened after the gc no longer finds the dropped objects at all (an
    # older handle may still read them from the pack it had mapped).
    reopened = open_repository(fresh)
    assert {sha for sha, _ in reopened.commit_ids(reopened.resolve(None))} == after
    for sha in dropped:
        assert not reopened.has_commit(sha)
        with pytest.raises(RepositoryError, match="rewritten history"):
            reopened.commit(sha)


def test_many_commits_are_built_fast_and_read_exactly(tmp_path: Path) -> None:
    start = time.perf_counter()
    path = make_many_commits(tmp_path / "many", 1000)
    assert time.perf_counter() - start < 20  # about 0.3 s here; a git per commit takes 10x
    repo = open_repository(path)
    ids = repo.commit_ids(repo.resolve(None))
    assert len(ids) == 1000
    assert [sha for sha, _ in ids] == git(path, "rev-list", "HEAD").split()
    renamed = 0
    renames = [ids[1000 - k] for k in (211, 422, 633, 844)]  # newest first: commit k at 1000-k
    for sha, _ in ids[::7] + renames:
        info = repo.commit(sha)
        assert our_numstat(info) == numstat(path, sha), sha
        renamed += any(c.status == "renamed" for c in info.changes)
    assert renamed == 4


# --- .gitattributes ---------------------------------------------------------------------


def test_gitattributes_of_the_commit_mark_vendored_generated_and_binary(tmp_path: Path) -> None:
    path = init_repo(tmp_path / "attrs")
    marked = commit_files(
        path,
        "Files with attributes",
        {
            ".gitattributes": "gen/** linguist-generated\n*.dat binary\nlib/** linguist-vendored\n",
            "gen/api.py": "x = 1\n",
            "data/table.dat": "1,2\n",
            "lib/dep.py": "y = 2\n",
            "vendor/ours/.gitattributes": "*.py -linguist-vendored\n",
            "vendor/ours/code.py": "z = 3\n",
            "src/main.py": "print(1)\n",
        },
    )
    unmarked = commit_files(path, "Drop the root attributes", {".gitattributes": None})
    repo = open_repository(path)
    assert repo.attributes(marked, "gen/api.py") == PathAttributes(None, True, None)
    assert repo.attributes(marked, "data/table.dat").binary is True
    assert repo.attributes(marked, "lib/dep.py").vendored is True
    assert repo.attributes(marked, "src/main.py") == NO_ATTRIBUTES
    ours = repo.attributes(marked, "vendor/ours/code.py")
    assert ours.vendored is False
    assert path_skip_reason("vendor/ours/code.py", 6, 10_000, ours) is None
    assert path_skip_reason("vendor/ours/code.py", 6, 10_000) == "vendored code (under vendor/)"
    assert "linguist-generated" in path_skip_reason(
        "gen/api.py", 6, 10_000, repo.attributes(marked, "gen/api.py")
    )
    assert "binary" in path_skip_reason(
        "data/table.dat", 4, 10_000, repo.attributes(marked, "data/table.dat")
    )
    assert "linguist-vendored" in path_skip_reason(
        "lib/dep.py", 6, 10_000, repo.attributes(marked, "lib/dep.py")
    )
    # The attributes of the commit asked about, not of the work tree or HEAD.
    assert repo.attributes(unmarked, "gen/api.py") == NO_ATTRIBUTES
    assert repo.attributes(marked, "gen/api.py").generated is True
    # A repository without any .gitattributes answers without a lookup.
    plain = open_repository(make_repo(tmp_path / "plain"))
    head = plain.resolve(None)
    assert plain.attributes(head, "web/app.min.js") == NO_ATTRIBUTES


# --- rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("node_modules/left-pad/index.js", "vendored code (under node_modules/)"),
        ("web/vendor/jquery.js", "vendored code (under vendor/)"),
        ("third_party/zlib/inflate.c", "vendored code (under third_party/)"),
        ("ios/Pods/AFNetworking/AF.m", "vendored code (under Pods/)"),
        (".yarn/releases/yarn-4.js", "vendored code (under .yarn/)"),
        ("lib/python3.12/site-packages/six.py", "vendored code (under site-packages/)"),
        ("bower_components/x/y.js", "vendored code (under bower_components/)"),
        ("static/app.min.js", "generated file (minified)"),
        ("static/app.min.css", "generated file (minified)"),
        ("static/app.js.map", "generated file (source map)"),
        ("api/service_pb2.py", "generated file (protocol buffers output)"),
        ("api/service.pb.go", "generated file (protocol buffers output)"),
        ("lib/model.g.dart", "generated file (Dart code generation output)"),
        ("package-lock.json", "generated file (lock file)"),
        ("web/yarn.lock", "generated file (lock file)"),
        ("pnpm-lock.yaml", "generated file (lock file)"),
        ("Cargo.lock", "generated file (lock file)"),
        ("poetry.lock", "generated file (lock file)"),
        ("go.sum", "generated file (lock file)"),
        ("uv.lock", "generated file (lock file)"),
        ("assets/logo.PNG", "binary file (image, .png)"),
        ("media/intro.mp4", "binary file (video, .mp4)"),
        ("sounds/beep.wav", "binary file (audio, .wav)"),
        ("dist/release.tar.gz", "binary file (archive, .gz)"),
        ("fonts/Inter.woff2", "binary file (font, .woff2)"),
        ("build/app.exe", "binary file (executable or object code, .exe)"),
        ("lib/native.so", "binary file (executable or object code, .so)"),
        ("models/net.onnx", "binary file (binary data, .onnx)"),
    ],
)
def test_path_rules(path: str, expected: str) -> None:
    assert path_skip_reason(path, 100, 1_000_000) == expected


@pytest.mark.parametrize(
    "path",
    [
        "src/app/retry.py",
        "server/main.go",
        "README.md",
        "docs/vendor-notes.md",  # "vendor" in a name, not a folder
        "vendor.go",
        "src/map.rs",
        "Makefile",
        ".gitignore",
        "tools/build.sh",  # linguist calls tools/ vendored; people write it
        "dist/index.html",
        "images/diagram.svg",  # text
    ],
)
def test_ordinary_files_are_indexed(path: str) -> None:
    assert path_skip_reason(path, 1000, 1_000_000) is None


def test_documents_are_sent_to_a_documents_source_and_the_size_cap_names_its_key() -> None:
    assert path_skip_reason("papers/design.pdf", 10, 1_000_000) == (
        "a PDF document; index documents with a `documents` source on the same folder"
    )
    assert "a Word document" in path_skip_reason("specs/spec.docx", 10, 1_000_000)
    too_big = path_skip_reason("data/huge.json", 2_500_000, 1_000_000)
    assert too_big == (
        "larger than max_file_bytes (2,500,000 > 1,000,000 bytes); raise max_file_bytes in the "
        "source's config to index it"
    )
    assert path_skip_reason("data/exact.json", 1_000_000, 1_000_000) is None
    assert path_skip_reason("data/unknown-size.json", None, 1_000_000) is None


def test_content_rules_binary_minified_and_generated_markers() -> None:
    assert content_skip_reason("data.txt", b"abc\x00def") == (
        "binary content (NUL bytes in the first 8,000 bytes)"
    )
    assert content_skip_reason("late.txt", b"a" * 9000 + b"\x00") is None
    bundle = ("var a=" + "x+" * 3000 + "1;").encode()
    assert content_skip_reason("bundle.js", bundle).startswith("minified or machine-written code")
    wide = b"\n".join(b"k" * 400 for _ in range(20))
    assert "averaging 400 characters" in content_skip_reason("data.json", wide)
    markers = {
        "zz_generated.go": "// Code generated by controller-gen. DO NOT EDIT.\n\npackage v1\n",
        "Lock.swift": "// " + "@" + "generated by a tool\nlet x = 1\n",
        "Form.cs": "//------\n// <" + "auto-generated>\n//   This code was generated.\n",
        "api_pb2.py": "# -*- coding: utf-8 -*-\n# Generated by the protocol buffer compiler.  DO NOT EDIT!\n",
        "schema.sql": "-- This file is auto-generated from models.py; do not edit it by hand.\n",
        "parser.c": "/* Generated by Cython 3.0 */\n",
    }
    for name, text in markers.items():
        reason = content_skip_reason(name, text.encode())
        assert reason is not None and reason.startswith("generated file (marked on line"), name
    assert "line 2" in content_skip_reason("Form.cs", markers["Form.cs"].encode())


def test_content_rules_leave_prose_and_ordinary_code_alone() -> None:
    prose = ("One long paragraph of prose. " * 40 + "\n\n") * 10
    assert content_skip_reason("notes/essay.md", prose.encode()) is None
    # Markdown that mentions a marker is documentation, not generated.
    assert (
        content_skip_reason("README.md", b"# Codegen\n// Code generated by x. DO NOT EDIT.\n")
        is None
    )
    # Code that holds a marker in a string is not generated.
    quoting = b'MARKER = "// Code generated by x. DO NOT EDIT."\n'
    assert content_skip_reason("check.py", quoting) is None
    assert content_skip_reason("retry.py", make_repo.__doc__.encode()) is None
    # This project's own sources, which spell out the patterns, are not skipped.
    for own in (
        "rag_sources/kinds/git/rules.py",
        "rag_sources/kinds/git/repository.py",
        "tests/test_git_repository.py",
        "tests/git_repos.py",
    ):
        assert content_skip_reason(own, (REPO / own).read_bytes()) is None, own
        assert path_skip_reason(own, 1000, 1_000_000) is None, own
    assert content_skip_reason("notes.py", b"") is None


def test_generated_marker_off_when_gitattributes_say_not_generated() -> None:
    text = b"// Code generated by hand-rolled tool. DO NOT EDIT.\npackage x\n"
    assert content_skip_reason("x.go", text) is not None
    assert content_skip_reason("x.go", text, PathAttributes(generated=False)) is None
    assert path_skip_reason("x.min.js", 10, 100, PathAttributes(generated=False)) is None


def test_the_rules_on_make_repo_match_its_documented_expectations(built: Path) -> None:
    repo = open_repository(built)
    head = repo.resolve(None)
    seen = {}
    for entry in repo.tree_entries(head):
        reason = entry_type_skip_reason(entry.type) or path_skip_reason(
            entry.path, entry.size, 1_000_000
        )
        if reason is None:
            reason = content_skip_reason(entry.path, repo.read_blob(entry.blob_id))
        seen[entry.path] = reason
    for path, expected in MAKE_REPO_HEAD_FILES.items():
        if expected is None:
            assert seen[path] is None, (path, seen[path])
        else:
            assert seen[path] is not None and expected in seen[path], (path, seen[path])


def test_shallow_copy_of_fixture_is_independent(built: Path, tmp_path: Path) -> None:
    """copytree of a built repository is a usable repository (cheaper than rebuilding)."""
    copy = Path(shutil.copytree(built, tmp_path / "copy", symlinks=True))
    repo = open_repository(copy)
    assert repo.info.path == copy
    assert repo.resolve(None) == head_sha(built)


# --- damaged objects ------------------------------------------------------------------


def test_a_truncated_loose_object_is_reported_as_damaged_not_read_forever(
    tmp_path: Path,
) -> None:
    # libgit2 1.9 loops forever inflating a truncated loose object (libgit2#7342): the
    # read runs in a child process so that the unfixed code fails by a timeout here.
    import subprocess
    import sys

    repo = init_repo(tmp_path / "repo")
    text = "\n".join(f"{i * 7919 % 100_003:x} {i * 104729 % 99_991:x}" for i in range(4000))
    commit_files(repo, "first", {"big.txt": text, "sub/small.py": "x = 1\n"})
    blob = git(repo, "rev-parse", "HEAD:big.txt").strip()
    tree = git(repo, "rev-parse", "HEAD:sub").strip()
    for oid in (blob, tree):
        loose = repo / ".git" / "objects" / oid[:2] / oid[2:]
        loose.chmod(0o644)
        loose.write_bytes(loose.read_bytes()[: 30 if oid == tree else 200])
    script = (
        "import sys\n"
        "from rag_sources.kinds.git.repository import RepositoryError, open_repository\n"
        "repo = open_repository(sys.argv[1])\n"
        "head = repo.resolve(None)\n"
        "try:\n"
        "    repo.read_blob(sys.argv[2])\n"
        "except RepositoryError as exc:\n"
        "    print(exc)\n"
        "print([(e.path, e.type, e.problem) for e in repo.tree_entries(head)])\n"
        "try:\n"
        "    repo.commit(head)\n"
        "except RepositoryError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(repo), blob],
        capture_output=True, text=True, timeout=30, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    error, listing, diff = done.stdout.splitlines()
    assert error.startswith(f"the repository's object {blob} is damaged (truncated")
    assert "`git fsck`" in error and str(tmp_path) not in error
    assert "('big.txt', 'blob', None)" in listing  # its header is readable
    assert f"('sub/', 'damaged', \"the repository's object {tree} is damaged" in listing
    assert f"the repository's object {tree} is damaged" in diff  # the commit's diff
