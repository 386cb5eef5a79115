"""``where`` clauses for the index's tables (LanceDB's SQL), as plain strings: a kind
that reads the index (its ``neighbors`` relations) builds them without importing it."""

from __future__ import annotations

from collections.abc import Iterable


def sql_string(value: str) -> str:
    """Quote a value as a SQL string literal for a LanceDB filter."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """``column IN (...)`` for string values (``FALSE`` when there are none)."""
    items = [sql_string(v) for v in values]
    return f"{column} IN ({', '.join(items)})" if items else "FALSE"
