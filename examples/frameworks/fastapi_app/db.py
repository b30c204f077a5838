"""The application's own table, in the database its queue lives in, and one
transaction per request: psycopg's async pool on PostgreSQL; on SQLite a connection per
request whose statements run on worker threads (sqlite3 has no asynchronous API), one
writing transaction at a time (SQLite's rule anyway): the others wait on the event loop,
not in a thread, so a write lock held elsewhere never ties up the threads."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from conveyor.config import ENV_URL, application_conninfo, database_url
from conveyor.errors import ConfigurationError

# How long start-up waits for PostgreSQL before it gives up with one line.
CONNECT_TIMEOUT_S = 10

SIGNUPS = """CREATE TABLE IF NOT EXISTS signups (
    id {serial} PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    welcome_job BIGINT NOT NULL
)"""


class Duplicate(Exception):
    """The email has signed up already."""


class Database:
    """The database of ``$CONVEYOR_DATABASE_URL`` (``sqlite:///path`` or a
    ``postgresql://`` URL, conveyor's options such as ``?schema=`` included: the pool
    gets the URL without them, and the schema as its ``search_path``)."""

    def __init__(self) -> None:
        self.url = ""
        self._pool: AsyncConnectionPool | None = None
        self._writer = asyncio.Lock()

    async def open(self) -> None:
        self.url = database_url()
        if self.url.startswith("sqlite:///"):
            await asyncio.to_thread(self._create_sqlite)
            return
        conninfo = await asyncio.to_thread(check, self.url)
        self._pool = AsyncConnectionPool(conninfo, max_size=20, open=False)
        try:
            await self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout:
            await self._pool.close()
            self._pool = None
            raise ConfigurationError(
                f"${ENV_URL}: no PostgreSQL connection within {CONNECT_TIMEOUT_S} s"
            ) from None
        async with self._pool.connection() as conn:
            await conn.execute(SIGNUPS.format(serial="BIGSERIAL"))

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @asynccontextmanager
    async def transaction(self, *, write: bool = True) -> AsyncIterator[Transaction]:
        """A transaction that commits when the block ends and rolls back on an error."""
        if self._pool is not None:
            async with self._pool.connection() as conn, conn.transaction():
                yield Transaction(conn, sqlite=False)
            return
        async with self._writer if write else contextlib.nullcontext():
            conn = await asyncio.to_thread(self._connect)
            try:
                await asyncio.to_thread(conn.execute, "BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield Transaction(conn, sqlite=True)
                except BaseException:
                    await asyncio.to_thread(conn.execute, "ROLLBACK")
                    raise
                await asyncio.to_thread(conn.execute, "COMMIT")
            finally:
                await asyncio.to_thread(conn.close)

    def _connect(self) -> sqlite3.Connection:
        # check_same_thread=False: the queue runs its statements on another thread.
        # isolation_level=None: the transactions begin and end where this module says.
        return sqlite3.connect(
            self.url.removeprefix("sqlite:///"), check_same_thread=False, isolation_level=None
        )

    def _create_sqlite(self) -> None:
        with self._connect() as conn:
            conn.execute(SIGNUPS.format(serial="INTEGER"))


def check(url: str) -> str:
    """The libpq URL for the application's pool, after one connection attempt: a URL
    libpq refuses, or a server that does not answer, is a ``ConfigurationError`` with
    one line, before the pool would retry it forever."""
    conninfo = application_conninfo(url)
    try:
        psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.Error as exc:
        reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise ConfigurationError(f"${ENV_URL}: cannot connect: {reason}") from None
    return conninfo


class Transaction:
    """The open transaction: ``conn`` is what ``enqueue(..., conn=...)`` joins."""

    def __init__(self, conn: Any, *, sqlite: bool) -> None:
        self.conn = conn
        self._sqlite = sqlite

    async def insert_signup(self, email: str, welcome_job: int) -> int:
        sql = "INSERT INTO signups (email, welcome_job) VALUES ({p}, {p}) RETURNING id"
        try:
            if self._sqlite:
                cursor = await asyncio.to_thread(
                    self.conn.execute, sql.format(p="?"), (email, welcome_job)
                )
                row = await asyncio.to_thread(cursor.fetchone)
            else:
                cursor = await self.conn.execute(sql.format(p="%s"), (email, welcome_job))
                row = await cursor.fetchone()
        except (sqlite3.IntegrityError, pg_errors.UniqueViolation):
            raise Duplicate(email) from None
        return int(row[0])

    async def signup(self, signup_id: int) -> tuple[str, int] | None:
        sql = "SELECT email, welcome_job FROM signups WHERE id = {p}"
        if self._sqlite:
            cursor = await asyncio.to_thread(self.conn.execute, sql.format(p="?"), (signup_id,))
            row = await asyncio.to_thread(cursor.fetchone)
        else:
            cursor = await self.conn.execute(sql.format(p="%s"), (signup_id,))
            row = await cursor.fetchone()
        return None if row is None else (str(row[0]), int(row[1]))
