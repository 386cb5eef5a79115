"""The Tantivy full-text index over chunks (BM25).

It is derived from the LanceDB ``chunks`` table, which stays the source of
truth: ``sync_source`` makes the index hold exactly a source's rows (compared by
``row_hash``), and ``rebuild`` recreates it from LanceDB. Tantivy allows one
writer per index; writes are serialised by the Dagster writer pool.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tantivy

from rag_serving.index.analysis import (
    BIGRAM_FIELD,
    DEFAULT_TEXT_FIELD,
    NOSPACE_RUN,
    TEXT_FIELDS,
    WORDS_ANALYZER,
    bigram_query_text,
    bigrams_of,
    detect_text_field,
    field_analyzer_name,
    fold_compatibility,
    is_query_stop_word,
    is_stop_word,
    register_analyzers,
    text_field_for,
    word_key,
)
from rag_serving.index.filters import SearchFilters
from rag_sources.errors import IndexNeedsUpgradeError, QueryError
from rag_sources.kinds import kinds_without_whole_documents

# Query fields and boosts, measured with `ragline eval` on Cranfield (BM25 nDCG@10:
# 0.332 with title 2 / heading 1.5 / aliases 1.5; 0.361 with these; 0.371 with
# title 0.5, which lost the help vault's paraphrase test, so title stays at 1). The
# heading field stays stored for display but is not searched: a section's heading
# line is already in its first chunk's text, and searching it again double-counts it.
# A chunk's text is in one of the TEXT_FIELDS (its language's); queries search those
# that hold documents.
DEFAULT_FIELDS = ["title", "text", "path_text", "tags_text", "aliases"]
# Title 0.5: the title is also the note's first heading line, in the first chunk's
# text; at 1 it counted twice (BM25 nDCG@10 +0.03 SciFact, +0.011 Cranfield).
FIELD_BOOSTS = {"title": 0.5, "path_text": 0.5, "aliases": 0.5}
# Bumped when the schema or an analyzer changes: an index with another version is
# rebuilt from LanceDB by the next `ragline index` (no re-embedding).
# 9: text and queries in Unicode compatibility form (NFKC).
# 10: each chunk's document key as fast fields, and the documents' index beside it.
# 11: no document rows for code files, commits and documents of over 64 chunks.
# 12: a document's row holds the digest of the chunks it was made from (row_hash).
ANALYSIS_VERSION = 12
_STAMP = "ragline-fulltext.json"
_WRITER_HEAP = 64_000_000
_DOCUMENT_BATCH = 64  # documents whose chunks are read at once to make their rows
# Left beside the index while a writer's chunks are committed and their documents'
# rows not yet (``replace``): the next writer repairs the documents (``finish_documents``).
_DOCUMENTS_PENDING = "documents.pending"
# A longer document (a book, a long PDF) has no row in the documents' index: over its
# whole length BM25 would rank it below any short note; its chunks stand for themselves.
MAX_DOCUMENT_CHUNKS = 64
# Tantivy compiles a regex query into an automaton of at most 1,000 states (about one
# per byte of a literal prefix): a longer path filter is matched on its first bytes by
# the query and on the whole prefix by ``search``.
_REGEX_PREFIX_BYTES = 512
_WORD = re.compile(r"\w+")
_TOKEN = re.compile(r"\S+")
_LETTER = re.compile(r"[^\W\d_]")
# A hyphen or plus standing alone ("CTLA - 4") is punctuation, not an operator.
_LONE_OPERATOR = re.compile(r"(?<!\S)[-+]+(?!\S)")
# Query syntax around a hyphenated word, left out of its phrase: "(real-time" → "real-time".
_PHRASE_EDGES = "()[]{}<>,;.!?*^~'`"
JOINED_PHRASE_BOOST = 0.5
_SYNTAX_INSIDE = re.compile(r"[\^~*]")
_PLUSES = re.compile(r"\++")
_HYPHENS = re.compile(r"-+")
_FIELD_PREFIX = re.compile(r"(?<![\w\\])([A-Za-z_][\w.]*):(\*?)")
_OPERATORS = frozenset({"AND", "OR", "NOT", "IN"})
_GROUPING = re.compile(r"[()\[\]{}]")
_SENTENCE_MARKS = ",.;!?"
# A stop word's weight in a weighed query (``weigh_query_words``), measured with the
# four BEIR dev sets (docs/decisions.md, "keyword side"): 0.2 kept CoSQA's code
# questions and CISI's long ones; 0 lost the former, 0.3 the latter.
STOP_WORD_WEIGHT = 0.2


def _build_schema(stored_text: bool = True) -> tantivy.Schema:
    """The chunks' schema; the documents' index has the same fields (so one query
    parses on both) without storing their text."""
    b = tantivy.SchemaBuilder()
    b.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    b.add_text_field("doc_id", stored=True, tokenizer_name="raw")
    b.add_text_field("source", stored=True, tokenizer_name="raw")
    b.add_text_field("kind", stored=True, tokenizer_name="raw")
    b.add_text_field("path", stored=True, tokenizer_name="raw")
    b.add_text_field("path_text", tokenizer_name=WORDS_ANALYZER)
    english = field_analyzer_name(DEFAULT_TEXT_FIELD)
    b.add_text_field("title", stored=True, tokenizer_name=english)
    b.add_text_field("aliases", tokenizer_name=english)
    b.add_text_field("heading", stored=True, tokenizer_name=english)
    b.add_text_field("tags", stored=True, tokenizer_name="raw")
    b.add_text_field("tags_text", tokenizer_name=WORDS_ANALYZER)
    for field in TEXT_FIELDS:
        b.add_text_field(field, stored=stored_text, tokenizer_name=field_analyzer_name(field))
    # Which text field holds the chunk, and the source's `language` it was chosen by.
    b.add_text_field(BIGRAM_FIELD, tokenizer_name="whitespace")
    b.add_text_field("text_field", stored=True, tokenizer_name="raw")
    b.add_text_field("language", stored=True, tokenizer_name="raw")
    b.add_integer_field("modified", stored=True, indexed=True, fast=True)
    # The chunk id (32 hex digits) as two columns: a search reads its hits' ids without
    # opening the stored documents (~0.1 ms a hit).
    b.add_unsigned_field("id_high", stored=False, indexed=False, fast=True)
    b.add_unsigned_field("id_low", stored=False, indexed=False, fast=True)
    # Its document's key (``document_key``), the same way: hits are grouped by document.
    b.add_unsigned_field("doc_high", stored=False, indexed=False, fast=True)
    b.add_unsigned_field("doc_low", stored=False, indexed=False, fast=True)
    b.add_text_field("row_hash", stored=True, tokenizer_name="raw")
    b.add_text_field("facets", stored=False, tokenizer_name="raw")
    return b.build()


SCHEMA = _build_schema()
DOCUMENT_SCHEMA = _build_schema(stored_text=False)
# The documents' index, one row per document (its chunks' text together), in the
# chunks' folder: whole-document BM25 for the keyword list (docs/decisions.md).
DOCUMENTS_FOLDER = "documents"
_HEX_ID = re.compile(r"[0-9a-f]{32}")
FIELDS = {
    "chunk_id", "doc_id", "source", "kind", "path", "path_text", "title", "aliases",
    "heading", "tags", "tags_text", "modified", "row_hash", "facets", BIGRAM_FIELD, *TEXT_FIELDS,
}  # fmt: skip
# Fields on which ``field:*`` ("has a value") can run: Tantivy needs a fast field.
FAST_FIELDS = {"modified"}


def document_key(doc_id: str) -> str:
    """``doc_id`` as 32 hex digits (ragline's ids are; any other string is hashed)."""
    if _HEX_ID.fullmatch(doc_id):
        return doc_id
    return hashlib.blake2b(doc_id.encode("utf-8"), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Bm25Hit:
    chunk_id: str
    score: float
    doc_key: str = ""
    # The searcher that found the row and the row's address in it (an address is
    # only valid in its own searcher): snippets fetch the row without a search by id.
    location: tuple[tantivy.Searcher, tantivy.DocAddress] | None = None


@dataclass(frozen=True)
class Highlighted:
    """A snippet: text with the UTF-8 byte ranges of matched terms (as Tantivy gives them)."""

    text: str
    ranges: list[tuple[int, int]]

    def marked(self, start: str = "**", end: str = "**") -> str:
        """The snippet on one line, matched terms wrapped in ``start``/``end``."""
        data = self.text.encode("utf-8")
        pieces, last = [], 0
        for lo, hi in sorted(self.ranges):
            if hi <= lo or lo < last:
                continue
            pieces += [data[last:lo], data[lo:hi]]
            last = hi
        pieces.append(data[last:])
        # Plain text and matches alternate; our markers are removed from both (Markdown
        # bold in the note itself would otherwise be mistaken for a match).
        plain = [_plain(piece, start, end) for piece in pieces]
        plain[1::2] = [f"{start}{term}{end}" for term in plain[1::2]]
        return " ".join("".join(plain).split())


def _plain(data: bytes, start: str, end: str) -> str:
    """Decoded text without our highlight markers."""
    text = data.decode("utf-8", "replace")
    if start in text:
        text = text.replace(start, "")
    return text.replace(end, "") if end != start and end in text else text


def sanitize_query(text: str) -> str:
    """Keep Tantivy query syntax users mean (quotes, +/-, AND/OR) but neutralise
    ``word:`` where ``word`` is not one of our fields, so "error: foo" or a URL
    searches for its words instead of matching nothing. ``field:*`` on a field
    that is not fast (every text field) is searched as the word ``field``: Tantivy
    would fail with "Field … is not a fast field"."""

    def replace(match: re.Match[str]) -> str:
        name, star = match.group(1), match.group(2)
        if name in FIELDS and (not star or name in FAST_FIELDS):
            return match.group(0)
        return f"{name} "

    return _FIELD_PREFIX.sub(replace, text)


def loosen_joined_words(text: str) -> str:
    """Split words a reader means apart but Tantivy's parser would search as one exact
    phrase: "fast-twitch" → ``fast twitch "fast-twitch"^0.5``, "PD-1+CD8" → "PD-1 CD8"
    (Lucene's default, ``autoGeneratePhraseQueries`` off, plus the phrase at half weight
    so a kebab-case name still finds its note first). A hyphen next to a part without
    letters stays (dates, "caspase-11", "PD-1"), and so do quoted text,
    ``field:value``, a leading ``-``/``+`` (exclusion, requirement); a lone ``-`` or
    ``+`` is dropped, where the parser excluded or required the next word. Measured in
    docs/decisions.md."""
    parts = text.split('"')
    for i in range(0, len(parts), 2):  # even parts are outside quotes
        parts[i] = _TOKEN.sub(_loosen_token, _LONE_OPERATOR.sub(" ", parts[i]))
    return '"'.join(parts)


def _loosen_token(match: re.Match[str]) -> str:
    token = match.group(0)
    if ":" in token or token[0] in "-+":
        return token
    out = []
    for part in _PLUSES.split(token):
        pieces = _HYPHENS.split(part)
        joined = pieces[0]
        for piece in pieces[1:]:
            split = _LETTER.search(joined.rsplit("-", 1)[-1].rsplit(" ", 1)[-1])
            joined += (" " if split and _LETTER.search(piece) else "-") + piece
        phrase = part.strip(_PHRASE_EDGES)
        if joined != part and phrase and not _SYNTAX_INSIDE.search(phrase):
            joined += f' "{phrase}"^{JOINED_PHRASE_BOOST}'
        out.append(joined)
    return " ".join(p for p in out if p)


def weigh_repeated_words(text: str, counted: Callable[[str], bool] = lambda word: True) -> str:
    """A word written n times in the query counts n times: its first occurrence gets
    ``^n`` and the others go ("wing flutter wing" → ``wing^2 flutter``). Tantivy's
    parser scores a repeated word once; BM25 counts the query's term frequency (so
    does LanceDB's full-text search), which long, verbose questions rely on: plain
    Tantivy over CISI 0.309 → 0.360 (docs/decisions.md). Only plain words outside quotes are
    counted; words of scripts without spaces are left to the bigram rewrite, and a
    query with boolean syntax (AND, OR, NOT, +/-, parentheses) is left as written."""
    parts = text.split('"')
    counts: Counter[str] = Counter()
    for i in range(0, len(parts), 2):  # even parts are outside quotes
        for token in _TOKEN.findall(parts[i]):
            if _is_syntax(token):
                return text
            word = _bare(token)
            if _countable(word) and counted(word):
                counts[word_key(word)] += 1
    if all(n == 1 for n in counts.values()):
        return text
    seen: set[str] = set()

    def weigh(match: re.Match[str]) -> str:
        token = _bare(match.group(0))
        if not _countable(token) or not counted(token):
            return match.group(0)
        key = word_key(token)
        if key in seen:
            return ""
        seen.add(key)
        return f"{token}^{counts[key]}" if counts[key] > 1 else token

    for i in range(0, len(parts), 2):
        parts[i] = _TOKEN.sub(weigh, parts[i])
    return '"'.join(parts)


def weigh_query_words(text: str) -> str:
    """``text`` weighed as BM25 over a question's words: a word written n times counts n
    times (``weigh_repeated_words``) and an English stop word counts a fifth of a word
    ("what are the effects of wing flutter on a wing" → ``what^0.2 are^0.2 the^0.2
    effects of^0.2 wing^2 flutter on^0.2 a^0.2``). Dropping stop words outright lost code questions
    ("move a row up", "check if …"); counting them made "the" a question's subject.
    Quoted phrases and queries with boolean syntax are left as written."""
    weighed = weigh_repeated_words(text, counted=lambda word: not is_query_stop_word(word))
    parts = weighed.split('"')
    for i in range(0, len(parts), 2):  # even parts are outside quotes
        if any(_is_syntax(token) for token in _TOKEN.findall(parts[i])):
            return text
    for i in range(0, len(parts), 2):
        parts[i] = _TOKEN.sub(_weigh_stop_word, parts[i])
    return '"'.join(parts)


def _weigh_stop_word(match: re.Match[str]) -> str:
    token = _bare(match.group(0))
    if _countable(token) and is_query_stop_word(token):
        return f"{token}^{STOP_WORD_WEIGHT}"
    return match.group(0)


def _is_syntax(token: str) -> bool:
    """Whether ``token`` is boolean query syntax (AND, +word, -word, parentheses)."""
    return token in _OPERATORS or token[0] in "+-" or _GROUPING.search(token) is not None


def _bare(token: str) -> str:
    """A query token without the punctuation a sentence puts after it ("wing," → "wing")."""
    return token.strip(_SENTENCE_MARKS) or token


def _countable(token: str) -> bool:
    return (
        _WORD.fullmatch(token) is not None
        and token not in _OPERATORS
        and NOSPACE_RUN.search(token) is None
    )


@dataclass(frozen=True)
class ChunkStates:
    """What the chunks' index holds for a scope: each chunk's row hash ("" where stale),
    and the digest each document's whole row should have (None: it gets no row)."""

    hashes: dict[str, str]
    documents: dict[str, str | None]


class FulltextIndex:
    """A Tantivy index stored in one folder."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if is_outdated(self.path):
            raise IndexNeedsUpgradeError(
                f"the full-text index in {self.path} was built by an older ragline; run "
                "`ragline index` to rebuild it from the stored chunks (nothing is re-embedded)"
            )
        self.index = tantivy.Index(SCHEMA, path=str(self.path), reuse=True)
        register_analyzers(self.index)
        folder = self.path / DOCUMENTS_FOLDER
        folder.mkdir(exist_ok=True)
        self.documents = tantivy.Index(DOCUMENT_SCHEMA, path=str(folder), reuse=True)
        register_analyzers(self.documents)
        _write_stamp(self.path)

    # ---- reading ----------------------------------------------------------

    def reload(self) -> None:
        """See commits made by other processes."""
        self.index.reload()
        self.documents.reload()

    def num_docs(self) -> int:
        return int(self.index.searcher().num_docs)

    def row_hashes(self, source: str | None = None, language: str | None = None) -> dict[str, str]:
        """``chunk_id → row_hash`` for one source (or all). With ``language`` (the
        source's setting), a row indexed under another setting maps to "" (stale)."""
        return self.chunk_states(source, language).hashes

    def chunk_states(
        self,
        source: str | None = None,
        language: str | None = None,
        doc_ids: Iterable[str] | None = None,
    ) -> ChunkStates:
        """What the chunks' index holds for ``source`` (or all; of ``doc_ids``, or all),
        in one read of the stored rows: each chunk's row hash ("" where it was indexed
        under another ``language`` setting) and each document's digest."""
        ids = None if doc_ids is None else sorted(set(doc_ids))
        searcher = self.index.searcher()
        hashes: dict[str, str] = {}
        parts: dict[str, list[str]] = {}
        kinds: dict[str, str] = {}
        if ids != [] and searcher.num_docs:
            query = _scope_query(SCHEMA, source, ids)
            for _score, address in searcher.search(
                query, limit=searcher.num_docs, count=False
            ).hits:
                chunk = searcher.doc(address)
                row_hash = chunk.get_first("row_hash") or ""
                stale = language is not None and (chunk.get_first("language") or "auto") != language
                hashes[chunk.get_first("chunk_id")] = "" if stale else row_hash
                doc_id = chunk.get_first("doc_id")
                parts.setdefault(doc_id, []).append(_digest_part(chunk))
                kinds.setdefault(doc_id, chunk.get_first("kind") or "")
        apart = kinds_without_whole_documents()
        documents = {
            doc_id: _digest(own) if _whole(len(own), kinds[doc_id], apart) else None
            for doc_id, own in parts.items()
        }
        return ChunkStates(hashes, documents)

    @staticmethod
    def _query_fields(searcher: tantivy.Searcher) -> list[str]:
        """The fields a query searches: the text fields of the languages the index
        holds (a term lookup each) besides the default ones."""
        others = [f for f in TEXT_FIELDS[1:] if searcher.doc_freq("text_field", f) > 0]
        return [*DEFAULT_FIELDS, *others]

    def search(
        self, text: str, filters: SearchFilters, limit: int, weigh_words: bool = False
    ) -> list[Bm25Hit]:
        """BM25 hits for the user's ``text`` within ``filters``, best first; with
        ``weigh_words``, the query's words are weighed as BM25 over a question's words
        does (``weigh_query_words``: stop words low, a repeated word counted)."""
        searcher = self.index.searcher()
        fields = self._query_fields(searcher)
        try:
            query = self._user_query(text, fields, weigh_words=weigh_words)
            result = self._search(searcher, query, filters, limit)
        except ValueError:
            # Syntax the parser accepted but the searcher refuses: search the words.
            try:
                query = self._words_query(text, fields, weigh_words=weigh_words)
                result = self._search(searcher, query, filters, limit)
            except ValueError as exc:
                raise _query_error(text, exc) from None
        if result is None:
            return []
        hits = result.hits
        if filters.path_prefix:  # past the bytes the regex could hold
            prefix = filters.path_prefix
            hits = [h for h in hits if searcher.doc(h[1])["path"][0].startswith(prefix)]
        addresses = [address for _score, address in hits]
        ids = _keys(searcher, "id", addresses)
        docs = _keys(searcher, "doc", addresses)
        return [
            Bm25Hit(chunk_id, float(score), doc_key, (searcher, address))
            for (score, address), chunk_id, doc_key in zip(hits, ids, docs, strict=True)
        ]

    def document_scores(
        self, text: str, doc_keys: Iterable[str], weigh_words: bool = False
    ) -> dict[str, float]:
        """Whole-document BM25 of the user's ``text`` for the documents ``doc_keys``
        (``Bm25Hit.doc_key``; the others are not looked at, so what a caller may not see
        stays unseen): each document scored as one text, its chunks' together."""
        keys = sorted(set(doc_keys))
        searcher = self.documents.searcher()
        if not keys or searcher.num_docs == 0:
            return {}
        # The text alone, as plain BM25 over whole documents: the title is the first
        # heading line of the text already, and the path says nothing of the content.
        fields = [field for field in self._query_fields(searcher) if field in TEXT_FIELDS]
        only = tantivy.Query.const_score_query(
            tantivy.Query.term_set_query(DOCUMENT_SCHEMA, "chunk_id", keys), 0.0
        )
        try:
            # The words, without the phrases the chunks' query adds for joined words
            # ("IL-6" → "IL 6" and the phrase "IL-6"): over a whole abstract the phrase
            # counted twice what its words already found (SciFact 0.697 → 0.702).
            query = self._words_query(text, fields, weigh_words=weigh_words, index=self.documents)
            if query is None:
                return {}
            both = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, query), (tantivy.Occur.Must, only)]
            )
            hits = searcher.search(both, limit=len(keys), count=False).hits
        except ValueError:
            return {}  # the chunks' search already reported what is wrong with the query
        addresses = [address for _score, address in hits]
        found = _keys(searcher, "id", addresses)
        return {key: float(score) for (score, _), key in zip(hits, found, strict=True)}

    def _search(
        self,
        searcher: tantivy.Searcher,
        query: tantivy.Query | None,
        filters: SearchFilters,
        limit: int,
    ) -> tantivy.SearchResult | None:
        if query is None:
            return None
        return searcher.search(self._with_filters(query, filters), limit=limit, count=False)

    def highlights(
        self,
        text: str,
        chunk_ids: Iterable[str],
        max_chars: int = 220,
        found: Mapping[str, Bm25Hit] | None = None,
    ) -> dict[str, Highlighted]:
        """Snippets of ``chunk_ids`` with the terms of ``text`` highlighted; ``found``
        (this query's BM25 hits by chunk id) saves looking those rows up again."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return {}
        searcher = self.index.searcher()
        fields = self._query_fields(searcher)
        docs = self._docs(searcher, ids, found or {})
        words = _WORD.findall(fold_compatibility(text))
        try:
            query = self._user_query(text, fields, snippets=True)
            return self._highlights(searcher, query, docs, max_chars, words)
        except ValueError:
            try:
                query = self._words_query(text, fields, snippets=True)
                return self._highlights(searcher, query, docs, max_chars, words)
            except ValueError:
                return {}  # snippets then fall back to the chunk's first line

    @staticmethod
    def _docs(
        searcher: tantivy.Searcher, ids: list[str], found: Mapping[str, Bm25Hit]
    ) -> list[tantivy.Document]:
        """The stored rows of ``ids``: where their BM25 hit found them, else by a
        search on the ids."""
        docs = []
        missing = []
        for chunk_id in ids:
            hit = found.get(chunk_id)
            if hit is not None and hit.location is not None:
                hit_searcher, address = hit.location
                docs.append(hit_searcher.doc(address))
            else:
                missing.append(chunk_id)
        if missing:
            id_query = tantivy.Query.term_set_query(SCHEMA, "chunk_id", missing)
            result = searcher.search(id_query, limit=len(missing), count=False)
            docs += [searcher.doc(address) for _score, address in result.hits]
        return docs

    @staticmethod
    def _highlights(
        searcher: tantivy.Searcher,
        query: tantivy.Query | None,
        docs: list[tantivy.Document],
        max_chars: int,
        words: list[str],
    ) -> dict[str, Highlighted]:
        """Snippets of ``docs`` for ``query``; the stop words of each chunk's language
        are not marked, unless the query's ``words`` are nothing but stop words."""
        if query is None:
            return {}
        generators: dict[str, tantivy.SnippetGenerator] = {}
        out: dict[str, Highlighted] = {}
        for doc in docs:
            field = doc.get_first("text_field") or DEFAULT_TEXT_FIELD
            generator = generators.get(field)
            if generator is None:
                generator = tantivy.SnippetGenerator.create(searcher, query, SCHEMA, field)
                generator.set_max_num_chars(max_chars)
                generators[field] = generator
            snippet = generator.snippet_from_doc(doc)
            fragment = snippet.fragment()
            ranges = [(r.start, r.end) for r in snippet.highlighted()]
            if not all(is_stop_word(word, field) for word in words):
                data = fragment.encode("utf-8")
                ranges = [
                    (lo, hi)
                    for lo, hi in ranges
                    if not is_stop_word(data[lo:hi].decode("utf-8", "replace"), field)
                ]
            if ranges:
                out[doc["chunk_id"][0]] = Highlighted(fragment, ranges)
        return out

    def _user_query(
        self, text: str, fields: list[str], snippets: bool = False, weigh_words: bool = False
    ) -> tantivy.Query | None:
        cleaned = loosen_joined_words(sanitize_query(fold_compatibility(text))).strip()
        if weigh_words:
            cleaned = weigh_query_words(cleaned).strip()
        if not cleaned:
            return None
        query, errors = self.index.parse_query_lenient(
            bigram_query_text(cleaned, snippets),
            default_field_names=fields,
            field_boosts=FIELD_BOOSTS,
        )
        if errors:
            # Syntax the parser could not honour (an unbalanced quote, a lone
            # operator): search the words themselves rather than a partial query.
            return self._words_query(text, fields, snippets, weigh_words)
        return query

    def _words_query(
        self,
        text: str,
        fields: list[str],
        snippets: bool = False,
        weigh_words: bool = False,
        index: tantivy.Index | None = None,
    ) -> tantivy.Query | None:
        """``text``'s words alone, every piece of query syntax dropped."""
        words = " ".join(_WORD.findall(fold_compatibility(text)))
        if weigh_words:
            words = weigh_query_words(words)
        if not words:
            return None
        query, _ = (index or self.index).parse_query_lenient(
            bigram_query_text(words, snippets),
            default_field_names=fields,
            field_boosts=FIELD_BOOSTS,
        )
        return query

    @staticmethod
    def _with_filters(query: tantivy.Query, filters: SearchFilters) -> tantivy.Query:
        must: list[tuple[tantivy.Occur, tantivy.Query]] = [(tantivy.Occur.Must, query)]
        if filters.sources:
            must.append(
                (
                    tantivy.Occur.Must,
                    tantivy.Query.term_set_query(SCHEMA, "source", list(filters.sources)),
                )
            )
        if filters.kinds:
            must.append(
                (
                    tantivy.Occur.Must,
                    tantivy.Query.term_set_query(SCHEMA, "kind", list(filters.kinds)),
                )
            )
        if filters.path_prefix:
            head = filters.path_prefix.encode()[:_REGEX_PREFIX_BYTES].decode("utf-8", "ignore")
            # (?s): a file name may hold a newline, which "." would not match.
            pattern = re.escape(head) + "(?s:.*)"
            must.append((tantivy.Occur.Must, tantivy.Query.regex_query(SCHEMA, "path", pattern)))
        for tag in filters.tags:
            must.append((tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, "tags", tag)))
        for group in filters.facet_groups():
            must.append(
                (tantivy.Occur.Must, tantivy.Query.term_set_query(SCHEMA, "facets", list(group)))
            )
        if filters.after or filters.before:
            must.append(
                (
                    tantivy.Occur.Must,
                    tantivy.Query.range_query(
                        SCHEMA,
                        "modified",
                        tantivy.FieldType.Integer,
                        _epoch(filters.after),
                        _epoch(filters.before),
                        include_lower=True,
                        include_upper=filters.before is None,
                    ),
                )
            )
        if len(must) == 1:
            return query
        # Filters decide what matches, not how well: a term query would add its own
        # BM25 (a tag's, differing with each document's tag count) to the score.
        filters_only = [
            (occur, tantivy.Query.const_score_query(clause, 0.0)) for occur, clause in must[1:]
        ]
        return tantivy.Query.boolean_query([must[0], *filters_only])

    # ---- writing ----------------------------------------------------------

    def sync_source(
        self, source: str, rows: Iterable[Mapping[str, Any]], language: str = "auto"
    ) -> tuple[int, int]:
        """Make the index hold exactly ``rows`` for ``source``; returns (written, deleted)."""
        wanted = {row["chunk_id"]: row for row in rows}
        present = self.row_hashes(source, language)
        stale = [
            cid for cid, h in present.items() if cid not in wanted or wanted[cid]["row_hash"] != h
        ]
        new = [row for cid, row in wanted.items() if present.get(cid) != row["row_hash"]]
        if not stale and not new:
            return 0, 0
        self.replace(stale, new, language)
        deleted = sum(1 for cid in stale if cid not in wanted)
        return len(new), deleted

    def replace(
        self,
        stale: Iterable[str],
        rows: Iterable[Mapping[str, Any]],
        language: str = "auto",
        documents: Iterable[str] = (),
    ) -> None:
        """Delete the chunk ids ``stale`` and add ``rows`` (which may be streamed), in
        one commit: readers see either the old or the new state. ``language`` is the
        rows' source's setting ("auto": detected per chunk). The changed documents' rows
        are remade after it, with those of ``documents`` (found out of step)."""
        stale = list(stale)
        self.finish_documents()
        apart = kinds_without_whole_documents()
        changed = self._doc_ids_of(stale, apart) | set(documents)
        mark = self.path / _DOCUMENTS_PENDING
        mark.write_text("the chunks changed; the documents' rows may not have\n")
        writer = self.index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        try:
            for cid in stale:
                writer.delete_documents_by_term("chunk_id", cid)
            for row in rows:
                if (row.get("kind") or "") not in apart:  # no row to make (code, commits)
                    changed.add(row["doc_id"])
                writer.add_document(_document(row, language))
            writer.commit()
            writer.wait_merging_threads()
        except BaseException:
            writer.rollback()
            raise
        self.index.reload()
        self.refresh_documents(changed)
        mark.unlink(missing_ok=True)

    def finish_documents(self) -> int:
        """Where a writer stopped between the chunks' commit and the documents' (its
        mark is left), remake the documents' rows out of step with their chunks;
        returns how many. Call it holding the index's writer lock, as ``replace``."""
        mark = self.path / _DOCUMENTS_PENDING
        if not mark.exists():
            return 0
        repaired = self.repair_documents()
        mark.unlink(missing_ok=True)
        return repaired

    def _doc_ids_of(self, chunk_ids: list[str], apart: frozenset[str]) -> set[str]:
        """The documents the chunks ``chunk_ids`` belong to (those still indexed),
        but for those of the kinds ``apart``, which have no row in the documents'
        index."""
        if not chunk_ids:
            return set()
        searcher = self.index.searcher()
        query = tantivy.Query.term_set_query(SCHEMA, "chunk_id", chunk_ids)
        hits = searcher.search(query, limit=len(chunk_ids), count=False).hits
        chunks = (searcher.doc(address) for _score, address in hits)
        return {c["doc_id"][0] for c in chunks if (c.get_first("kind") or "") not in apart}

    def refresh_documents(self, doc_ids: Iterable[str]) -> None:
        """Make the documents' index hold each of ``doc_ids`` as its chunks are now:
        one row of their text together, or none when it has no chunk left. Read from
        the chunks' stored fields, ``_DOCUMENT_BATCH`` documents at a time."""
        ids = sorted(set(doc_ids))
        if not ids:
            return
        searcher = self.index.searcher()
        apart = kinds_without_whole_documents()
        writer = self.documents.writer(heap_size=_WRITER_HEAP, num_threads=1)
        try:
            for start in range(0, len(ids), _DOCUMENT_BATCH):
                batch = ids[start : start + _DOCUMENT_BATCH]
                query = tantivy.Query.term_set_query(SCHEMA, "doc_id", batch)
                hits = searcher.search(query, limit=max(1, searcher.num_docs), count=False).hits
                chunks: dict[str, list[tantivy.Document]] = {}
                for _score, address in sorted(
                    hits, key=lambda hit: (hit[1].segment_ord, hit[1].doc)
                ):
                    chunk = searcher.doc(address)
                    chunks.setdefault(chunk["doc_id"][0], []).append(chunk)
                for doc_id in batch:
                    writer.delete_documents_by_term("chunk_id", document_key(doc_id))
                    if _searched_whole(chunks.get(doc_id), apart):
                        writer.add_document(_document_row(doc_id, chunks[doc_id]))
            writer.commit()
            writer.wait_merging_threads()
        except BaseException:
            writer.rollback()
            raise
        self.documents.reload()

    def documents_out_of_step(
        self,
        source: str | None = None,
        doc_ids: Iterable[str] | None = None,
        states: ChunkStates | None = None,
    ) -> set[str]:
        """The documents (of ``source``, or of ``doc_ids``) whose row in the documents'
        index is missing, left over, or made from other chunks than those indexed now:
        what a writer stopped between the chunks' commit and the documents' left.
        ``states``: the same scope's ``chunk_states``, when the caller has read them."""
        ids = None if doc_ids is None else sorted(set(doc_ids))
        if ids == []:
            return set()
        if states is None:
            states = self.chunk_states(source, None, ids)
        expected = {doc: digest for doc, digest in states.documents.items() if digest}
        searcher = self.documents.searcher()
        present: dict[str, str] = {}
        if searcher.num_docs:
            query = _scope_query(DOCUMENT_SCHEMA, source, ids)
            hits = searcher.search(query, limit=searcher.num_docs, count=False).hits
            for _score, address in hits:
                row = searcher.doc(address)
                present[row["doc_id"][0]] = row.get_first("row_hash") or ""
        return {d for d in expected.keys() | present.keys() if expected.get(d) != present.get(d)}

    def repair_documents(
        self, source: str | None = None, doc_ids: Iterable[str] | None = None
    ) -> int:
        """Remake the documents' rows that are out of step with their chunks; returns
        how many."""
        out_of_step = self.documents_out_of_step(source, doc_ids)
        self.refresh_documents(out_of_step)
        return len(out_of_step)

    def merge_segments(self) -> int:
        """Merge segments and remove files no longer used; returns the chunks' segment
        count."""
        for index in (self.index, self.documents):
            writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            writer.commit()
            writer.wait_merging_threads()
            writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            writer.garbage_collect_files()
            writer.wait_merging_threads()
            index.reload()
        return int(self.index.searcher().num_segments)

    def delete_source(self, source: str) -> None:
        for index in (self.index, self.documents):
            writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
            writer.delete_documents_by_term("source", source)
            writer.commit()
            writer.wait_merging_threads()
            index.reload()

    @classmethod
    def rebuild(
        cls,
        path: Path,
        rows: Iterable[Mapping[str, Any]],
        languages: Mapping[str, str] | None = None,
    ) -> FulltextIndex:
        """Recreate the index at ``path`` from ``rows`` (the LanceDB chunks);
        ``languages`` maps source names to their ``language`` setting (default auto)."""
        languages = languages or {}
        tmp = path.with_name(path.name + ".rebuild")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        index = tantivy.Index(SCHEMA, path=str(tmp), reuse=False)
        register_analyzers(index)
        writer = index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        doc_ids: set[str] = set()
        apart = kinds_without_whole_documents()
        for row in rows:
            if (row.get("kind") or "") not in apart:
                doc_ids.add(row["doc_id"])
            writer.add_document(_document(row, languages.get(row["source"], "auto")))
        writer.commit()
        writer.wait_merging_threads()
        del writer, index
        _write_stamp(tmp)
        cls(tmp).refresh_documents(doc_ids)
        old = path.with_name(path.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if path.exists():
            path.rename(old)
        tmp.rename(path)
        shutil.rmtree(old, ignore_errors=True)
        return cls(path)


def is_outdated(path: Path) -> bool:
    """Whether ``path`` holds a Tantivy index of another schema or analyzers."""
    if not (path / "meta.json").exists():
        return False
    try:
        version = json.loads((path / _STAMP).read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        version = 1  # written before the stamp existed
    return version != ANALYSIS_VERSION


def _write_stamp(path: Path) -> None:
    stamp = path / _STAMP
    if not stamp.exists():
        stamp.write_text(json.dumps({"version": ANALYSIS_VERSION}) + "\n", encoding="utf-8")


def _document(row: Mapping[str, Any], language: str = "auto") -> tantivy.Document:
    tags = list(row.get("tags") or [])
    modified = row.get("modified")
    text = fold_compatibility(row.get("text") or "")
    field = text_field_for(language) or detect_text_field(text)
    chunk_id = row["chunk_id"]
    document = tantivy.Document(
        chunk_id=chunk_id,
        doc_id=row["doc_id"],
        source=row["source"],
        kind=row.get("kind") or "",
        path=row.get("path") or "",
        path_text=fold_compatibility(row.get("path") or "").replace("/", " "),
        title=fold_compatibility(row.get("title") or ""),
        aliases=[fold_compatibility(alias) for alias in row.get("aliases") or []],
        heading=fold_compatibility(row.get("heading") or ""),
        tags=tags,
        tags_text=fold_compatibility(" ".join(t.replace("/", " ") for t in tags)),
        **{field: text},
        text_bigrams=bigrams_of(text),
        text_field=field,
        language=language,
        modified=_epoch(modified) or 0,
        row_hash=row["row_hash"],
        facets=list(row.get("facets") or []),
    )
    # add_unsigned: a keyword argument is taken as i64 and fails at 2**63.
    document.add_unsigned("id_high", int(chunk_id[:16], 16))
    document.add_unsigned("id_low", int(chunk_id[16:32], 16))
    _add_key(document, "doc", document_key(row["doc_id"]))
    return document


def _searched_whole(chunks: list[tantivy.Document] | None, apart: frozenset[str]) -> bool:
    """Whether a document of these chunks gets a row in the documents' index."""
    if not chunks:
        return False
    return _whole(len(chunks), chunks[0].get_first("kind") or "", apart)


def _whole(chunk_count: int, kind: str, apart: frozenset[str]) -> bool:
    """Whether a document of ``chunk_count`` chunks of ``kind`` gets a row: not one of a
    kind searched by its parts (code files, commits), nor one longer than
    ``MAX_DOCUMENT_CHUNKS`` (a book), whose chunks then stand for themselves."""
    return 0 < chunk_count <= MAX_DOCUMENT_CHUNKS and kind not in apart


def _scope_query(
    schema: tantivy.Schema, source: str | None, doc_ids: list[str] | None
) -> tantivy.Query:
    """Rows of one source (or all), of the documents ``doc_ids`` (or all)."""
    clauses = []
    if source is not None:
        clauses.append((tantivy.Occur.Must, tantivy.Query.term_query(schema, "source", source)))
    if doc_ids is not None:
        clauses.append(
            (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "doc_id", doc_ids))
        )
    return tantivy.Query.boolean_query(clauses) if clauses else tantivy.Query.all_query()


def _digest_part(chunk: tantivy.Document) -> str:
    """What a chunk adds to its document's digest: its row hash and text field (a
    source's language setting moves a chunk's text to another field)."""
    return f"{chunk.get_first('row_hash') or ''}:{chunk.get_first('text_field') or ''}"


def _digest(parts: list[str]) -> str:
    """A document's digest: of its chunks' parts, in any order."""
    return hashlib.blake2b("\n".join(sorted(parts)).encode(), digest_size=16).hexdigest()


def _document_row(doc_id: str, chunks: list[tantivy.Document]) -> tantivy.Document:
    """One row for a whole document: its chunks' text, each in its own language's field
    (as the chunk's), and the fields a query also searches, once."""
    first = chunks[0]
    key = document_key(doc_id)
    document = tantivy.Document(
        chunk_id=key,
        doc_id=doc_id,
        source=first.get_first("source") or "",
        path=first.get_first("path") or "",
        title=first.get_first("title") or "",
        tags=list(first.get_all("tags")),
        row_hash=_digest([_digest_part(chunk) for chunk in chunks]),
    )
    path = document.get_first("path") or ""
    document.add_text("path_text", path.replace("/", " "))
    for tag in first.get_all("tags"):
        document.add_text("tags_text", tag.replace("/", " "))
    fields = set()
    for chunk in chunks:
        field = chunk.get_first("text_field") or DEFAULT_TEXT_FIELD
        text = chunk.get_first(field) or ""
        document.add_text(field, text)
        document.add_text(BIGRAM_FIELD, bigrams_of(text))
        fields.add(field)
    for field in sorted(fields):
        document.add_text("text_field", field)
    _add_key(document, "id", key)
    return document


def _keys(searcher: tantivy.Searcher, prefix: str, addresses: list[Any]) -> list[str]:
    """The 32-hex-digit ids kept as two fast fields (``id_*``, ``doc_*``) of rows."""
    high = searcher.fast_field_values(f"{prefix}_high", addresses)
    low = searcher.fast_field_values(f"{prefix}_low", addresses)
    return [f"{h:016x}{lo:016x}" for h, lo in zip(high, low, strict=True)]


def _add_key(document: tantivy.Document, prefix: str, key: str) -> None:
    # add_unsigned: a keyword argument is taken as i64 and fails at 2**63.
    document.add_unsigned(f"{prefix}_high", int(key[:16], 16))
    document.add_unsigned(f"{prefix}_low", int(key[16:32], 16))


def _epoch(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp())


def _query_error(text: str, exc: ValueError) -> QueryError:
    reason = " ".join(str(exc).split())[:160]
    shown = text if len(text) <= 60 else text[:57] + "..."
    return QueryError(f"the full-text index cannot run the query {shown!r} ({reason}); rephrase it")
