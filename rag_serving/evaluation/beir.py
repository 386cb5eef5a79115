"""Loading a BEIR-layout dataset folder.

::

    DATASET_DIR/
      corpus.jsonl        {"_id": "...", "title": "...", "text": "..."} per line
      queries.jsonl       {"_id": "...", "text": "..."} per line
      qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score, after a header line

Malformed input raises ``DatasetError`` (exit code 2) naming the file and line.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_sources.errors import RaglineError

__all__ = [
    "BeirDataset",
    "BeirDocument",
    "DatasetError",
    "available_splits",
    "load_beir",
    "load_corpus",
    "load_qrels",
    "load_queries",
    "resolve_split",
]

Qrels = dict[str, dict[str, int]]  # query id → corpus id → graded relevance


class DatasetError(RaglineError):
    """An evaluation dataset is missing or malformed."""

    exit_code = 2


@dataclass(frozen=True)
class BeirDocument:
    """One corpus entry."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirDataset:
    """A corpus, its queries and the relevance judgements of one split."""

    root: Path
    split: str
    corpus: list[BeirDocument]
    queries: dict[str, str]  # query id → text, in file order
    qrels: Qrels
    corpus_sha256: str = field(default="")

    def judged_queries(self) -> list[str]:
        """Ids of the queries that have judgements in this split, in file order."""
        return [qid for qid in self.queries if qid in self.qrels]

    def unjudged_queries(self) -> list[str]:
        """Ids of the queries without judgements in this split (not evaluated)."""
        return [qid for qid in self.queries if qid not in self.qrels]

    def qrels_without_query(self) -> list[str]:
        """Query ids judged in the split but absent from queries.jsonl."""
        return [qid for qid in self.qrels if qid not in self.queries]


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def _json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSON Lines file."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found (a BEIR folder holds corpus.jsonl, "
                           "queries.jsonl and qrels/<split>.tsv)")  # fmt: skip
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(
                        f"{_where(path, number)}: not valid JSON ({exc.msg} at column {exc.pos + 1})"
                    ) from exc
                if not isinstance(value, dict):
                    raise DatasetError(
                        f"{_where(path, number)}: expected a JSON object, got {type(value).__name__}"
                    )
                rows.append((number, value))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    return rows


def _id(value: dict[str, Any], path: Path, number: int) -> str:
    raw = value.get("_id")
    if isinstance(raw, bool) or not isinstance(raw, str | int) or str(raw) == "":
        raise DatasetError(f'{_where(path, number)}: missing or invalid "_id" (a non-empty string)')
    return str(raw)


def _string(value: dict[str, Any], key: str, path: Path, number: int, required: bool) -> str:
    raw = value.get(key)
    if raw is None and not required:
        return ""
    if not isinstance(raw, str):
        what = "missing" if raw is None else f"not a string ({type(raw).__name__})"
        raise DatasetError(f'{_where(path, number)}: "{key}" is {what}')
    return raw


def load_corpus(path: Path) -> tuple[list[BeirDocument], str]:
    """The documents of ``corpus.jsonl`` and a SHA-256 over their ids, titles and texts."""
    digest = hashlib.sha256()
    documents: list[BeirDocument] = []
    seen: dict[str, int] = {}
    for number, value in _json_lines(path):
        doc_id = _id(value, path, number)
        if doc_id in seen:
            raise DatasetError(
                f"{_where(path, number)}: duplicate _id {doc_id!r} (first on line {seen[doc_id]})"
            )
        seen[doc_id] = number
        title = _string(value, "title", path, number, required=False)
        text = _string(value, "text", path, number, required=True)
        documents.append(BeirDocument(doc_id, title, text))
        digest.update(json.dumps([doc_id, title, text], ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return documents, digest.hexdigest()


def load_queries(path: Path) -> dict[str, str]:
    """Query id → text from ``queries.jsonl``, in file order."""
    queries: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, value in _json_lines(path):
        query_id = _id(value, path, number)
        if query_id in queries:
            raise DatasetError(
                f"{_where(path, number)}: duplicate _id {query_id!r} (first on line {lines[query_id]})"
            )
        lines[query_id] = number
        queries[query_id] = _string(value, "text", path, number, required=True)
    return queries


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def load_qrels(path: Path) -> Qrels:
    """Judgements from a qrels TSV (``query-id``, ``corpus-id``, integer ``score``).

    The first line is skipped when it is a header (its score column is not an
    integer), as BEIR writes it."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    qrels: Qrels = {}
    lines: dict[tuple[str, str], int] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and len(fields) == 3 and not _is_int(fields[2].strip()):
            continue  # header: query-id, corpus-id, score
        if len(fields) != 3:
            raise DatasetError(
                f"{_where(path, number)}: expected 3 tab-separated fields "
                f"(query-id, corpus-id, score), got {len(fields)}"
            )
        query_id, doc_id, score = (f.strip() for f in fields)
        if not query_id or not doc_id:
            raise DatasetError(f"{_where(path, number)}: empty query-id or corpus-id")
        if not _is_int(score):
            raise DatasetError(f"{_where(path, number)}: score {score!r} is not an integer")
        key = (query_id, doc_id)
        if key in lines:
            raise DatasetError(
                f"{_where(path, number)}: query {query_id!r} judges {doc_id!r} twice "
                f"(first on line {lines[key]})"
            )
        lines[key] = number
        qrels.setdefault(query_id, {})[doc_id] = int(score)
    return qrels


def available_splits(root: Path) -> list[str]:
    """Names of the splits with a ``qrels/<split>.tsv`` file, sorted."""
    qrels_dir = root / "qrels"
    if not qrels_dir.is_dir():
        return []
    return sorted(p.stem for p in qrels_dir.glob("*.tsv") if p.is_file())


def resolve_split(root: Path, split: str | None) -> str:
    """The split to evaluate: ``split`` if it exists; by default ``test``, or the
    only split there is. Raises ``DatasetError`` listing the available splits."""
    splits = available_splits(root)
    if not splits:
        raise DatasetError(f"{root / 'qrels'}: no qrels/<split>.tsv files found")
    if split is None:
        if "test" in splits:
            return "test"
        if len(splits) == 1:
            return splits[0]
        raise DatasetError(
            f"{root}: several splits and no `test`; choose one with --split "
            f"(available: {', '.join(splits)})"
        )
    if split not in splits:
        raise DatasetError(
            f"{root / 'qrels' / (split + '.tsv')}: no such split {split!r} "
            f"(available: {', '.join(splits)})"
        )
    return split


def load_beir(root: Path, split: str | None = None) -> BeirDataset:
    """Load corpus, queries and the qrels of ``split`` (see ``resolve_split``)."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder (expected a BEIR dataset folder)")
    name = resolve_split(root, split)
    qrels = load_qrels(root / "qrels" / f"{name}.tsv")
    queries = load_queries(root / "queries.jsonl")
    corpus, digest = load_corpus(root / "corpus.jsonl")
    return BeirDataset(root, name, corpus, queries, qrels, digest)
