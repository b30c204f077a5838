"""PostgreSQL without blocking the event loop: psycopg's async connections and pool,
the same statements as the synchronous backend, and LISTEN/NOTIFY on a task of the
loop for ``wait()``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any, ClassVar

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from conveyor.drivers.aio import AsyncDriver, AsyncHandler, AsyncSession
from conveyor.drivers.operations import Operation
from conveyor.drivers.postgres.dialect import (
    RECONNECT_TIMEOUT,
    PostgresValues,
    in_own_block,
    notification,
    one_line,
    prepare,
    read_as_conveyor,
    translated,
)
from conveyor.drivers.sql import Statements, in_order_async
from conveyor.drivers.values import Row
from conveyor.errors import DatabaseUnavailable, InvalidArgument

log = logging.getLogger("conveyor.postgres")


class _AsyncPostgresSession(AsyncSession):
    handlers: ClassVar[Mapping[str, AsyncHandler]] = {
        "roll_up_throughput": in_order_async("roll_up_throughput", "prune_throughput_hours")
    }

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        queries: Statements,
        *,
        caller: bool = False,
    ) -> None:
        super().__init__()
        # A plain cursor, whatever cursor class the connection's owner chose.
        self._cur = psycopg.AsyncCursor(conn, row_factory=dict_row)
        if caller:
            read_as_conveyor(self._cur.adapters)
        self._queries = queries

    async def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        with translated():
            await self._cur.execute(
                self._queries.text(query, params), params or {}, prepare=prepare(query)
            )
            rows: list[Row] = list(await self._cur.fetchall()) if self._cur.description else []
            return rows

    async def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        with translated():
            await self._cur.execute(self._queries.text(query, params), params or {})
            return self._cur.rowcount

    async def send_notification(self, channel: str) -> None:
        payload = notification(self.queues_touched, self.jobs_finished)
        if payload is not None:
            with translated():
                await self._cur.execute("SELECT pg_notify(%s, %s)", (channel, payload))


class AsyncPostgresDriver(PostgresValues, AsyncDriver):
    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        AsyncDriver.__init__(self)
        PostgresValues.__init__(self, conninfo, schema)
        self._connect_timeout = connect_timeout
        self._listener: asyncio.Task[None] | None = None
        self._pool = AsyncConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=max(pool_min, pool_max),
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=connect_timeout,
            reconnect_timeout=RECONNECT_TIMEOUT,
            open=False,
            name=f"conveyor-async-{schema}",
        )

    async def open(self) -> None:
        try:
            await self._pool.open(wait=True, timeout=self._connect_timeout)
        except PoolTimeout:
            await self._pool.close()
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL at {self.describe()} "
                f"within {self._connect_timeout:g}s"
            ) from None

    @staticmethod
    async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("SET TIME ZONE 'UTC'")

    # -- sessions -------------------------------------------------------------------
    @asynccontextmanager
    async def session(self, *, write: bool = True, conn: Any = None) -> AsyncIterator[AsyncSession]:
        if conn is not None:
            async with self._caller_session(conn) as session:
                yield session
            return
        async with self._watching():
            with translated():
                async with (
                    self._pool.connection(self._checkout_timeout()) as pooled,
                    pooled.transaction(),
                ):
                    session = _AsyncPostgresSession(pooled, self._queries)
                    yield session
                    await session.send_notification(self.channel)
        if session.queues_touched or session.jobs_finished:
            self._announce()

    async def write_once(
        self,
        op: Operation[list[Row]],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        params = op.params()
        statement = self._queries.text(op.op, params)
        payload = notification(queues, finished)
        if payload is not None:
            statement = self._announced(statement)
            params = {**params, "notify_channel": self.channel, "notify_payload": payload}
        async with self._watching():
            with translated():
                async with self._pool.connection(self._checkout_timeout()) as pooled:
                    cur = pooled.cursor(row_factory=dict_row)
                    await cur.execute(statement, params)
                    rows: list[Row] = list(await cur.fetchall()) if cur.description else []
        if rows and payload is not None:
            self._announce()
        return rows

    # -- an unreachable server -------------------------------------------------------
    @asynccontextmanager
    async def _watching(self) -> AsyncIterator[None]:
        """Note when the server becomes unreachable and when it answers again; on its
        return, the pool drops the idle connections the outage broke."""
        try:
            yield
        except DatabaseUnavailable:
            self._down = True
            raise
        if self._down:
            self._down = False
            await self._pool.check()

    @asynccontextmanager
    async def _caller_session(self, conn: Any) -> AsyncIterator[AsyncSession]:
        if not isinstance(conn, psycopg.AsyncConnection):
            raise InvalidArgument(
                "conn: expected a psycopg.AsyncConnection for an asynchronous PostgreSQL "
                f"queue, got {type(conn).__name__}"
            )
        # Inside the caller's transaction we work in a savepoint, so an error of ours
        # never aborts their transaction; the jobs commit or roll back with it.
        with translated():
            if in_own_block(conn):
                async with conn.transaction():
                    session = _AsyncPostgresSession(conn, self._queries, caller=True)
                    yield session
                    await session.send_notification(self.channel)
            else:
                session = _AsyncPostgresSession(conn, self._queries, caller=True)
                yield session
                await session.send_notification(self.channel)

    # -- change notification ------------------------------------------------------------
    async def wait_for_change(self, since: int, timeout: float) -> bool:
        if self._listener is None or self._listener.done():
            ready = asyncio.Event()
            self._listener = asyncio.create_task(self._listen(ready), name="conveyor-listen")
            with suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), 5.0)
        return await super().wait_for_change(since, timeout)

    async def _listen(self, ready: asyncio.Event) -> None:
        delay = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    ready.set()
                    self._announce()  # something may have changed while we were not listening
                    delay = 0.1
                    async for _ in conn.notifies():
                        self._announce()
            except psycopg.Error as exc:
                ready.set()
                log.warning("listener connection lost (%s); reconnecting", one_line(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    # -- lifecycle ------------------------------------------------------------------
    async def ping(self) -> None:
        with translated():
            async with self._pool.connection() as conn:
                await conn.execute("SELECT 1")

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._listener
        await self._pool.close()
