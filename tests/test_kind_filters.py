"""The mail, feed and book filters: how they are normalised, matched against the
index's vocabulary (with close matches), and turned into facet groups."""

from __future__ import annotations

import pytest

from rag_serving.index.filters import IndexVocabulary, SearchFilters, validate_filters
from rag_sources.errors import FilterError

DOCS = [
    {
        "source": "mail", "kind": "mail", "tags": [], "file_type": "email",
        "facets": [
            "type:email", "from:alice@example.org", "from:alice liddell",
            "to:bob@example.org", "to:bob", "folder:lists/lkml", "folder_in:lists",
            "thread:abc@x",
        ],
    },
    {
        "source": "books", "kind": "calibre", "tags": ["poetry"], "file_type": "epub",
        "facets": ["type:epub", "author:t. s. eliot", "author_name:T. S. Eliot",
                   "series:modernist poems"],
    },
    {
        "source": "news", "kind": "feeds", "tags": [], "file_type": "entry",
        "facets": ["type:entry", "feed:lwn.net", "feed_name:LWN.net", "author:corbet"],
    },
]  # fmt: skip
VOCABULARY = IndexVocabulary.of_documents(DOCS)


def test_the_vocabulary_holds_senders_recipients_folders_series_and_feeds() -> None:
    assert VOCABULARY.senders == {"alice@example.org", "alice liddell"}
    assert VOCABULARY.recipients == {"bob@example.org", "bob"}
    assert VOCABULARY.folders == {"lists/lkml", "lists"}  # a parent folder is a folder too
    assert VOCABULARY.series == {"modernist poems"}
    assert VOCABULARY.feeds == {"lwn.net"}
    assert VOCABULARY.authors == {"t. s. eliot", "corbet"}


def test_names_are_folded_and_become_facet_groups() -> None:
    filters = validate_filters(
        SearchFilters(
            senders=("  Alice   Liddell ",), recipients=("BOB@example.org",),
            folders=("/lists/",), series=("Modernist Poems",), feeds=("LWN.net",),
        ),
        VOCABULARY,
    )  # fmt: skip
    assert filters.senders == ("alice liddell",)
    assert filters.folders == ("lists",)
    assert sorted(filters.facet_groups()) == sorted([
        ("from:alice liddell",),
        ("to:bob@example.org",),
        ("series:modernist poems",),
        ("feed:lwn.net",),
        ("folder:lists", "folder_in:lists"),  # the folder, or any folder inside it
    ])  # fmt: skip
    sql = filters.to_sql() or ""
    assert "array_has(facets, 'folder_in:lists')" in sql and "'from:alice liddell'" in sql


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        (SearchFilters(senders=("alice@example.com",)),
         "no indexed message is from 'alice@example.com'; did you mean 'alice@example.org'?"),
        (SearchFilters(recipients=("carol",)), "no indexed message is to 'carol'"),
        (SearchFilters(folders=("lists/lkm",)), "no indexed mail folder is 'lists/lkm'"),
        (SearchFilters(series=("modernist poem",)), "no indexed book is in series"),
        (SearchFilters(feeds=("lwn",)), "no indexed feed is titled 'lwn'"),
        (SearchFilters(authors=("eliot",)), "no indexed commit, message, book or feed entry has author"),
    ],
)  # fmt: skip
def test_an_unknown_name_is_an_error_with_close_matches(
    filters: SearchFilters, message: str
) -> None:
    with pytest.raises(FilterError) as raised:
        validate_filters(filters, VOCABULARY)
    assert message in str(raised.value)


def test_types_take_the_language_aliases_and_keep_their_own() -> None:
    """A code file's type is its language: ``py`` names it as ``languages`` does."""
    filters = SearchFilters(
        types=(" py", ".PY", "golang", "c++", "sh", "markdown", "htm", "pdf", "yaml"),
        languages=(".py", "JS"),
    ).normalized()
    assert filters.types == ("python", "go", "cpp", "bash", "md", "html", "pdf", "yaml")
    assert filters.languages == ("python", "javascript")
