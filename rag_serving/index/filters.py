"""Search filters, validated against what the index holds, and translated for
LanceDB (SQL) and Tantivy (queries)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, make_dataclass
from datetime import UTC, datetime
from typing import Any, Self

from rag_sources.errors import FilterError, QueryError
from rag_sources.filetypes import TYPE_ALIASES
from rag_sources.kinds import kind_filters
from rag_sources.suggest import did_you_mean
from rag_sources.where import sql_in, sql_string

# Longest query accepted, in characters. The embedder reads only the first ~1,000
# characters (256 tokens) and BM25 gains nothing from a pasted page, while a 1 MB
# query cost 12 s and 2.8 GB; 4,000 characters bound a query to ~2,000 terms.
MAX_QUERY_CHARS = 4_000
# Longest path filter: a path on Linux is at most 4,096 bytes.
MAX_PATH_FILTER_CHARS = 4_096

# Other names people use for a code language (``--language py`` is ``python``). A code
# file's type is its language, so ``--type py`` is ``python`` too; no key here is a
# type an indexed file can have (a file ending in ``.py`` has type ``python``).
LANGUAGE_ALIASES = {
    "py": "python",
    "js": "javascript",
    "jsx": "javascript",
    "ts": "typescript",
    "golang": "go",
    "rs": "rust",
    "kt": "kotlin",
    "c#": "csharp",
    "cs": "csharp",
    "c-sharp": "csharp",
    "c++": "cpp",
    "cxx": "cpp",
    "rb": "ruby",
    "sh": "bash",
    "shell": "bash",
    "zsh": "bash",
}


@dataclass(frozen=True)
class _SearchFilters:
    """Restrictions on which chunks a search may return.

    Several sources or kinds match any of them; several tags must all be present
    (a tag also matches its nested tags: ``project`` matches ``project/alpha``).
    ``path_prefix`` is relative to the source's root. ``after``/``before`` compare
    each item's date, the ``modified`` its hits show (``documents.modified``): the
    date an item carries where it has one (a commit's, a message's Date, a feed
    entry's, a note's frontmatter or file-name date), else the file's modification
    time. Several ``types`` (file types: ``pdf``, ``md``, a code file's language…;
    aliases such as ``markdown`` or ``py`` accepted), ``languages`` (of code),
    ``symbols`` (a code chunk's function or class, qualified ``Client.retry`` or short
    ``retry``) or ``authors`` (of a commit, a message (its sender), a book or a feed
    entry: name or e-mail) match any of them. Each kind's filters
    (``rag_sources/filters.py``: a message's ``senders``, a book's ``series``…) are
    fields too, and also match any of their values.
    """

    sources: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    path_prefix: str | None = None
    tags: tuple[str, ...] = ()
    after: datetime | None = None
    before: datetime | None = None
    types: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    authors: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return self == type(self)()

    def normalized(self) -> Self:
        """Tags without '#' and lowercased; naive datetimes taken as UTC; names folded
        as the index stores them."""
        return type(self)(
            sources=tuple(self.sources),
            kinds=tuple(self.kinds),
            path_prefix=normalize_path_prefix(self.path_prefix),
            tags=tuple(t.lstrip("#").lower() for t in self.tags),
            after=_utc(self.after),
            before=_utc(self.before),
            types=tuple(
                dict.fromkeys(
                    TYPE_ALIASES.get(t, LANGUAGE_ALIASES.get(t, t))
                    for t in (x.strip().lower().lstrip(".") for x in self.types)
                )
            ),
            languages=tuple(
                dict.fromkeys(
                    LANGUAGE_ALIASES.get(x, x)
                    for x in (v.strip().lower().lstrip(".") for v in self.languages)
                )
            ),
            symbols=tuple(dict.fromkeys(v.strip() for v in self.symbols)),
            authors=_folded(self.authors),
            **{f.name: f.folded(getattr(self, f.name)) for f in kind_filters()},
        )

    def facet_groups(self) -> list[tuple[str, ...]]:
        """Facet values a chunk must have one of, per filter (``type:pdf``…)."""
        groups = [
            tuple(f"{name}:{value}" for value in values)
            for name, values in (
                ("type", self.types),
                ("language", self.languages),
                ("symbol", self.symbols),
                ("author", self.authors),
            )
            if values
        ]
        for facet_filter in kind_filters():
            if values := getattr(self, facet_filter.name):
                groups.append(facet_filter.facet_group(values))
        return groups

    def to_sql(self) -> str | None:
        """A LanceDB ``where`` clause (None when there is nothing to filter)."""
        clauses: list[str] = []
        if self.sources:
            clauses.append(sql_in("source", self.sources))
        if self.kinds:
            clauses.append(sql_in("kind", self.kinds))
        if self.path_prefix:
            clauses.append(f"starts_with(path, {sql_string(self.path_prefix)})")
        clauses.extend(f"array_has(tags, {sql_string(tag)})" for tag in self.tags)
        if self.after:
            clauses.append(f"modified >= {_sql_timestamp(self.after)}")
        if self.before:
            clauses.append(f"modified < {_sql_timestamp(self.before)}")
        for group in self.facet_groups():
            either = " OR ".join(f"array_has(facets, {sql_string(v)})" for v in group)
            clauses.append(f"({either})")

        return " AND ".join(clauses) if clauses else None


@dataclass(frozen=True)
class _IndexVocabulary:
    """The names a filter may use: what the index actually holds (each kind's filters
    have a field of their own, as in ``SearchFilters``)."""

    sources: frozenset[str] = field(default_factory=frozenset)
    kinds: frozenset[str] = field(default_factory=frozenset)
    tags: frozenset[str] = field(default_factory=frozenset)
    types: frozenset[str] = field(default_factory=frozenset)
    languages: frozenset[str] = field(default_factory=frozenset)
    authors: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of_documents(cls, rows: list[dict], configured: Iterable[tuple[str, str]] = ()) -> Self:
        """The vocabulary of ``documents`` rows (source, kind, tags, file_type, facets)
        plus the configured (name, kind) pairs of sources."""
        tags: set[str] = set()
        by_kind = kind_filters()
        # facet name → the vocabulary fields it feeds
        feeds: dict[str, list[str]] = {"language": ["languages"], "author": ["authors"]}
        for facet_filter in by_kind:
            for name in facet_filter.facets:
                feeds.setdefault(name, []).append(facet_filter.name)
        values: dict[str, set[str]] = {name: set() for names in feeds.values() for name in names}
        for row in rows:
            tags.update(expand_tags(row["tags"] or []))
            for facet in row.get("facets") or ():
                name, _, value = facet.partition(":")
                for target in feeds.get(name, ()):
                    values[target].add(value)
        pairs = list(configured)
        return cls(
            sources=frozenset(r["source"] for r in rows) | {name for name, _ in pairs},
            kinds=frozenset(r["kind"] for r in rows) | {kind for _, kind in pairs},
            tags=frozenset(tags),
            types=frozenset(r["file_type"] for r in rows if r["file_type"]),
            **{name: frozenset(found) for name, found in values.items()},
        )


def with_kind_filters(base: type, default: Any) -> Any:
    """The frozen dataclass ``base`` with a field per registered kind filter
    (``senders``, ``series``…), named as ``base`` without its leading underscore."""
    return make_dataclass(
        base.__name__.lstrip("_"),
        [(f.name, Any, field(default_factory=default)) for f in kind_filters()],
        bases=(base,),
        frozen=True,
        namespace={"__doc__": base.__doc__, "__module__": __name__},
    )


SearchFilters = with_kind_filters(_SearchFilters, tuple)
IndexVocabulary = with_kind_filters(_IndexVocabulary, frozenset)


def validate_filters(filters: SearchFilters, vocabulary: IndexVocabulary) -> SearchFilters:
    """Normalise ``filters`` and fail loudly, with close matches, on unknown names."""
    by_kind = kind_filters()
    for name, values in (
        ("source", filters.sources), ("kind", filters.kinds), ("tag", filters.tags),
        ("type", filters.types), ("path filter", (filters.path_prefix or "",)),
        ("language", filters.languages), ("symbol", filters.symbols),
        ("author", filters.authors),
        *((f.singular, getattr(filters, f.name)) for f in by_kind),
    ):  # fmt: skip
        for value in values:
            check_text(value, name)
    filters = filters.normalized()
    for source in filters.sources:
        if source not in vocabulary.sources:
            raise FilterError(
                f"unknown source {source!r}{did_you_mean(source, vocabulary.sources)}"
            )
    for kind in filters.kinds:
        if kind not in vocabulary.kinds:
            raise FilterError(f"unknown kind {kind!r}{did_you_mean(kind, vocabulary.kinds)}")
    for tag in filters.tags:
        if tag not in vocabulary.tags:
            raise FilterError(f"unknown tag {tag!r}{did_you_mean(tag, vocabulary.tags)}")
    for file_type in filters.types:
        _require_indexed(file_type, vocabulary.types, "no indexed file has type", "types")
    for language in filters.languages:
        _require_indexed(
            language, vocabulary.languages, "no indexed code is in language", "languages"
        )
    for author in filters.authors:
        if author not in vocabulary.authors:
            raise FilterError(
                f"no indexed commit, message, book or feed entry has author {author!r}"
                f"{did_you_mean(author, vocabulary.authors)} (give a name or an e-mail address)"
            )
    for facet_filter in by_kind:
        indexed = getattr(vocabulary, facet_filter.name)
        for value in getattr(filters, facet_filter.name):
            if facet_filter.indexed is not None:
                _require_indexed(value, indexed, facet_filter.unknown, facet_filter.indexed)
            elif value not in indexed:
                raise FilterError(
                    f"{facet_filter.unknown} {value!r}{did_you_mean(value, indexed)} "
                    f"{facet_filter.hint}".rstrip()
                )
    if filters.after and filters.before and filters.after >= filters.before:
        raise FilterError(
            f"--after {filters.after.isoformat()} is not before --before "
            f"{filters.before.isoformat()}: no item can match"
        )
    return filters


def _folded(values: tuple[str, ...]) -> tuple[str, ...]:
    """Lowercased, spaces collapsed, duplicates dropped: how names are stored in facets."""
    return tuple(dict.fromkeys(" ".join(v.split()).lower() for v in values))


def _require_indexed(value: str, indexed: frozenset[str], what: str, plural: str) -> None:
    """Fail, naming close matches and every indexed value, when ``value`` is not one."""
    if value not in indexed:
        known = ", ".join(sorted(indexed)) or "none"
        raise FilterError(
            f"{what} {value!r}{did_you_mean(value, indexed)} (indexed {plural}: {known})"
        )


def check_text(value: str, what: str) -> None:
    """Refuse text holding bytes that were not valid UTF-8 (a command line decodes them
    to lone surrogates, which no index, terminal or JSON encoder accepts)."""
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        shown = value.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise QueryError(
            f"the {what} {shown!r} holds bytes that are not valid UTF-8; type it in UTF-8"
        )


def check_query(query: str) -> None:
    """Fail with a one-line ``QueryError`` when ``query`` is empty or over the limit."""
    check_text(query, "query")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,} "
            "(search with key words or a short passage)"
        )
    # Only whitespace, control or format characters (NUL, RTL marks) is no query either.
    if not any(c.isprintable() and not c.isspace() for c in query):
        raise QueryError("the query is empty")


def normalize_path_prefix(value: str | None) -> str | None:
    """A path filter as a prefix of source-relative POSIX paths (None: no filter).

    Windows separators become ``/``; leading ``/`` and ``./`` and trailing ``*``
    are dropped (a prefix already matches everything below it); ``..`` is refused.
    A name that starts with a dot (``.hidden``) is kept as it is. Idempotent.
    """
    if not value:
        return None
    if len(value) > MAX_PATH_FILTER_CHARS:
        raise FilterError(
            f"path filter is {len(value):,} characters long; the limit is {MAX_PATH_FILTER_CHARS:,}"
        )
    text = value.replace("\\", "/").rstrip("*")
    parts = text.split("/")
    if ".." in parts:
        raise FilterError(
            f"path filter {value!r} goes above the source's root; give a path inside "
            "the source, such as 'projects/'"
        )
    kept = [p for p in parts if p not in ("", ".")]
    if not kept:
        return None
    return "/".join(kept) + ("/" if text.endswith("/") else "")


def parse_date(value: str, option: str) -> datetime:
    """Parse an ISO date or datetime given on the command line or to a tool."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise FilterError(
            f"{option} {value!r} is not a date; use YYYY-MM-DD or an ISO 8601 datetime"
        ) from exc
    try:
        return _utc(parsed) or parsed
    except FilterError:
        raise FilterError(
            f"{option} {value!r} is out of range in UTC; use a date from 0001-01-02 to 9999-12-30"
        ) from None


def expand_tags(tags: list[str]) -> list[str]:
    """Tags plus their parents (``a/b/c`` → ``a/b/c``, ``a/b``, ``a``), deduplicated."""
    out: list[str] = []
    for tag in tags:
        parts = tag.split("/")
        for i in range(len(parts), 0, -1):
            candidate = "/".join(parts[:i])
            if candidate and candidate not in out:
                out.append(candidate)
    return out


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00 is past the last datetime in UTC
        raise FilterError(
            f"date {value.isoformat()} is out of range in UTC; "
            "use a date from 0001-01-02 to 9999-12-30"
        ) from None


def _sql_timestamp(value: datetime) -> str:
    # isoformat pads years to four digits (strftime("%Y") writes year 1 as "1",
    # which Arrow rejects).
    stamp = value.replace(tzinfo=None).isoformat(timespec="microseconds")
    return f"arrow_cast({sql_string(stamp)}, 'Timestamp(Microsecond, Some(\"UTC\"))')"
