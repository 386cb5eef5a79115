"""Code answers before history (issue 31): a repository built with git in the test,
indexed by the Dagster job with its commits, searched with the bundled model — code
above the commit that touched it for a "where is" question, the commit first for a
"when did" one, a test file below the code it tests, and a hit in a chunk of several
small definitions pointing at the matching one's own lines."""

from __future__ import annotations

import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.search.code_ranking import chunk_role, query_intent, symbol_lines
from rag_serving.search.engine import SearchEngine, SearchHit
from ragline.indexing import index_sources
from tests.conftest import write_config
from tests.git_repos import BOB, commit_files, init_repo

SETTINGS = '''"""Where the client's settings come from."""

import os

DEFAULT_TIMEOUT = 30


def merge_environment_settings(url, proxies, verify, cert):
    """The settings of a request merged with the environment: with verify left on,
    the CA bundle is read from REQUESTS_CA_BUNDLE, then CURL_CA_BUNDLE."""
    if verify is True or verify is None:
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    proxies = dict(proxies or {})
    for scheme in ("http", "https"):
        proxies.setdefault(scheme, os.environ.get(scheme + "_proxy"))
    return {"verify": verify, "proxies": proxies, "cert": cert}
'''

SETTINGS_BEFORE = SETTINGS.replace(
    'verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")',
    'verify = os.environ.get("REQUESTS_CA_BUNDLE")',
)

ERRORS = '''"""What the client raises."""


class ClientError(Exception):
    """Something went wrong with a request."""


class ConnectTimeout(ClientError):
    """Connecting to the server took longer than the connect timeout."""


class ReadTimeout(ClientError):
    """The server sent nothing for longer than the read timeout."""


class TooManyRedirects(ClientError):
    """A response redirected more times than max_redirects allows."""


class InvalidHeader(ClientError):
    """A header value holds a newline or starts with whitespace."""
'''

RETRY = '''"""Retries."""


def parse_retry_after(value):
    """Seconds to wait from a Retry-After header: a number of seconds, or none."""
    value = value.strip()
    return float(value) if value.isdigit() else None
'''

TEST_RETRY = """from client.retry import parse_retry_after


def test_parse_retry_after_reads_seconds_from_the_retry_after_header():
    # a Retry-After header of seconds is parsed to a number of seconds
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 5 ") == 5.0


def test_parse_retry_after_without_seconds_in_the_header():
    assert parse_retry_after("soon") is None
"""


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    root = tmp_path_factory.mktemp("code-ranking")
    repo = init_repo(root / "repo")
    files = {
        "client/settings.py": SETTINGS_BEFORE,
        "client/errors.py": ERRORS,
        "client/retry.py": RETRY,
        "tests/test_retry.py": TEST_RETRY,
    }
    commit_files(repo, "Start the client", files, date="2024-01-01T00:00:00+00:00")
    commit_files(
        repo,
        "Read the CA bundle from the environment: CURL_CA_BUNDLE too\n\n"
        "Where the CA bundle is read from the environment, CURL_CA_BUNDLE is now read "
        "after REQUESTS_CA_BUNDLE, as curl users expect.",
        {"client/settings.py": SETTINGS},
        BOB,
        "2024-03-01T00:00:00+00:00",
    )
    source = {"name": "code", "kind": "git", "path": str(repo), "history_months": 0}
    config = parse_config_file(write_config(root, [source], root / "data"))
    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    return config


def engine_with(config: RaglineConfig, **code: object) -> SearchEngine:
    search = config.search.model_copy(update={"code": config.search.code.model_copy(update=code)})
    return SearchEngine(config.model_copy(update={"search": search}))


def first(hits: list[SearchHit], role: str) -> int:
    """The rank of the first hit of ``role`` (code, test, history, other)."""
    return next(h.rank for h in hits if role_of(h) == role)


def role_of(hit: SearchHit) -> str:
    facets = [f"type:{hit.file_type}"] + ([f"language:{hit.language}"] if hit.language else [])
    return chunk_role(hit.path, facets)


def test_a_where_question_puts_the_code_above_the_commit_that_touched_it(indexed) -> None:
    query = "where is the CA bundle read from the environment"
    hits = SearchEngine(indexed).search(query, k=10).hits
    code = first(hits, "code")
    assert hits[code - 1].path == "client/settings.py"
    assert code < first(hits, "history")
    assert hits[0].path == "client/settings.py"
    # the commits that changed it link to it, but a record of changes is no backlink
    links = indexed.search.links.model_copy(update={"enabled": True})
    search = indexed.search.model_copy(update={"links": links})
    linked = SearchEngine(indexed.model_copy(update={"search": search})).search(query, k=10)
    assert "links" not in linked.hits[0].explain
    assert [h.chunk_id for h in linked.hits] == [h.chunk_id for h in hits]
    commit = hits[first(hits, "history") - 1]
    assert commit.explain["role"]["contribution"] < 0  # --explain says why
    # without the intent the commit, whose message is the question's words, leads
    off = engine_with(indexed, intent=False).search(query, k=10).hits
    assert off[0].file_type == "commit"


def test_a_when_question_puts_the_commit_first(indexed) -> None:
    hits = SearchEngine(indexed).search("when did CURL_CA_BUNDLE start being read", k=5).hits
    assert hits[0].file_type == "commit"
    assert "CURL_CA_BUNDLE" in hits[0].title


def test_a_test_file_ranks_below_the_code_it_tests_unless_tests_are_asked_for(indexed) -> None:
    query = "parse seconds from the Retry-After header"
    hits = SearchEngine(indexed).search(query, k=10).hits
    assert hits[0].path == "client/retry.py"
    assert first(hits, "code") < first(hits, "test")
    # switched off, the test (which repeats the words) leads
    off = engine_with(indexed, tests_below=False).search(query, k=10).hits
    assert off[0].path == "tests/test_retry.py"
    asked = SearchEngine(indexed).search("tests of " + query, k=10).hits
    assert asked[0].path == "tests/test_retry.py"


def test_a_hit_in_a_grouped_chunk_reports_the_matching_definitions_lines(indexed) -> None:
    lines = ERRORS.split("\n")
    start = next(n for n, line in enumerate(lines, 1) if line.startswith("class ConnectTimeout"))
    query = "which exception is raised when connecting times out"
    [hit] = SearchEngine(indexed).search(query, k=1).hits
    assert hit.path == "client/errors.py"
    assert (hit.line_start, hit.line_end) == (start, start + 1)
    assert hit.symbol == "ConnectTimeout"
    assert hit.location == f"client/errors.py#L{start}-L{start + 1}"
    # switched off, the hit points at the whole group
    [whole] = engine_with(indexed, symbol_lines=False).search(query, k=1).hits
    assert whole.line_end - whole.line_start > 2


def test_query_intent() -> None:
    assert query_intent("where is the proxy auth header added") == "code"
    assert query_intent("how are redirects resolved") == "code"
    assert query_intent("merge_environment_settings") == "code"
    assert query_intent("Session.send") == "code"
    assert query_intent("when did the netrc lookup change") == "history"
    assert query_intent("why was _get_connection renamed") == "history"
    assert query_intent("which commit added digest auth") == "history"
    assert query_intent("Session") == "none"
    assert query_intent("sourdough starter ratio") == "none"


def test_symbol_lines_needs_two_definitions_and_a_shared_word() -> None:
    one = "def parse_retry_after(value):\n    return value\n"
    assert symbol_lines("retry after", one, "python", 10) is None
    assert symbol_lines("sourdough", ERRORS, "python", 1) is None
    found = symbol_lines("too many redirects", ERRORS, "python", 1)
    assert found is not None and found.name == "TooManyRedirects"
    # a symbol the search was filtered on wins over the query's words
    wanted = symbol_lines("too many redirects", ERRORS, "python", 1, wanted="ReadTimeout")
    assert wanted is not None and wanted.name == "ReadTimeout"


def test_an_index_without_code_ranks_as_before(sample_index) -> None:
    queries = ["how do I feed the sourdough starter", "where is the grocery budget", "kubernetes"]
    for query in queries:
        on = SearchEngine(sample_index).search(query, k=10).hits
        off = engine_with(sample_index, intent=False, tests_below=False, symbol_lines=False).search(
            query, k=10
        )
        assert on, query
        assert [(h.chunk_id, h.score) for h in on] == [(h.chunk_id, h.score) for h in off.hits]
        assert all("role" not in h.explain for h in on)
        assert (
            "roles" not in off.timings
            and "roles" not in SearchEngine(sample_index).search(query).timings
        )


def test_a_question_in_words_moves_commits_down_and_a_name_moves_code_up() -> None:
    """A "how is … done" question may be about a note as well as code: notes and
    documents keep their place beside the code; only a name written as code lifts it."""
    from rag_serving.search.code_ranking import RolePriors, role_shifts

    roles = ["code", "other", "history", "test"]
    priors = RolePriors(prefer=2.0, tests=2.0)
    worded = role_shifts("how is the proxy header added", roles, [False] * 4, priors, True, True)
    assert worded == [0.0, 0.0, -2.0, -2.0]
    named = role_shifts("rebuild_proxies", roles, [True, False, False, False], priors, True, True)
    assert named == [4.0, 0.0, 0.0, 0.0]  # the test file: + 2 as code, - 2 as a test
