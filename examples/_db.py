"""The application's own tables, kept in the queue's database.

Every example stores its domain (books, videos, messages, pages) next to conveyor's
tables, in the same SQLite file, PostgreSQL schema or MySQL database, so a domain write
and the job it implies commit in one transaction: ``q.enqueue(..., conn=tx.conn)``.

SQL is written once with ``:name`` parameters; on PostgreSQL and MySQL they become the
drivers' ``%(name)s``. Anything the dialects spell differently (DDL) is passed per
dialect; ``Tx.dialect`` tells a statement that must differ (MySQL has no ``ON CONFLICT``
and no ``UPDATE … RETURNING``)."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from conveyor import TransactionConflict
from conveyor.config import database_url, parse_url
from conveyor.retry import conflict_pause

_PARAM = re.compile(r"(?<![:\w]):(\w+)")
T = TypeVar("T")
# A deadlock broken, or a lock waited for too long, in the application's own statements:
# MySQL's error codes and PostgreSQL's SQLSTATEs. conveyor's own say TransactionConflict.
_MYSQL_CONFLICTS = (1213, 1205)
_POSTGRES_CONFLICTS = ("40P01", "40001")


class Tx:
    """One open transaction: ``conn`` is the raw connection (for ``conn=``)."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self.conn = conn
        self.dialect = dialect

    def _sql(self, statement: str) -> str:
        if self.dialect == "sqlite":
            return statement
        return _PARAM.sub(r"%(\1)s", statement.replace("%", "%%"))

    def execute(self, statement: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement; returns the number of rows it changed."""
        cur = self.conn.cursor()
        cur.execute(self._sql(statement), dict(params or {}))
        return int(cur.rowcount)

    def insert_new(self, statement: str, params: Mapping[str, Any] | None = None) -> bool:
        """MySQL's ``ON CONFLICT … DO NOTHING``: an INSERT that a duplicate key (error
        1062) makes insert nothing; the rest of the transaction goes on. Returns whether
        the row was inserted."""
        import pymysql

        try:
            return self.execute(statement, params) > 0
        except pymysql.err.IntegrityError as exc:
            if exc.args and exc.args[0] == 1062:
                return False
            raise

    @contextmanager
    def brief_lock_waits(self) -> Iterator[None]:
        """Within the block, a statement waiting for a row another transaction holds
        gives up after a moment (``is_lock_wait``) instead of waiting as long as the
        server allows: PostgreSQL 500 ms for this transaction; MySQL 1 s, its least, set
        for the connection and reset after the block. SQLite locks the whole database
        at BEGIN, so nothing changes there."""
        if self.dialect == "postgresql":
            self.execute("SET LOCAL lock_timeout = '500ms'")
        elif self.dialect == "mysql":
            self.execute("SET SESSION innodb_lock_wait_timeout = 1")
        try:
            yield
        finally:
            if self.dialect == "mysql":
                self.execute("SET SESSION innodb_lock_wait_timeout = DEFAULT")

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


def is_lock_wait(exc: BaseException) -> bool:
    """Whether ``exc`` says a statement gave up waiting for a row another transaction
    holds (PostgreSQL's ``lock_timeout``, MySQL's lock wait time-out)."""
    if getattr(exc, "sqlstate", None) == "55P03":  # psycopg: lock not available
        return True
    args = getattr(exc, "args", ())
    return type(exc).__module__.startswith("pymysql") and bool(args) and args[0] == 1205


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` says the database rolled the transaction back to break a deadlock
    or gave up waiting for a lock: nothing of it was written, and trying again can work."""
    if isinstance(exc, TransactionConflict):
        return True
    if getattr(exc, "sqlstate", None) in _POSTGRES_CONFLICTS:  # psycopg
        return True
    args = getattr(exc, "args", ())
    return type(exc).__module__.startswith("pymysql") and bool(args) and args[0] in _MYSQL_CONFLICTS


class AppDatabase:
    """Connections to the database behind a conveyor URL, for the application's tables.

    SQLite: a connection per transaction (cheap), ``BEGIN IMMEDIATE`` for writes so
    concurrent writers queue on the lock instead of failing. PostgreSQL: a small pool,
    each connection's ``search_path`` set to the queue's schema. MySQL: PyMySQL
    connections kept for reuse, in UTC, at READ COMMITTED as the queue's own."""

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
        if self.dialect == "mysql":
            self._mysql = _MySQLConnections(settings.target, pool_size)
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
        if self.dialect == "mysql":
            with self._mysql.transaction() as conn:
                yield Tx(conn, self.dialect)
            return
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

    def retried(self, work: Callable[[Tx], T], *, attempts: int = 5) -> T:
        """``work(tx)`` in a write transaction, run again when the database rolled it
        back to break a deadlock (or gave up waiting for a lock): nothing of it was
        written; ``attempts`` tries in all, with conveyor's own pause between them.
        conveyor runs its own transactions again by itself; one that also carries the
        application's writes (``conn=tx.conn``) is the application's to run again, so
        ``work`` must be safe to repeat."""
        for attempt in range(attempts - 1):
            try:
                with self.transaction() as tx:
                    return work(tx)
            except Exception as exc:
                if not is_conflict(exc):
                    raise
            time.sleep(conflict_pause(attempt))
        with self.transaction() as tx:  # the last try: its conflict is the caller's
            return work(tx)

    def briefly(self, work: Callable[[Tx], T]) -> T | None:
        """``work(tx)`` in a write transaction whose statements wait for a row another
        transaction holds only a moment (``Tx.brief_lock_waits``): None, with nothing
        written, when one gave up (``is_lock_wait``). For a poll that must never hang
        behind a process stopped while it held the row; ``work`` returns a value."""
        try:
            with self.transaction() as tx, tx.brief_lock_waits():
                return work(tx)
        except Exception as exc:
            if is_lock_wait(exc):
                return None
            raise

    def create(self, *, sqlite: str, postgresql: str, mysql: str | None = None) -> None:
        """Create the application's tables (statements separated by ``;``), once."""
        if self.dialect == "mysql":
            if mysql is None:
                raise ValueError("this example has no MySQL tables yet")
            self._mysql.create(mysql)
            return
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
        if self.dialect == "mysql":
            self._mysql.close()


class _MySQLConnections:
    """Idle PyMySQL connections kept for reuse (at most ``size``)."""

    def __init__(self, url: str, size: int) -> None:
        from conveyor.drivers.mysql.dialect import Server

        self._options = Server.from_url(url).connect_kwargs(10.0)
        self._options["autocommit"] = False
        self._size = size
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        import pymysql

        conn = pymysql.connect(**self._options)
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            try:
                conn.ping(False)
            except Exception:  # the server dropped it while idle
                conn = None
        if conn is None:
            conn = self._connect()
        try:
            conn.begin()
            yield conn
        except BaseException:
            try:
                conn.rollback()
            finally:
                conn.close()
            raise
        conn.commit()
        with self._lock:
            if len(self._idle) < self._size:
                self._idle.append(conn)
                return
        conn.close()

    def create(self, script: str) -> None:
        """DDL commits on its own in MySQL: run under a named lock, so two servers
        starting at once create the tables once."""
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT GET_LOCK(CONCAT('examples:', DATABASE()), 60)")
                try:
                    for statement in script.split(";"):
                        if statement.strip():
                            cur.execute(statement)
                finally:
                    cur.execute("SELECT RELEASE_LOCK(CONCAT('examples:', DATABASE()))")
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
