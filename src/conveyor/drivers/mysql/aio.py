"""MySQL without blocking the event loop: aiomysql's connections and pool, the same
statements and handlers as the synchronous backend, and the same watch of the count
deltas (a task of the loop) for ``wait()``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiomysql
import pymysql

from conveyor.drivers.aio import AsyncDriver, AsyncSession
from conveyor.drivers.mysql.dialect import (
    MySQLValues,
    Server,
    connect_failure,
    translated,
)
from conveyor.drivers.mysql.handlers import Change, Rows, Step
from conveyor.drivers.mysql.session import (
    ASYNC_HANDLERS,
    SCHEMA_VERSION,
    WATCH,
    WATCH_INTERVAL,
    Counting,
    CursorStatements,
    begin_statements,
    closed_by_server,
    counting,
    is_missing_table,
    own_transaction,
    runs_alone,
    session_init,
)
from conveyor.drivers.operations import Operation
from conveyor.drivers.sql import Statements
from conveyor.drivers.values import Row
from conveyor.errors import (
    DatabaseError,
    InvalidArgument,
    TransactionConflict,
)
from conveyor.retry import CONFLICT_RETRIES, conflict_pause

log = logging.getLogger("conveyor.mysql")


class _AsyncMySQLSession(CursorStatements, AsyncSession):
    handlers = ASYNC_HANDLERS

    def __init__(
        self, cursor: Any, queries: Statements, *, consecutive_ids: bool, counting: Counting
    ) -> None:
        super().__init__()
        self._use(cursor, queries, consecutive_ids, counting=counting)

    async def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        rows: list[Row] = await self.run_step(Rows(query, params or {}))
        return rows

    async def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        count: int = await self.run_step(Change(query, params or {}))
        return count

    async def run_step(self, step: Step) -> Any:
        with translated():
            await self._cur.execute(*self._bound(step))
            return self._answer(step, await self._cur.fetchall() if isinstance(step, Rows) else ())


class AsyncMySQLDriver(MySQLValues, AsyncDriver):
    def __init__(
        self,
        url: str,
        *,
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: float = 10.0,
        client: str = "pymysql",  # the synchronous backend's: this one is aiomysql's
    ) -> None:
        AsyncDriver.__init__(self)
        MySQLValues.__init__(self, Server.from_url(url))
        self._pool_min = pool_min
        self._pool_max = max(pool_min, pool_max)
        self._connect_timeout = connect_timeout
        self._pool: Any = None
        self._watcher: asyncio.Task[None] | None = None
        self.consecutive_ids = True
        self.counting = Counting.LATEST

    def _kwargs(self) -> dict[str, Any]:
        options = self.server.connect_kwargs(self._connect_timeout)
        options["db"] = options.pop("database")
        return options

    async def open(self) -> None:
        try:
            conn = await aiomysql.connect(**self._kwargs())
        except (pymysql.Error, OSError) as exc:  # a timeout included
            raise connect_failure(exc, self.describe()) from None
        try:
            async with conn.cursor() as cur:
                await cur.execute("SELECT VERSION(), @@innodb_autoinc_lock_mode")
                version, lock_mode = await cur.fetchone()
                try:
                    await cur.execute(SCHEMA_VERSION)
                except pymysql.Error as exc:
                    if not is_missing_table(exc):
                        raise
                    schema = None
                else:
                    (schema,) = await cur.fetchone()
        finally:
            conn.close()
        self.consecutive_ids = int(lock_mode) in (0, 1)
        self.counting = counting(schema)
        self._load(str(version))
        with translated():
            self._pool = await aiomysql.create_pool(
                minsize=self._pool_min,
                maxsize=self._pool_max,
                init_command=session_init(str(version)),
                **self._kwargs(),
            )

    # -- sessions -------------------------------------------------------------------
    @asynccontextmanager
    async def session(self, *, write: bool = True, conn: Any = None) -> AsyncIterator[AsyncSession]:
        if conn is not None:
            async with self._caller_session(conn) as session:
                yield session
            return
        if self._pool is None:
            raise DatabaseError("the MySQL queue is not open")
        with translated():
            pooled = await self._pool.acquire()
        async with self._pooled_session(pooled, begin=True) as session:
            yield session
        if session.queues_touched or session.jobs_finished:
            self._announce()

    @asynccontextmanager
    async def _pooled_session(
        self, pooled: Any, *, begin: bool
    ) -> AsyncIterator[_AsyncMySQLSession]:
        """A session on a pooled connection: a transaction of its own when ``begin``
        (committed at the end), else in autocommit. The connection goes back to the
        pool; one that no longer answers is closed first, and the pool drops it."""
        try:
            if begin:
                with translated():
                    await pooled.begin()
            session = _AsyncMySQLSession(
                await pooled.cursor(aiomysql.DictCursor),
                self._queries,
                consecutive_ids=self.consecutive_ids,
                counting=self.counting,
            )
            try:
                yield session
            except BaseException:
                try:
                    await pooled.rollback()
                except Exception:
                    pooled.close()  # broken: the pool drops it
                raise
            if begin:
                try:
                    with translated():
                        await pooled.commit()
                except BaseException:
                    pooled.close()
                    raise
        finally:
            self._pool.release(pooled)

    async def write_once(
        self,
        op: Operation[list[Row]],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        alone = runs_alone(op, self._queries)
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                if alone:
                    return await self._write_alone(op, queues)
                return await super().write_once(op, queues=queues, finished=finished)
            except TransactionConflict:
                if attempt == CONFLICT_RETRIES:
                    raise
                await asyncio.sleep(conflict_pause(attempt))
        raise AssertionError("unreachable")

    async def _write_alone(self, op: Operation[list[Row]], queues: Iterable[str]) -> list[Row]:
        """``op`` autocommitted, in one round trip (``runs_alone``), on a connection the
        server has not closed: the pool drops those whose stream it saw end, and a
        socket with something to read is dropped here (the server's closing, not yet
        read)."""
        if self._pool is None:
            raise DatabaseError("the MySQL queue is not open")
        for _ in range(2):
            with translated():
                pooled = await self._pool.acquire()
            sock = pooled._writer.transport.get_extra_info("socket") if pooled._writer else None
            if sock is None or not closed_by_server(sock.fileno()):
                break
            pooled.close()
            self._pool.release(pooled)
        else:
            with translated():
                pooled = await self._pool.acquire()
        async with self._pooled_session(pooled, begin=False) as session:
            rows = await session.run(op)
            if rows:
                session.notify(queues=queues)
        if rows:
            self._announce()
        return rows

    @asynccontextmanager
    async def _caller_session(self, conn: Any) -> AsyncIterator[AsyncSession]:
        if not isinstance(conn, aiomysql.Connection):
            raise InvalidArgument(
                "conn: expected an aiomysql Connection for an asynchronous MySQL queue, "
                f"got {type(conn).__name__}"
            )
        own = own_transaction(conn)
        begin, commit, rollback = begin_statements(own)
        cur = await conn.cursor(aiomysql.DictCursor)
        with translated():
            await cur.execute(begin)
        session = _AsyncMySQLSession(
            cur, self._queries, consecutive_ids=self.consecutive_ids, counting=self.counting
        )
        try:
            yield session
        except BaseException:
            with suppress(pymysql.Error):
                await cur.execute(rollback)
            raise
        with translated():
            await cur.execute(commit)
        if own and (session.queues_touched or session.jobs_finished):
            self._announce()

    # -- change notification ------------------------------------------------------------
    @property
    def hears_other_processes(self) -> bool:
        return True

    async def wait_for_change(self, since: int, timeout: float) -> bool:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch(), name="conveyor-mysql-watch")
        return await super().wait_for_change(since, timeout)

    async def _watch(self) -> None:
        seen: tuple[Any, ...] | None = None
        retry = 0.1
        while True:
            try:
                # A connection of its own: the watch never takes one from the pool.
                async with await aiomysql.connect(**self._kwargs()) as conn, conn.cursor() as cur:
                    while True:
                        await cur.execute(WATCH)
                        now = tuple(await cur.fetchone())
                        if now != seen:
                            self._announce()
                            seen = now
                        retry = 0.1
                        await asyncio.sleep(WATCH_INTERVAL)
            except (pymysql.Error, OSError) as exc:
                log.warning("cannot watch the database for changes (%s); retrying", exc)
                await asyncio.sleep(retry)
                retry = min(retry * 2, 5.0)

    # -- lifecycle ------------------------------------------------------------------
    async def ping(self) -> None:
        if self._pool is None:
            raise DatabaseError("the MySQL queue is not open")
        with translated():
            async with self._pool.acquire() as conn, conn.cursor() as cur:
                await cur.execute("SELECT 1")
                await cur.fetchone()

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._watcher
        if self._pool is not None:
            self._pool.close()
            await self._pool.wait_closed()
