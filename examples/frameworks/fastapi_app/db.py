"""The application's own table, in the database its queue lives in, and one
transaction per request: psycopg's async pool on PostgreSQL, aiomysql's on MySQL and
MariaDB (the asynchronous queue's own driver, whose connections it joins); on SQLite a
connection per
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

import aiomysql
import psycopg
import pymysql
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from conveyor.config import ENV_URL, application_conninfo, database_url, parse_url
from conveyor.drivers.mysql.dialect import Server
from conveyor.errors import ConfigurationError

# How long start-up waits for PostgreSQL before it gives up with one line.
CONNECT_TIMEOUT_S = 10

SIGNUPS = """CREATE TABLE IF NOT EXISTS signups (
    id {serial} PRIMARY KEY,
    email VARCHAR(200) NOT NULL UNIQUE,
    welcome_job BIGINT NOT NULL
)"""
_MYSQL_DUPLICATE_KEY = 1062


class Duplicate(Exception):
    """The email has signed up already."""


class Database:
    """The database of ``$CONVEYOR_DATABASE_URL`` (``sqlite:///path``, a
    ``postgresql://`` URL, conveyor's options such as ``?schema=`` included: the pool
    gets the URL without them, and the schema as its ``search_path``; or a ``mysql://``
    URL)."""

    def __init__(self) -> None:
        self.url = ""
        self._pool: AsyncConnectionPool | None = None
        self._mysql: aiomysql.Pool | None = None
        self._writer = asyncio.Lock()

    async def open(self) -> None:
        self.url = database_url()
        if self.url.startswith("sqlite:///"):
            await asyncio.to_thread(self._create_sqlite)
            return
        if parse_url(self.url).backend == "mysql":
            await self._open_mysql()
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

    async def _open_mysql(self) -> None:
        options = mysql_options(self.url)
        try:
            self._mysql = await aiomysql.create_pool(maxsize=20, **options)
        except pymysql.Error as exc:
            raise ConfigurationError(f"${ENV_URL}: cannot connect: {exc.args[-1]}") from None
        async with self._mysql.acquire() as conn, conn.cursor() as cur:
            await cur.execute(SIGNUPS.format(serial="BIGINT AUTO_INCREMENT"))

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._mysql is not None:
            self._mysql.close()
            await self._mysql.wait_closed()
            self._mysql = None

    @asynccontextmanager
    async def transaction(self, *, write: bool = True) -> AsyncIterator[Transaction]:
        """A transaction that commits when the block ends and rolls back on an error."""
        if self._pool is not None:
            async with self._pool.connection() as conn, conn.transaction():
                yield Transaction(conn, dialect="postgresql")
            return
        if self._mysql is not None:
            async with self._mysql.acquire() as conn:
                await conn.begin()
                try:
                    yield Transaction(conn, dialect="mysql")
                except BaseException:
                    await conn.rollback()
                    raise
                await conn.commit()
            return
        async with self._writer if write else contextlib.nullcontext():
            conn = await asyncio.to_thread(self._connect)
            try:
                await asyncio.to_thread(conn.execute, "BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield Transaction(conn, dialect="sqlite")
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


def mysql_options(url: str) -> dict[str, Any]:
    """aiomysql's (and PyMySQL's) connection options for a ``mysql://`` URL: the
    queue's own, but with transactions that the application begins and ends, at READ
    COMMITTED (as conveyor's), in UTC."""
    options = Server.from_url(url).connect_kwargs(CONNECT_TIMEOUT_S)
    options.update(
        db=options.pop("database"),
        autocommit=False,
        init_command="SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    )
    return options


def check(url: str) -> str:
    """The libpq URL for the application's pool (or the MySQL URL), after one connection
    attempt: a URL the driver refuses, or a server that does not answer, is a
    ``ConfigurationError`` with one line, before the pool would retry it forever."""
    if parse_url(url).backend == "mysql":
        options = mysql_options(url)
        options["database"] = options.pop("db")
        try:
            pymysql.connect(**options).close()
        except pymysql.Error as exc:
            raise ConfigurationError(f"${ENV_URL}: cannot connect: {exc.args[-1]}") from None
        return url
    conninfo = application_conninfo(url)
    try:
        psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
    except psycopg.Error as exc:
        reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise ConfigurationError(f"${ENV_URL}: cannot connect: {reason}") from None
    return conninfo


class Transaction:
    """The open transaction: ``conn`` is what ``enqueue(..., conn=...)`` joins."""

    def __init__(self, conn: Any, *, dialect: str) -> None:
        self.conn = conn
        self._sqlite = dialect == "sqlite"
        self._mysql = dialect == "mysql"

    async def insert_signup(self, email: str, welcome_job: int) -> int:
        if self._mysql:  # no INSERT … RETURNING on MySQL: the new row's id instead
            try:
                async with self.conn.cursor() as cur:
                    await cur.execute(
                        "INSERT INTO signups (email, welcome_job) VALUES (%s, %s)",
                        (email, welcome_job),
                    )
                    return int(cur.lastrowid)
            except pymysql.err.IntegrityError as exc:
                if exc.args and exc.args[0] == _MYSQL_DUPLICATE_KEY:
                    raise Duplicate(email) from None
                raise
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
        if self._mysql:
            async with self.conn.cursor() as cur:
                await cur.execute(sql.format(p="%s"), (signup_id,))
                row = await cur.fetchone()
        elif self._sqlite:
            cursor = await asyncio.to_thread(self.conn.execute, sql.format(p="?"), (signup_id,))
            row = await asyncio.to_thread(cursor.fetchone)
        else:
            cursor = await self.conn.execute(sql.format(p="%s"), (signup_id,))
            row = await cursor.fetchone()
        return None if row is None else (str(row[0]), int(row[1]))
