"""The application's own tables, kept in the queue's database.

Every example stores its domain (books, videos, messages, pages) next to conveyor's
tables, in the same SQLite file or the same PostgreSQL schema, so a domain write and the
job it implies commit in one transaction: ``q.enqueue(..., conn=tx.conn)``.

SQL is written once with ``:name`` parameters; on PostgreSQL they become psycopg's
``%(name)s``. Anything the two dialects spell differently (DDL) is passed per dialect."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from conveyor.config import database_url, parse_url

_PARAM = re.compile(r"(?<![:\w]):(\w+)")


class Tx:
    """One open transaction: ``conn`` is the raw connection (for ``conn=``)."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self.conn = conn
        self.dialect = dialect

    def _sql(self, statement: str) -> str:
        return _PARAM.sub(r"%(\1)s", statement) if self.dialect == "postgresql" else statement

    def execute(self, statement: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement; returns the number of rows it changed."""
        cur = self.conn.cursor()
        cur.execute(self._sql(statement), dict(params or {}))
        return int(cur.rowcount)

    def all(self, statement: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        cur = self.conn.cursor()
        cur.execute(self._sql(statement), dict(params or {}))
        if cur.description is None:
            return []
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def one(self, statement: str, params: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        rows = self.all(statement, params)
        return rows[0] if rows else None


class AppDatabase:
    """Connections to the database behind a conveyor URL, for the application's tables.

    SQLite: a connection per transaction (cheap), ``BEGIN IMMEDIATE`` for writes so
    concurrent writers queue on the lock instead of failing. PostgreSQL: a small pool,
    each connection's ``search_path`` set to the queue's schema."""

    def __init__(self, url: str | None, *, pool_size: int = 8) -> None:
        settings = parse_url(database_url(url))
        self.dialect = settings.backend
        self._pool: Any = None
        self._lock = threading.Lock()
        if self.dialect == "sqlite":
            self.path = settings.target
            if self.path == ":memory:":
                raise ValueError("the examples need a database file, not :memory:")
            return
        from psycopg import sql
        from psycopg_pool import ConnectionPool

        schema = settings.backend_options.get("schema", "public")
        setting = sql.SQL("SET search_path TO {}").format(sql.Identifier(schema))

        def configure(conn: Any) -> None:
            conn.execute(setting)

        self._pool = ConnectionPool(
            settings.target,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=configure,
            open=True,
            name=f"examples-{schema}",
        )

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Tx]:
        """A transaction, committed when the block ends, rolled back if it raises."""
        if self._pool is not None:
            with self._pool.connection() as conn, conn.transaction():
                yield Tx(conn, self.dialect)
            return
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield Tx(conn, self.dialect)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def create(self, *, sqlite: str, postgresql: str) -> None:
        """Create the application's tables (statements separated by ``;``), once."""
        script = sqlite if self.dialect == "sqlite" else postgresql
        with self._lock, self.transaction() as tx:
            if self.dialect == "postgresql":  # two servers starting at once: one at a time
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('examples:' || current_schema()))"
                )
            for statement in script.split(";"):
                if statement.strip():
                    tx.execute(statement)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
