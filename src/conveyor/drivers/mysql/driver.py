"""MySQL and MariaDB: for workers spread over many machines, where MySQL is what runs.

Claims use ``FOR UPDATE SKIP LOCKED`` (MariaDB 10.6, MySQL 8.0). Transactions run at READ
COMMITTED, so a claim's range scan takes no gap locks that would make enqueuers wait.
A transaction the server rolls back to break a deadlock or a lock wait (1213, 1205)
raises ``TransactionConflict``: a statement committed on its own is run again here, a
queue's own transaction by the queue.

MySQL has no LISTEN/NOTIFY: a watcher thread reads the newest rows of the count deltas
(every change of a job's state adds one, by trigger) every 50 ms, an index probe, and
announces a change when they differ."""

from __future__ import annotations

import importlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

import pymysql
import pymysql.cursors

from conveyor.drivers.base import Driver, Session
from conveyor.drivers.mysql.clients import PYMYSQL, mysqlclient_escape
from conveyor.drivers.mysql.clients import client as mysql_client
from conveyor.drivers.mysql.dialect import (
    MySQLValues,
    Server,
    connect_failure,
    is_driver_error,
    migration_statements,
    translated,
    translation,
)
from conveyor.drivers.mysql.handlers import Change, Rows, Step
from conveyor.drivers.mysql.session import (
    SCHEMA_VERSION,
    SESSION_SETUP,
    SYNC_HANDLERS,
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
)
from conveyor.drivers.operations import Operation
from conveyor.drivers.sql import Statements
from conveyor.drivers.values import Row
from conveyor.errors import DatabaseError, DatabaseUnavailable, InvalidArgument, TransactionConflict
from conveyor.retry import CONFLICT_RETRIES, conflict_pause

log = logging.getLogger("conveyor.mysql")


class _MySQLSession(CursorStatements, Session):
    handlers = SYNC_HANDLERS

    def __init__(
        self,
        cursor: Any,
        queries: Statements,
        *,
        consecutive_ids: bool,
        escape: Callable[[Any], str] | None = None,
        counting: Counting = Counting.LATEST,
    ) -> None:
        super().__init__()
        self._use(cursor, queries, consecutive_ids, escape, counting)

    def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        rows: list[Row] = self.run_step(Rows(query, params or {}))
        return rows

    def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        count: int = self.run_step(Change(query, params or {}))
        return count

    def run_step(self, step: Step) -> Any:
        with translated():
            self._cur.execute(*self._bound(step))
            return self._answer(step, self._cur.fetchall() if isinstance(step, Rows) else ())


def _caller_cursor(conn: Any) -> tuple[Any, Callable[[Any], str]]:
    """A dict cursor on a caller's connection, and how to escape a value for it: a
    PyMySQL connection, or a mysqlclient one (``MySQLdb``: Django's MySQL engine)."""
    if isinstance(conn, pymysql.connections.Connection):
        return conn.cursor(pymysql.cursors.DictCursor), conn.escape
    mysqldb = sys.modules.get("MySQLdb")
    connection = getattr(mysqldb, "connections", None)
    if connection is not None and isinstance(conn, connection.Connection):
        cursors = importlib.import_module("MySQLdb.cursors")
        return conn.cursor(cursors.DictCursor), mysqlclient_escape(conn)
    raise InvalidArgument(
        "conn: expected a PyMySQL or mysqlclient (MySQLdb) connection for a MySQL queue, "
        f"got {type(conn).__name__}"
    )


def _counting(cur: Any) -> Counting:
    """``counting`` for the schema the cursor's database holds."""
    try:
        cur.execute(SCHEMA_VERSION)
    except Exception as exc:
        if not is_driver_error(exc):
            raise
        if is_missing_table(exc):
            return Counting.LATEST
        raise
    (version,) = cur.fetchone()
    return counting(version)


class _Pool:
    """Idle connections kept for reuse, at most ``size`` open at once."""

    def __init__(self, open_one: Callable[[], Any], size: int, timeout: float) -> None:
        self._open = open_one
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(max(1, size))
        self._timeout = timeout
        self._all: set[Any] = set()
        self._lock = threading.Lock()
        self.closed = False

    def get(self) -> Any:
        if self.closed:
            raise DatabaseError("the MySQL queue is closed")
        if not self._slots.acquire(timeout=self._timeout):
            raise DatabaseUnavailable(f"no MySQL connection available within {self._timeout:g}s")
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        try:
            conn = self._open()
        except BaseException:
            self._slots.release()
            raise
        with self._lock:
            self._all.add(conn)
        return conn

    def put(self, conn: Any, *, broken: bool = False) -> None:
        if broken or self.closed:
            with self._lock:
                self._all.discard(conn)
            with suppress(Exception):
                conn.close()
        else:
            self._idle.put(conn)
        self._slots.release()

    def drop_idle(self) -> None:
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                self._all.discard(conn)
            with suppress(Exception):
                conn.close()

    def close(self) -> None:
        self.closed = True
        with self._lock:
            conns, self._all = list(self._all), set()
        for conn in conns:
            with suppress(Exception):
                conn.close()


class MySQLDriver(MySQLValues, Driver):
    def __init__(
        self,
        url: str,
        *,
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: float = 10.0,
        client: str = PYMYSQL,
    ) -> None:
        Driver.__init__(self)
        MySQLValues.__init__(self, Server.from_url(url))
        self._client = mysql_client(client)
        self._connect_timeout = connect_timeout
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        self._pool = _Pool(self._connect, max(pool_min, pool_max), connect_timeout)
        conn = self._pool.get()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION(), @@innodb_autoinc_lock_mode")
                version, lock_mode = cur.fetchone()
                self.counting = _counting(cur)
        except self._client.error as exc:
            self._pool.put(conn, broken=True)
            self._pool.close()
            raise translation(exc) from None
        self._pool.put(conn)
        self.server_version = str(version)
        self.consecutive_ids = int(lock_mode) in (0, 1)
        self._load(self.server_version)

    def _connect(self) -> Any:
        kwargs = self.server.connect_kwargs(self._connect_timeout, self._client.conversions)
        try:
            conn = self._client.connect(**kwargs)
            with conn.cursor() as cur:
                for statement in SESSION_SETUP:
                    cur.execute(statement)
        except self._client.error as exc:
            raise connect_failure(exc, self.describe()) from None
        return conn

    # -- sessions -------------------------------------------------------------------
    @contextmanager
    def session(self, *, write: bool = True, conn: Any = None) -> Iterator[Session]:
        if conn is not None:
            with self._caller_session(conn) as session:
                yield session
            return
        with self._pooled_session(self._begin(), commit=True) as session:
            yield session
        if session.queues_touched or session.jobs_finished:
            self._announce()

    @contextmanager
    def _pooled_session(self, pooled: Any, *, commit: bool) -> Iterator[_MySQLSession]:
        """A session on a pooled connection (its transaction begun, or in autocommit),
        committed when ``commit``; the connection goes back to the pool, or is thrown
        away when it no longer answers."""
        broken = True
        try:
            session = _MySQLSession(
                pooled.cursor(self._client.dict_cursor),
                self._queries,
                consecutive_ids=self.consecutive_ids,
                escape=self._client.escape(pooled),
                counting=self.counting,
            )
            try:
                yield session
            except BaseException:
                try:  # a connection that still answers is kept
                    pooled.rollback()
                except self._client.error:
                    pass  # broken: the connection is thrown away
                else:
                    broken = False
                raise
            if commit:
                with translated():
                    pooled.commit()
            broken = False
        finally:
            self._pool.put(pooled, broken=broken)

    def _begin(self) -> Any:
        """A pooled connection with a transaction begun. An idle connection the server
        dropped (a restart, wait_timeout) is replaced once, before anything ran on it."""
        for attempt in range(2):
            pooled = self._pool.get()
            try:
                pooled.begin()
            except self._client.gone as exc:
                self._pool.put(pooled, broken=True)
                self._pool.drop_idle()  # dropped together, as a server restart does
                if attempt:
                    raise translation(exc) from None
                continue
            except self._client.error as exc:
                self._pool.put(pooled, broken=True)
                raise translation(exc) from None
            return pooled
        raise AssertionError("unreachable")

    def write_once(
        self,
        op: Operation[list[Row]],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        # A statement committed on its own: after a deadlock or a lock wait that ran
        # out, nothing of it was written, and it runs again.
        alone = runs_alone(op, self._queries)
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                if alone:
                    return self._write_alone(op, queues)
                return super().write_once(op, queues=queues, finished=finished)
            except TransactionConflict:
                if attempt == CONFLICT_RETRIES:
                    raise
                time.sleep(conflict_pause(attempt))
        raise AssertionError("unreachable")

    def _write_alone(self, op: Operation[list[Row]], queues: Iterable[str]) -> list[Row]:
        """``op`` autocommitted, in one round trip (``runs_alone``), on a connection the
        server has not closed: one it has is replaced, as BEGIN's failure would have it."""
        with self._pooled_session(self._live_connection(), commit=False) as session:
            rows = session.run(op)
            if rows:
                session.notify(queues=queues)
        if rows:
            self._announce()
        return rows

    def _live_connection(self) -> Any:
        for _ in range(2):
            pooled = self._pool.get()
            if not closed_by_server(self._client.fileno(pooled)):
                return pooled
            self._pool.put(pooled, broken=True)
            self._pool.drop_idle()  # dropped together, as a server restart does
        return self._pool.get()  # a new connection, or the pool's own error

    @contextmanager
    def _caller_session(self, conn: Any) -> Iterator[Session]:
        cur, escape = _caller_cursor(conn)
        # The jobs commit or roll back with the caller's transaction (``own_transaction``).
        own = own_transaction(conn)
        begin, commit, rollback = begin_statements(own)
        with translated():
            cur.execute(begin)
        session = _MySQLSession(
            cur,
            self._queries,
            consecutive_ids=self.consecutive_ids,
            escape=escape,
            counting=self.counting,
        )
        try:
            yield session
        except BaseException:
            with suppress(Exception):
                cur.execute(rollback)
            raise
        with translated():
            cur.execute(commit)
        if own and (session.queues_touched or session.jobs_finished):
            self._announce()

    # -- schema ---------------------------------------------------------------------
    @contextmanager
    def _autocommit(self) -> Iterator[Any]:
        conn = self._pool.get()
        broken = True
        try:
            with translated(), conn.cursor() as cur:
                yield cur
            broken = False
        finally:
            self._pool.put(conn, broken=broken)

    def migrate(self, target: int | None = None) -> list[int]:
        applied: list[int] = []
        lock = f"conveyor_migrate:{self.server.database}"[:64]
        with self._autocommit() as cur:
            # One migrator at a time, across processes (MySQL's DDL is not transactional).
            cur.execute("SELECT GET_LOCK(%s, %s)", (lock, 300))
            if cur.fetchone()[0] != 1:
                raise DatabaseError("timed out waiting for another process's migration")
            try:
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS conveyor_migrations ("
                    " version INT PRIMARY KEY, name VARCHAR(200) NOT NULL,"
                    " applied_at DATETIME(6) NOT NULL) DEFAULT CHARSET = utf8mb4"
                )
                cur.execute("SELECT version FROM conveyor_migrations")
                done = {row[0] for row in cur.fetchall()}
                for migration in self._migrations:
                    if migration.version in done or (target and migration.version > target):
                        continue
                    for statement in migration_statements(migration):
                        cur.execute(statement)
                    cur.execute(
                        "INSERT INTO conveyor_migrations VALUES (%s, %s, UTC_TIMESTAMP(6))",
                        (migration.version, migration.name),
                    )
                    applied.append(migration.version)
                self.counting = counting(max(done | set(applied), default=None))
            finally:
                cur.execute("SELECT RELEASE_LOCK(%s)", (lock,))
        return applied

    def schema_version(self) -> int:
        with self._autocommit() as cur:
            cur.execute(
                "SELECT count(*) FROM information_schema.tables"
                " WHERE table_schema = DATABASE() AND table_name = 'conveyor_migrations'"
            )
            if not cur.fetchone()[0]:
                return 0
            cur.execute("SELECT max(version) FROM conveyor_migrations")
            row = cur.fetchone()
            return int(row[0] or 0) if row else 0

    def describe_schema(self) -> list[str]:
        with self._autocommit() as cur:
            cur.execute(
                "SELECT table_name, column_name, column_type, is_nullable, column_default,"
                " generation_expression, collation_name FROM information_schema.columns"
                " WHERE table_schema = DATABASE() AND table_name LIKE 'conveyor%%'"
                " AND table_name != 'conveyor_migrations'"
            )
            columns = cur.fetchall()
            cur.execute(
                "SELECT table_name, index_name, non_unique,"
                " group_concat(concat(column_name, coalesce(concat('(', sub_part, ')'), ''))"
                "              ORDER BY seq_in_index)"
                " FROM information_schema.statistics"
                " WHERE table_schema = DATABASE() AND table_name LIKE 'conveyor%%'"
                " AND table_name != 'conveyor_migrations'"
                " GROUP BY table_name, index_name, non_unique"
            )
            indexes = cur.fetchall()
            cur.execute(
                "SELECT trigger_name, event_manipulation, event_object_table"
                " FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
            )
            triggers = cur.fetchall()
        out = [
            f"column {t}.{c} {d} nullable={n} default={df} generated={g} collation={co}"
            for t, c, d, n, df, g, co in columns
        ]
        out += [f"index {t}.{name} unique={not nu}: {cols}" for t, name, nu, cols in indexes]
        out += [f"trigger {name} after {event} on {table}" for name, event, table in triggers]
        return sorted(out)

    def drop_schema(self) -> None:
        """Remove conveyor's tables (and their triggers) from the database."""
        with self._autocommit() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = DATABASE() AND table_name LIKE 'conveyor%%'"
            )
            names = [row[0] for row in cur.fetchall()]
            if names:
                cur.execute("SET SESSION foreign_key_checks = 0")
                try:
                    cur.execute("DROP TABLE IF EXISTS " + ", ".join(f"`{n}`" for n in names))
                finally:
                    cur.execute("SET SESSION foreign_key_checks = 1")

    # -- change notification ------------------------------------------------------------
    @property
    def hears_other_processes(self) -> bool:
        return True  # the watcher thread

    def wait_for_change(self, since: int, timeout: float) -> bool:
        self._ensure_watcher()
        return super().wait_for_change(since, timeout)

    def _ensure_watcher(self) -> None:
        if self._watcher is not None:
            return
        with self._changes:
            if self._watcher is None and not self._closing.is_set():
                self._watcher = threading.Thread(
                    target=self._watch, name="conveyor-mysql-watch", daemon=True
                )
                self._watcher.start()

    def _watch(self) -> None:
        """Announce every change of a job's state committed by any connection."""
        conn: Any = None
        seen: tuple[Any, ...] | None = None
        retry = 0.1
        while not self._closing.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                with conn.cursor() as cur:
                    cur.execute(WATCH)
                    now = tuple(cur.fetchone())
            except (self._client.error, DatabaseError) as exc:
                if conn is not None:
                    with suppress(Exception):
                        conn.close()
                    conn = None
                log.warning("cannot watch the database for changes (%s); retrying", exc)
                self._closing.wait(retry)
                retry = min(retry * 2, 5.0)
                continue
            retry = 0.1
            if now != seen:
                # The first reading too: a change may have come before anyone watched.
                self._announce()
                seen = now
            self._closing.wait(WATCH_INTERVAL)
        if conn is not None:
            with suppress(Exception):
                conn.close()

    # -- lifecycle ------------------------------------------------------------------
    def ping(self) -> None:
        with self._autocommit() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()

    def describe(self) -> str:
        where = self.server.describe()
        return where if self._client.name == PYMYSQL else f"{where}?client={self._client.name}"

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join(timeout=2.0)
        self._pool.close()
