"""PostgreSQL: for workers spread over many machines.

Claims use ``FOR UPDATE SKIP LOCKED`` so concurrent claimers never wait on each other's
rows. A transaction that makes jobs claimable or final sends one NOTIFY (at most) on the
schema's channel; a listener thread turns those into wake-ups for ``wait()`` and workers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from conveyor.drivers.base import Driver, Handler, Session
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
    translation,
)
from conveyor.drivers.sql import Statements, in_order
from conveyor.drivers.values import Row
from conveyor.errors import DatabaseUnavailable, InvalidArgument

log = logging.getLogger("conveyor.postgres")


class _PostgresSession(Session):
    handlers: ClassVar[Mapping[str, Handler]] = {
        "roll_up_throughput": in_order("roll_up_throughput", "prune_throughput_hours")
    }

    def __init__(
        self, conn: psycopg.Connection[Any], queries: Statements, *, caller: bool = False
    ) -> None:
        super().__init__()
        # A plain cursor, whatever cursor class the connection's owner chose.
        self._cur = psycopg.Cursor(conn, row_factory=dict_row)
        if caller:
            read_as_conveyor(self._cur.adapters)
        self._queries = queries

    def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        with translated():
            self._cur.execute(
                self._queries.text(query, params), params or {}, prepare=prepare(query)
            )
            rows: list[Row] = list(self._cur.fetchall()) if self._cur.description else []
            return rows

    def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        with translated():
            self._cur.execute(self._queries.text(query, params), params or {})
            return self._cur.rowcount

    def send_notification(self, channel: str) -> None:
        payload = notification(self.queues_touched, self.jobs_finished)
        if payload is None:
            return
        with translated():
            self._cur.execute("SELECT pg_notify(%s, %s)", (channel, payload))


class PostgresDriver(PostgresValues, Driver):
    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        Driver.__init__(self)
        PostgresValues.__init__(self, conninfo, schema)
        self._listener: threading.Thread | None = None
        self._closing = threading.Event()
        self._pool = ConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=max(pool_min, pool_max),
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=connect_timeout,
            reconnect_timeout=RECONNECT_TIMEOUT,
            open=False,
            name=f"conveyor-{schema}",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout:
            self._pool.close()
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL at {self.describe()} within {connect_timeout:g}s"
                f": {self._why_unreachable()}"
            ) from None

    def _why_unreachable(self) -> str:
        """The server's reason, from one direct attempt (the pool only says it timed out)."""
        try:
            psycopg.connect(self._conninfo, connect_timeout=2).close()
        except psycopg.Error as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            return lines[0] if lines else type(exc).__name__
        return "the server answered only after the pool gave up"

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET TIME ZONE 'UTC'")

    # -- sessions -------------------------------------------------------------------
    @contextmanager
    def session(self, *, write: bool = True, conn: Any = None) -> Iterator[Session]:
        if conn is not None:
            with self._caller_session(conn) as session:
                yield session
            return
        with (
            self._watching(),
            translated(),
            self._pool.connection(self._checkout_timeout()) as pooled,
            pooled.transaction(),
        ):
            session = _PostgresSession(pooled, self._queries)
            yield session
            session.send_notification(self.channel)
        if session.queues_touched or session.jobs_finished:
            self._announce()

    def write_once(
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
        # Pool connections are in autocommit mode: the statement commits on its own, so
        # the connection is taken and given back without the transaction handling of
        # ``pool.connection()`` (a commit call and its lock): this is every enqueue's path,
        # which is also why ``_watching()`` and ``translated()`` are written out here.
        try:
            pooled = self._pool.getconn(self._checkout_timeout())
            try:
                cur = pooled.cursor(row_factory=dict_row)
                cur.execute(statement, params)
                rows: list[Row] = list(cur.fetchall()) if cur.description else []
            finally:
                self._pool.putconn(pooled)
        except psycopg.Error as exc:
            error = translation(exc)
            if isinstance(error, DatabaseUnavailable):
                self._down = True
            raise error from None
        if self._down:
            self._down = False
            self._pool.check()
        if rows and payload is not None:
            self._announce()
        return rows

    # -- an unreachable server -------------------------------------------------------
    @contextmanager
    def _watching(self) -> Iterator[None]:
        """Note when the server becomes unreachable and when it answers again; on its
        return, the pool drops the idle connections the outage broke (each would
        otherwise fail one caller's operation)."""
        try:
            yield
        except DatabaseUnavailable:
            self._down = True
            raise
        if self._down:
            self._down = False
            self._pool.check()

    @contextmanager
    def _caller_session(self, conn: Any) -> Iterator[Session]:
        if not isinstance(conn, psycopg.Connection):
            raise InvalidArgument(
                "conn: expected a psycopg.Connection for a PostgreSQL queue, "
                f"got {type(conn).__name__}"
            )
        # Inside the caller's transaction we work in a savepoint, so an error of ours
        # never aborts their transaction; the jobs commit or roll back with it.
        if in_own_block(conn):
            with translated(), conn.transaction():
                session = _PostgresSession(conn, self._queries, caller=True)
                yield session
                session.send_notification(self.channel)
        else:
            session = _PostgresSession(conn, self._queries, caller=True)
            yield session
            session.send_notification(self.channel)

    # -- schema ---------------------------------------------------------------------
    def migrate(self, target: int | None = None) -> list[int]:
        applied: list[int] = []
        ident = sql.Identifier(self.schema)
        with translated(), self._pool.connection() as conn, conn.transaction():
            # One migrator at a time per schema, across every process and machine.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"conveyor:{self.schema}",))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.conveyor_migrations ("
                    " version integer PRIMARY KEY, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(ident)
            )
            rows = conn.execute(
                sql.SQL("SELECT version FROM {}.conveyor_migrations").format(ident)
            ).fetchall()
            done = {r[0] for r in rows}
            for migration in self._migrations:
                if migration.version in done or (target and migration.version > target):
                    continue
                # One script, sent as a simple query (no parameters), so function bodies
                # with semicolons of their own need no splitting; bytes: no placeholder
                # parsing.
                conn.execute(migration.sql.encode())
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {}.conveyor_migrations (version, name) VALUES (%s, %s)"
                    ).format(ident),
                    (migration.version, migration.name),
                )
                applied.append(migration.version)
        return applied

    def schema_version(self) -> int:
        with translated(), self._pool.connection() as conn:
            exists = conn.execute(
                "SELECT to_regclass(%s)", (f"{self.schema}.conveyor_migrations",)
            ).fetchone()
            if not exists or exists[0] is None:
                return 0
            row = conn.execute(
                sql.SQL("SELECT max(version) FROM {}.conveyor_migrations").format(
                    sql.Identifier(self.schema)
                )
            ).fetchone()
            return int(row[0] or 0) if row else 0

    def latest_version(self) -> int:
        return self._migrations[-1].version

    def describe_schema(self) -> list[str]:
        with translated(), self._pool.connection() as conn:
            cols = conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable, column_default"
                " FROM information_schema.columns WHERE table_schema = %s"
                " AND table_name LIKE 'conveyor%%' AND table_name != 'conveyor_migrations'",
                (self.schema,),
            ).fetchall()
            indexes = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s"
                " AND tablename LIKE 'conveyor%%' AND tablename != 'conveyor_migrations'",
                (self.schema,),
            ).fetchall()
            constraints = conn.execute(
                "SELECT conname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
                " JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = %s"
                " AND conname NOT LIKE 'conveyor_migrations%%'",
                (self.schema,),
            ).fetchall()
        out = [f"column {t}.{c} {d} nullable={n} default={df}" for t, c, d, n, df in cols]
        out += [f"index {name}: {definition}" for name, definition in indexes]
        out += [f"constraint {name}: {definition}" for name, definition in constraints]
        # Compare shapes, not places: drop the schema name from definitions.
        return sorted(line.replace(f"{self.schema}.", "") for line in out)

    def drop_schema(self) -> None:
        """Remove the schema and everything in it (tests and ``conveyor migrate --drop``)."""
        with translated(), self._pool.connection() as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )

    # -- change notification ------------------------------------------------------------
    def wait_for_change(self, since: int, timeout: float) -> bool:
        self._ensure_listener()
        return super().wait_for_change(since, timeout)

    def _ensure_listener(self) -> None:
        if self._listener is None or not self._listener.is_alive():
            with self._changes:
                if self._listener is None or not self._listener.is_alive():
                    ready = threading.Event()
                    self._listener = threading.Thread(
                        target=self._listen, args=(ready,), name="conveyor-listen", daemon=True
                    )
                    self._listener.start()
                    ready.wait(5.0)

    def _listen(self, ready: threading.Event) -> None:
        delay = 0.1
        while not self._closing.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    ready.set()
                    # Something may have changed while we were not listening.
                    self._announce()
                    delay = 0.1
                    while not self._closing.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._announce()
            except psycopg.Error as exc:
                ready.set()
                log.warning("listener connection lost (%s); reconnecting", one_line(exc))
                self._closing.wait(delay)
                delay = min(delay * 2, 5.0)

    # -- lifecycle ------------------------------------------------------------------
    def ping(self) -> None:
        with translated(), self._pool.connection() as conn:
            conn.execute("SELECT 1").fetchone()

    def close(self) -> None:
        self._closing.set()
        self._pool.close()
        if self._listener is not None:
            self._listener.join(timeout=2.0)
