"""The git kind's relation in ``neighbors``: the latest commits that changed a file.

A commit's document links to each file it changed, so the commits of a file are
among the documents that link to it; those links are listed here, not among the
file's backlinks."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from rag_sources.kinds.git.keys import COMMIT_KEY_PREFIX
from rag_sources.relations import Incoming, ReadDocuments, Relation
from rag_sources.where import sql_in

MAX_COMMITS = 10  # the most recent commits that touched a file, for `neighbors`


class CommitOut(BaseModel):
    """A commit that changed a file (git sources)."""

    doc_id: str = Field(description="Open the commit (message, changed files, diff) with it.")
    sha: str
    subject: str
    author: str | None
    date: str | None


def is_commit(path: str) -> bool:
    return path.startswith(COMMIT_KEY_PREFIX)


def touching_commits(
    read: ReadDocuments, doc: dict[str, Any], incoming: list[Incoming]
) -> list[BaseModel]:
    """The newest commits among the documents linking to a file."""
    ids = [link.doc_id for link in incoming if is_commit(link.path)]
    if not ids:
        return []
    rows = read(sql_in("doc_id", ids), ["doc_id", "path", "title", "modified", "frontmatter_json"])
    rows.sort(key=lambda r: (r["modified"] is not None, r["modified"]), reverse=True)
    out: list[BaseModel] = []
    for row in rows[:MAX_COMMITS]:
        meta = json.loads(row["frontmatter_json"] or "{}")
        author = meta.get("author") or {}
        out.append(
            CommitOut(
                doc_id=row["doc_id"],
                sha=row["path"][len(COMMIT_KEY_PREFIX) :],
                subject=row["title"],
                author=author.get("name"),
                date=row["modified"].isoformat() if row["modified"] else None,
            )
        )
    return out


COMMITS = Relation(
    name="commits",
    item=CommitOut,
    description="For a file of a git source: the latest commits that changed it.",
    find=touching_commits,
    claims_link_from=is_commit,
)
