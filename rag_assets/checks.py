"""Integrity checks of the index, run inside the assets that write it (blocking:
a failure fails the run, so a broken index is never reported as fresh)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from dagster import MetadataValue, TableColumn, TableMetadataValue, TableRecord, TableSchema

from rag_serving.index.fingerprint import EmbedderFingerprint
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.manifest import Generation, read_manifest
from rag_serving.index.store import IndexStore
from rag_serving.text import printable
from rag_sources.where import sql_in, sql_string

TANTIVY_MATCHES_LANCEDB = "tantivy_matches_lancedb"
CHUNKS_HAVE_DOCUMENTS = "chunks_have_documents"
VECTORS_HAVE_RECORDED_DIMENSION = "vectors_have_recorded_dimension"
ONE_EMBEDDER_FINGERPRINT = "one_embedder_fingerprint"
ITEMS_INDEXED = "items_indexed"
MAX_LISTED_ITEMS = 20
# The UI shows Markdown metadata inline only below 1,000 characters ("[Show Markdown]"
# hides longer values behind a click).
INLINE_MARKDOWN_CHARS = 990
MESSAGE_CHARS = 160
# The run's log says what went wrong in one summary (the metadata table and the
# items_indexed check list the items): at most this many reasons, with a few examples.
SUMMARY_REASONS = 10
SUMMARY_EXAMPLES = 3
SUMMARY_PATH_CHARS = 120
_NUMBERS = re.compile(r"\d[\d,.]*")

# What each check verifies, as the UI shows it next to the check.
DESCRIPTIONS = {
    TANTIVY_MATCHES_LANCEDB: "The source's Tantivy (BM25) index holds exactly its LanceDB chunks, "
    "with equal row hashes. Blocking: a mismatch fails the run.",
    CHUNKS_HAVE_DOCUMENTS: "Every chunk of the source belongs to a document that exists. "
    "Blocking: an orphan fails the run.",
    VECTORS_HAVE_RECORDED_DIMENSION: "Every vector of the source has the dimension recorded for "
    "its embedder generation, none missing. Blocking.",
    ONE_EMBEDDER_FINGERPRINT: "The index records one active embedder (at most one more being "
    "built), and the vectors just written belong to it. Blocking.",
    ITEMS_INDEXED: "Every item (file) of the source is indexed. Warns, without failing the run, "
    "while items failed, were skipped or wait for a deferred pass (OCR), and lists them "
    "(path, severity, reason); evaluated on every run from the source's recorded problems, "
    "so it shows the current problems, not only those found by the last run.",
}

# Characters that Markdown (and the UI's HTML sanitiser) would interpret in table cells.
_MARKDOWN_ESCAPES = {
    "\\": "\\\\", "|": "\\|", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]",
    "#": "\\#", "~": "\\~", "!": "\\!", "$": "\\$", "<": "&lt;", ">": "&gt;", "&": "&amp;",
}  # fmt: skip


def markdown_text(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` as literal Markdown table-cell text: one line, at most ``limit``
    characters, every Markdown or HTML character escaped."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return "".join(
        _MARKDOWN_ESCAPES.get(c, c) if c.isprintable() else c.encode("unicode_escape").decode()
        for c in flat
    )


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code span (a path): literal inside, ``|`` escaped for the
    table, a fence longer than any run of backticks in it."""
    flat = printable(text).replace("|", "\\|")
    longest = max((len(run) for run in _backtick_runs(flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _backtick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for c in text:
        if c == "`":
            current += c
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


def problems_table(rows: list[tuple[str, str, str]], total: int | None = None) -> str:
    """A Markdown table of (item, severity, reason) rows, cut to stay short enough for
    the UI to show it inline; the last line says how many rows were left out."""
    total = len(rows) if total is None else total
    lines = ["| item | severity | reason |", "|---|---|---|"]
    size = sum(len(line) + 1 for line in lines)
    shown = 0
    for path, severity, message in rows:
        line = f"| {markdown_code(path)} | {severity} | {markdown_text(message)} |"
        if shown and size + len(line) + 60 > INLINE_MARKDOWN_CHARS:
            break
        lines.append(line)
        size += len(line) + 1
        shown += 1
    if total > shown:
        lines.append(f"| … | | {total - shown} more: `ragline status` lists them all |")
    return "\n".join(lines)


def problems_summary(source: str, rows: Iterable[tuple[str, str, str]]) -> str | None:
    """One log message for a stage's (item, severity, reason) rows: the counts per
    severity, then the commonest reasons (messages that differ only in their numbers
    count as one) with how many items each and a few of them. None for no rows.

    Its size does not grow with the rows: a committed ``node_modules/`` of 100,000
    files is one message, not 100,000 events in the run's log."""
    groups: dict[tuple[str, str], tuple[str, list[str], list[int]]] = {}
    severities: dict[str, int] = {}
    total = 0
    for path, severity, message in rows:
        total += 1
        severities[severity] = severities.get(severity, 0) + 1
        key = (severity, _NUMBERS.sub("#", message))
        group = groups.get(key)
        if group is None:
            group = groups[key] = (message, [], [0])
        if len(group[1]) < SUMMARY_EXAMPLES:
            group[1].append(path)
        group[2][0] += 1
    if not total:
        return None
    counts = ", ".join(f"{n} {severity}" for severity, n in severities.items())
    lines = [f"{source}: {total} item(s) with problems ({counts}); `ragline status` lists them"]
    ranked = sorted(groups.items(), key=lambda kv: -kv[1][2][0])
    for (severity, _), (message, examples, (count,)) in ranked[:SUMMARY_REASONS]:
        shown = ", ".join(_cut(printable(p), SUMMARY_PATH_CHARS) for p in examples)
        more = ", …" if count > len(examples) else ""
        reason = _cut(" ".join(message.split()), MESSAGE_CHARS)
        lines.append(f"  {count} {severity}: {reason} (e.g. {shown}{more})")
    if len(ranked) > SUMMARY_REASONS:
        rest = sum(group[2][0] for _, group in ranked[SUMMARY_REASONS:])
        lines.append(f"  … {len(ranked) - SUMMARY_REASONS} more reasons ({rest} items)")
    return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


def _scope(source: str, only: set[str] | None) -> tuple[str, str]:
    """The rows a check reads (the source, or its doc ids ``only``: a watch run's
    own documents, the rest of the source being unwritten by it; every full run
    checks the whole source) and the words that say so."""
    where = f"source = {sql_string(source)}"
    if only is None:
        return where, ""
    return f"{where} AND {sql_in('doc_id', sorted(only))}", f" for {_run_documents(only)}"


def _run_documents(only: set[str]) -> str:
    return f"the {len(only)} document(s) of this watch run"


def _checked(only: set[str] | None) -> dict[str, int]:
    return {} if only is None else {"checked_documents": len(only)}


def tantivy_matches_lancedb(
    store: IndexStore, generation: Generation, source: str, only: set[str] | None = None
) -> CheckOutcome:
    """Tantivy holds exactly the source's (or documents ``only``'s) LanceDB chunk ids,
    with the same row hashes, and each whole document's row is made from its chunks
    as indexed now."""
    from rag_assets.stages.fulltext import lance_row_hashes

    where, what = _scope(source, only)
    lance = lance_row_hashes(store, generation.table, where)
    index = FulltextIndex(store.layout.fulltext_dir(generation.key))
    states = index.chunk_states(source, None, only)
    tantivy = states.hashes
    missing = [c for c in lance if c not in tantivy]
    extra = [c for c in tantivy if c not in lance]
    differ = [c for c in lance if c in tantivy and tantivy[c] != lance[c]]
    documents = index.documents_out_of_step(source, only, states)
    chunks_match = not (missing or extra or differ)
    if chunks_match and not documents:
        description = f"Tantivy and LanceDB hold the same chunks{what}"
    elif chunks_match:
        description = f"{len(documents)} whole-document row(s) differ from their chunks{what}"
    else:
        description = f"Tantivy and LanceDB differ{what}"
    return CheckOutcome(
        TANTIVY_MATCHES_LANCEDB,
        chunks_match and not documents,
        description,
        {
            "lancedb_chunks": len(lance),
            "missing_in_tantivy": len(missing),
            "extra_in_tantivy": len(extra),
            "different_rows": len(differ),
            "documents_out_of_step": len(documents),
            **_checked(only),
        },
    )


def chunks_have_documents(
    store: IndexStore, generation: Generation, source: str, only: set[str] | None = None
) -> CheckOutcome:
    """Every served chunk (of documents ``only``) belongs to a document that exists."""
    where, what = _scope(source, only)
    if not store.table_exists(generation.table):
        return CheckOutcome(CHUNKS_HAVE_DOCUMENTS, True, "no chunks yet", {"orphans": 0})
    chunk_docs = set(
        store.read(generation.table, where=where, columns=["doc_id"]).column("doc_id").to_pylist()
    )
    docs = set(
        store.read("documents", where=where, columns=["doc_id"]).column("doc_id").to_pylist()
    )
    orphans = chunk_docs - docs
    return CheckOutcome(
        CHUNKS_HAVE_DOCUMENTS,
        not orphans,
        f"every chunk{what} has its document"
        if not orphans
        else f"{len(orphans)} documents missing",
        {"orphan_documents": len(orphans), **_checked(only)},
    )


def vectors_have_recorded_dimension(
    store: IndexStore, generation: Generation, source: str, only: set[str] | None = None
) -> CheckOutcome:
    """The table's vectors have the dimension recorded for the generation, none null
    (among the source's rows, or documents ``only``'s)."""
    expected = generation.fingerprint.dimension
    if not store.table_exists(generation.table):
        return CheckOutcome(
            VECTORS_HAVE_RECORDED_DIMENSION, True, "no chunks yet", {"dimension": expected}
        )
    where, what = _scope(source, only)
    table = store.table(generation.table)
    vector_type = table.schema.field("vector").type
    actual = vector_type.list_size if pa.types.is_fixed_size_list(vector_type) else -1
    nulls = table.count_rows(f"{where} AND vector IS NULL")
    passed = actual == expected and nulls == 0
    return CheckOutcome(
        VECTORS_HAVE_RECORDED_DIMENSION,
        passed,
        f"vectors{what} have {actual} dimensions (recorded {expected}); {nulls} missing",
        {
            "dimension": actual,
            "recorded_dimension": expected,
            "missing_vectors": nulls,
            **_checked(only),
        },
    )


def one_embedder_fingerprint(store: IndexStore, fingerprint: EmbedderFingerprint) -> CheckOutcome:
    """The index records one active fingerprint (plus at most one being built), and the
    vectors just written belong to one of them."""
    manifest = read_manifest(store.layout.manifest_path, missing_ok=True)
    known = [g.fingerprint for g in (manifest.active, manifest.building) if g is not None]
    passed = manifest.active is not None and fingerprint in known
    return CheckOutcome(
        ONE_EMBEDDER_FINGERPRINT,
        passed,
        f"active: {manifest.active.fingerprint.describe() if manifest.active else 'none'}",
        {
            "active": manifest.active.key if manifest.active else "none",
            "building": manifest.building.key if manifest.building else "none",
        },
    )


def items_indexed_schema() -> TableSchema:
    return TableSchema(
        columns=[
            TableColumn("item", "string", description="path inside the source"),
            TableColumn("severity", "string", description="error, skipped or pending"),
            TableColumn("reason", "string"),
        ]
    )


def items_table(rows: list[dict[str, Any]], total: int) -> TableMetadataValue:
    """The items of ``rows`` (path, severity, message) as a table; a last row says how
    many more there are."""
    records = [
        TableRecord({"item": printable(r["path"]), "severity": r["severity"],
                     "reason": " ".join(r["message"].split())[:MESSAGE_CHARS * 2]})
        for r in rows
    ]  # fmt: skip
    if total > len(rows):
        records.append(
            TableRecord({"item": "…", "severity": "",
                         "reason": f"{total - len(rows)} more: `ragline status` lists them all"})
        )  # fmt: skip
    return MetadataValue.table(records, schema=items_indexed_schema())


@dataclass(frozen=True)
class StandingProblems:
    """A source as the index holds it now, whichever run found what: its items, how
    many are indexed, and the problems that stand (``file_issues``: a problem stays
    until its item is fixed or removed)."""

    items: int
    indexed: int  # documents
    failed: int
    skipped: int
    pending: int  # indexed, waiting for a deferred pass (OCR)
    first_failed: tuple[str, str] | None = None  # (item, reason), the first by path

    @property
    def problems(self) -> int:
        """Items not indexed because they failed or were skipped."""
        return self.failed + self.skipped

    @property
    def nothing_indexed(self) -> bool:
        """Every item failed or was skipped, at least one failed: the source serves
        nothing because of errors (a source of 0 items, or only skipped ones, did not
        fail)."""
        return self.failed > 0 and self.indexed == 0

    def metadata(self) -> dict[str, int]:
        """The standing counts as materialization metadata, beside a run's own."""
        return {
            "problems_standing": self.problems,
            "failed_standing": self.failed,
            "skipped_standing": self.skipped,
            "pending_standing": self.pending,
        }

    def nothing_indexed_message(self) -> str:
        """One line: nothing of the source is indexed, the first reason, what to do."""
        if self.skipped:
            what = f"{self.failed} of its {self.items} items failed, {self.skipped} were skipped"
        elif self.failed == 1:
            what = "its one item failed"
        else:
            what = f"all {self.failed} of its items failed"
        first = ""
        if self.first_failed is not None:
            path, reason = self.first_failed
            first = f" (first: {_cut(printable(path), SUMMARY_PATH_CHARS)}: "
            first += f"{_cut(' '.join(reason.split()), MESSAGE_CHARS)})"
        return (
            f"nothing is indexed: {what}{first}; `ragline status` lists them; fix them "
            "and run the source again"
        )


def standing_problems(store: IndexStore, source: str) -> StandingProblems:
    """The source's items, indexed documents and standing problems, from the index."""
    scope = f"source = {sql_string(source)}"
    rows = store.read("file_issues", where=scope, columns=["path", "severity", "message"])
    issues = rows.to_pylist()
    failed = sorted((r["path"], r["message"]) for r in issues if r["severity"] == "error")
    return StandingProblems(
        items=store.count("files", scope),
        indexed=store.count("documents", scope),
        failed=len(failed),
        skipped=sum(1 for r in issues if r["severity"] == "skipped"),
        pending=sum(1 for r in issues if r["severity"] == "pending"),
        first_failed=failed[0] if failed else None,
    )


def items_indexed(store: IndexStore, source: str) -> CheckOutcome:
    """Every item of the source was indexed: fails (as a warning, never blocking) while
    some item is broken, skipped or waiting for deferred work, and lists them.

    Read from ``file_issues``, which holds the source's current problems (a problem
    stays until its item is fixed or removed), so the result does not depend on what
    the last run happened to parse."""
    scope = f"source = {sql_string(source)}"
    rows = store.read("file_issues", where=scope, columns=["path", "severity", "message"])
    problems = [r for r in rows.to_pylist() if r["severity"] != "warning"]
    counts = {s: sum(1 for r in problems if r["severity"] == s) for s in ("error", "skipped")}
    counts["pending"] = sum(1 for r in problems if r["severity"] == "pending")
    order = {"error": 0, "skipped": 1, "pending": 2}
    listed = sorted(problems, key=lambda r: (order.get(r["severity"], 3), r["path"]))
    metadata: dict[str, Any] = {"failed": counts["error"], "skipped": counts["skipped"],
                                "pending": counts["pending"]}  # fmt: skip
    if problems:
        # A table value, not Markdown: the UI shows it inline on the check (Markdown
        # waits behind "[Show Markdown]" there) and renders every character literally.
        metadata["items"] = items_table(listed[:MAX_LISTED_ITEMS], len(problems))
    if not problems:
        description = "every item is indexed"
    else:
        parts = [f"{counts['error']} failed", f"{counts['skipped']} skipped"]
        if counts["pending"]:
            parts.append(f"{counts['pending']} waiting for OCR or other deferred work")
        first = listed[0]
        description = (
            f"{', '.join(parts)}: {first['path']} ({first['severity']}: "
            f"{' '.join(first['message'].split())[:120]})"
            + (f" and {len(problems) - 1} more" if len(problems) > 1 else "")
        )
    return CheckOutcome(ITEMS_INDEXED, not problems, description, metadata)
