"""SQLite: one file shared by the processes of one machine.

WAL lets readers run beside the writer; every write transaction starts with
``BEGIN IMMEDIATE`` so it takes the write lock up front (waiting up to the busy timeout)
instead of failing half-way when it upgrades from reading. ``synchronous=FULL`` by default:
a committed job survives a power cut.

SQLite cannot notify other processes, so waiters learn of their commits from a watcher
thread, started by the first ``wait_for_change`` (see ``watch.py``)."""

from __future__ import annotations

import errno
import json
import logging
import os
import queue
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from functools import lru_cache, partial
from typing import Any, ClassVar

from conveyor.drivers.base import Capabilities, Driver, Handler, Session
from conveyor.drivers.operations import InsertJob, Operation
from conveyor.drivers.sql import (
    Statements,
    in_order,
    load_migrations,
    load_queries,
    split_statements,
)
from conveyor.drivers.sqlite import bulk, counting, writers
from conveyor.drivers.sqlite.watch import (
    HOT_FOR,
    HOT_INTERVAL,
    POLL_INTERVAL,
    QUIET_CHECK,
    FileWatch,
)
from conveyor.drivers.values import Row
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DuplicateJob,
    InvalidArgument,
    StorageFull,
    StorageReadOnly,
)

log = logging.getLogger("conveyor.sqlite")

_PACKAGE = "conveyor.drivers.sqlite"
# The database clock as seconds since the epoch, to the millisecond.
_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
# A job's error history as it stands before one more entry: the latest 19 (of at most 20).
_ERRORS_KEPT = (
    "CASE WHEN json_array_length(coalesce(errors, '[]')) >= 20"
    " THEN json_remove(errors, '$[0]') ELSE coalesce(errors, '[]') END"
)
_MACROS = {"now": _NOW, "errors_kept": _ERRORS_KEPT}
SYNCHRONOUS = ("full", "normal", "extra")


@lru_cache(maxsize=4096)
def _epoch_to_utc(value: float) -> datetime:
    """Cached: a claimed batch repeats the same few instants (claimed, heartbeat, started,
    updated). Rounded to the millisecond the clock stores, so equal instants compare equal."""
    # The zone passed by position: as a keyword it doubled the call's time.
    return datetime.fromtimestamp(round(value, 3), timezone.utc)


def _as_dicts(description: Any, rows: list[tuple[Any, ...]]) -> list[Row]:
    """Rows as dicts of their columns. Without a Python frame per row (and without
    ``zip``'s strict check: a row has its statement's columns), a claimed batch's rows
    are made in two thirds of the time a list comprehension took."""
    names = [column[0] for column in description]
    return list(map(dict, map(partial(zip, names), rows)))


class _Turn:
    """This driver's way into its file's writer turn (writers.py), waiting no longer than
    its busy timeout, as for SQLite's own lock; without a turn, nothing."""

    __slots__ = ("_path", "_released", "_timeout", "_turn")

    def __init__(self, path: str, timeout: float) -> None:
        self._turn = writers.turn_for(path)
        self._timeout = timeout
        self._path = path
        self._released = False

    def __enter__(self) -> None:
        if self._turn is not None and not self._turn.take(self._timeout):
            raise DatabaseError(
                f"SQLite database is busy: other writers of {self._path} kept it for "
                f"{self._timeout:g}s (raise ?timeout=)"
            )

    def __exit__(self, *exc: object) -> None:
        if self._turn is not None:
            self._turn.give()

    def release(self) -> None:
        """The driver closes (once): the turn is kept for a write still under way."""
        if self._turn is not None and not self._released:
            self._released = True
            self._turn.release()


class _SQLiteSession(Session):
    # Claims and endings write the counts their row trigger leaves out (counting.py);
    # bulk inserts bind their jobs' columns as parameters (bulk.py).
    handlers: ClassVar[Mapping[str, Handler]] = {
        **counting.HANDLERS,
        **bulk.HANDLERS,
        "roll_up_throughput": in_order(
            "roll_up_throughput", "drop_rolled_minutes", "prune_throughput_hours"
        ),
    }

    def __init__(self, cursor: sqlite3.Cursor, queries: Statements, path: str) -> None:
        super().__init__()
        self._path = path
        # Plain tuples, made into dicts below: sqlite3.Row finds a column by a linear,
        # case-insensitive scan of the names, which dominated decoding a claimed batch.
        cursor.row_factory = None
        self._cur = cursor
        self._queries = queries

    def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        return self.positional_rows(self._queries.text(query, params), params or {})

    def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        with _translated(self._path):
            return self._cur.execute(self._queries.text(query, params), params or {}).rowcount

    # -- for bulk.py ------------------------------------------------------------------
    def statement(self, name: str) -> str:
        return self._queries[name]

    def positional(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        with _translated(self._path):
            return self._cur.execute(sql, params)

    def positional_rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> list[Row]:
        """The rows of ``sql`` as dicts (the parameters by position, or by name)."""
        with _translated(self._path):
            cur = self._cur.execute(sql, params)
            rows = cur.fetchall()
        return _as_dicts(cur.description, rows) if rows else []

    def variable_limit(self) -> int:
        return self._cur.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)


@contextmanager
def _translated(path: str) -> Iterator[None]:
    """Nothing above the backend sees ``sqlite3`` exceptions."""
    try:
        yield
    except sqlite3.Error as exc:
        raise _translation(exc, path) from None


def _read_only_file_system(path: str) -> bool:
    """Whether the file system holding the database file refuses writes now: mounted
    read-only, or turned so by the kernel after a disk error (which the mount flags may
    not show: a file created and deleted beside the database tells)."""
    if path == ":memory:" or path.startswith("file:"):
        return False
    directory = os.path.dirname(os.path.abspath(path))
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return True
        fd, probe = tempfile.mkstemp(prefix=".conveyor-probe-", dir=directory)
    except OSError as exc:
        return exc.errno == errno.EROFS
    os.close(fd)
    with suppress(OSError):
        os.unlink(probe)
    return False


def _translation(exc: sqlite3.Error, path: str) -> ConveyorError:
    if isinstance(exc, sqlite3.IntegrityError):
        if "conveyor_jobs.queue, conveyor_jobs.key" in str(exc):
            return DuplicateJob("an active job with this key already exists")
        return DatabaseError(f"SQLite integrity error: {exc}")
    code = getattr(exc, "sqlite_errorcode", None) or 0
    primary = code & 0xFF
    if primary == _SQLITE_FULL or "database or disk is full" in str(exc):
        return StorageFull(f"SQLite database or disk is full: {exc}")
    if primary == _SQLITE_READONLY or "readonly database" in str(exc):
        return StorageReadOnly(f"SQLite database is read-only: {exc}")
    if primary == _SQLITE_IOERR:
        # An fsync that fails comes after the commit's frames were written to the WAL:
        # the next open's recovery finds them whole, so the write may be there after all.
        unknown = code in _SYNC_FAILURES
        said = (
            f"{exc} while the commit was made durable: it may have been written"
            if unknown
            else str(exc)
        )
        if _read_only_file_system(path):
            # A file system turned read-only under open files (remounted, or by the
            # kernel after disk errors): SQLite sees its writes fail ("disk I/O error").
            return StorageReadOnly(
                f"SQLite database is read-only (its file system is): {said}",
                outcome_unknown=unknown,
            )
        return DatabaseError(f"SQLite error: {said}", outcome_unknown=unknown)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
        return DatabaseError(f"SQLite database is busy: {exc} (raise ?timeout=)")
    return DatabaseError(f"SQLite error: {exc}")


def _roll_back(conn: sqlite3.Connection) -> None:
    """End the connection's transaction, if any; a failure to (a transaction the
    database already rolled back, a vanished file) leaves nothing to undo."""
    with suppress(sqlite3.Error):
        conn.rollback()


# Primary result codes (https://sqlite.org/rescode.html): an extended code's low byte.
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
# A failed fsync, of the WAL (or journal) or of its directory.
_SYNC_FAILURES = frozenset({sqlite3.SQLITE_IOERR_FSYNC, sqlite3.SQLITE_IOERR_DIR_FSYNC})


class SQLiteDriver(Driver):
    dialect = "sqlite"
    # No other process hears a commit: waiters learn of them from a watcher thread.
    capabilities = Capabilities(
        one_round_trip=True, listen_notify=False, skip_locked=False, returning=True
    )

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "full",
        timeout: float = 30.0,
        max_pages: int | None = None,
    ) -> None:
        super().__init__()
        if synchronous not in SYNCHRONOUS:
            raise ConfigurationError(
                f"synchronous: expected one of {', '.join(SYNCHRONOUS)}, got {synchronous!r}"
            )
        self.path = path
        self._timeout = timeout
        self._max_pages = max_pages
        self._queries = load_queries(_PACKAGE, _MACROS)
        self._migrations = load_migrations(_PACKAGE, _MACROS)
        # One writing connection per backend, shared by the threads of this process under
        # a lock: writes are serialised by SQLite anyway, and :memory: needs a single
        # connection. Reads use connections of their own (WAL readers never wait for the
        # writer), so a write lock held by another process stalls no read here.
        self._lock = threading.RLock()
        # Writers of this file, in every process, take turns before taking that lock
        # (writers.py): the kernel hands the write lock on without the busy handler's sleeps.
        self._turn = _Turn(path, timeout)
        self._readers: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._closed = False
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        try:
            self._conn = self._open()
            if path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open SQLite database {path!r}: {exc}") from None

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA foreign_keys = ON")
        # Cancelling a job for its failed dependency cancels that job's own dependents:
        # the trigger that does it must fire for its own updates.
        conn.execute("PRAGMA recursive_triggers = ON")
        if self._max_pages is not None:
            # The file's size limit, in pages (SQLite's max_page_count, which holds
            # for this connection only: every connection opened here sets it). A
            # write that needs more raises StorageFull; pages freed by deletions
            # are used again first.
            conn.execute(f"PRAGMA max_page_count = {int(self._max_pages)}")
        return conn

    # -- sessions -------------------------------------------------------------------
    @contextmanager
    def session(self, *, write: bool = True, conn: Any = None) -> Iterator[Session]:
        if conn is not None:
            yield self._caller_session(conn)
            return
        if not write and self.path != ":memory:":
            with self._reading() as session:
                yield session
            return
        with self._turn, self._lock:
            with _translated(self.path):  # a closed connection fails here, as ProgrammingError
                cur = self._conn.cursor()
                cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            session = _SQLiteSession(cur, self._queries, self.path)
            try:
                yield session
            except BaseException:
                _roll_back(self._conn)
                raise
            try:
                cur.execute("COMMIT")
            except sqlite3.Error as exc:
                # A COMMIT that fails (a full disk, a read-only file) leaves the
                # transaction open: end it, or the connection's next BEGIN fails too.
                _roll_back(self._conn)
                raise _translation(exc, self.path) from None
        if session.queues_touched or session.jobs_finished:
            self._announce()

    def write_once(
        self,
        op: Operation[list[Row]],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        # In autocommit mode a lone statement is its own transaction, and a writing one
        # takes the write lock (waiting up to the busy timeout) before it reads: what
        # BEGIN IMMEDIATE ... COMMIT does, in one call instead of three.
        # Written out rather than through a session: this is every enqueue's path.
        if op.op in _SQLiteSession.handlers:  # several statements: one transaction
            with self.session() as session:
                rows = session.run(op)
                if rows:
                    session.notify(queues=queues, finished=finished)
            return rows
        plain = op if isinstance(op, InsertJob) and bulk.is_plain(op) else None
        with self._turn, self._lock:
            try:  # a closed connection fails here too, as ProgrammingError
                if plain is not None:  # the usual single enqueue
                    rows = bulk.insert_plain_job(
                        self._conn, self._queries["insert_plain_job"], plain
                    )
                else:
                    params = op.params()
                    cur = self._conn.execute(self._queries.text(op.op, params), params)
                    found = cur.fetchall()
            except sqlite3.Error as exc:
                raise _translation(exc, self.path) from None
        if plain is None:  # made into dicts once the turn is given back
            rows = _as_dicts(cur.description, found) if found else []
        if rows and (queues or finished):
            self._announce()
        return rows

    @contextmanager
    def _reading(self) -> Iterator[Session]:
        """A read transaction on a connection of its own, taken from the idle ones."""
        with self._read_cursor() as cur:
            yield _SQLiteSession(cur, self._queries, self.path)

    @contextmanager
    def _read_cursor(self) -> Iterator[sqlite3.Cursor]:
        with _translated(self.path):
            if self._closed:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            try:
                conn = self._readers.get_nowait()
            except queue.Empty:
                conn = self._open()
                conn.execute("PRAGMA query_only = ON")
                with self._lock:
                    self._all_readers.append(conn)
            cur = conn.cursor()
            cur.execute("BEGIN")
        try:
            yield cur
        finally:
            try:
                conn.rollback()  # a reader has nothing to commit; this ends its snapshot
            except sqlite3.Error:
                pass
            else:
                self._readers.put(conn)

    def _caller_session(self, conn: Any) -> Session:
        if not isinstance(conn, sqlite3.Connection):
            raise InvalidArgument(
                f"conn: expected a sqlite3.Connection for a SQLite queue, got {type(conn).__name__}"
            )
        # A cursor of our own: the caller's row factory stays untouched.
        return _SQLiteSession(conn.cursor(), self._queries, self.path)

    # -- schema ---------------------------------------------------------------------
    def migrate(self, target: int | None = None) -> list[int]:
        applied: list[int] = []
        with self._turn, self._lock, _translated(self.path):
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")  # one migrator at a time, across processes
            try:
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS conveyor_migrations ("
                    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
                )
                done = {r[0] for r in cur.execute("SELECT version FROM conveyor_migrations")}
                for migration in self._migrations:
                    if migration.version in done or (target and migration.version > target):
                        continue
                    for statement in split_statements(migration.sql, sqlite3.complete_statement):
                        cur.execute(statement)
                    cur.execute(
                        f"INSERT INTO conveyor_migrations VALUES (?, ?, {_NOW})",
                        (migration.version, migration.name),
                    )
                    applied.append(migration.version)
                cur.execute("COMMIT")
            except BaseException:
                self._conn.rollback()
                raise
        return applied

    def schema_version(self) -> int:
        if self.path == ":memory:":
            with self._lock, _translated(self.path):
                return _schema_version(self._conn.cursor())
        # A read: on a reader's connection, so a health check never waits for a writer.
        with self._read_cursor() as cur, _translated(self.path):
            return _schema_version(cur)

    def latest_version(self) -> int:
        return self._migrations[-1].version

    def drop_schema(self) -> None:
        with self._turn, self._lock, _translated(self.path):
            names = [
                r[0]
                for r in self._conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'conveyor%'"
                )
            ]
            self._conn.execute("PRAGMA foreign_keys = OFF")
            try:
                for name in names:
                    self._conn.execute(f'DROP TABLE IF EXISTS "{name}"')
            finally:
                self._conn.execute("PRAGMA foreign_keys = ON")

    def describe_schema(self) -> list[str]:
        out = []
        with self._lock, _translated(self.path):
            objects = self._conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
                " WHERE name LIKE 'conveyor%' AND name != 'conveyor_migrations'"
            ).fetchall()
            for kind, name, table, sql in objects:
                out.append(f"{kind} {name} on {table}: {' '.join((sql or '').split())}")
                if kind == "table":
                    for col in self._conn.execute(f"PRAGMA table_info({name})"):
                        out.append(f"column {name}.{col[1]} {col[2]} notnull={col[3]}")
        return sorted(out)

    # -- values ---------------------------------------------------------------------
    def encode_time(self, value: datetime) -> float:
        return value.timestamp()

    def decode_time(self, value: Any) -> datetime | None:
        if value is None:
            return None
        return _epoch_to_utc(float(value))

    def decode_json(self, value: Any) -> Any:
        return None if value is None else json.loads(value)

    @staticmethod
    def rows_param(rows: list[list[Any]]) -> Any:
        return rows  # bound as parameters, not sent as JSON (bulk.py)

    # -- change notification ------------------------------------------------------------
    @property
    def hears_other_processes(self) -> bool:
        return self.path != ":memory:"  # nothing else can reach a private database

    def wait_for_change(self, since: int, timeout: float) -> bool:
        self._ensure_watcher()
        return super().wait_for_change(since, timeout)

    def _ensure_watcher(self) -> None:
        if self._watcher is not None or not self.hears_other_processes:
            return
        with self._changes:
            if self._watcher is None and not self._closing.is_set():
                self._watcher = threading.Thread(
                    target=self._watch, name="conveyor-sqlite-watch", daemon=True
                )
                self._watcher.start()

    def _watch(self) -> None:
        """Announce every commit made by another connection (of any process)."""
        conn: sqlite3.Connection | None = None
        files: FileWatch | None = None
        seen: int | None = None
        hot_until = 0.0  # the WAL file was written: look often until the commit shows
        retry = 0.1
        while not self._closing.is_set():
            try:
                if conn is None:
                    conn = self._open()
                    conn.execute("PRAGMA query_only = ON")
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                if files is None:  # the read above made sure the WAL file exists
                    files = FileWatch.open(self.path + "-wal")
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                    conn = None
                log.warning("cannot watch the database for changes (%s); retrying", exc)
                self._closing.wait(retry)
                retry = min(retry * 2, 5.0)
                continue
            retry = 0.1
            if version != seen:
                # The first reading too: a change may have come before anyone watched.
                self._announce()
                seen, hot_until = version, 0.0
            if files is None:
                self._closing.wait(POLL_INTERVAL)
            elif time.monotonic() < hot_until:
                self._closing.wait(HOT_INTERVAL)
            elif files.wait(QUIET_CHECK):
                hot_until = time.monotonic() + HOT_FOR
        if files is not None:
            files.close()
        if conn is not None:
            conn.close()

    # -- lifecycle ------------------------------------------------------------------
    def ping(self) -> None:
        with self._lock, _translated(self.path):
            self._conn.execute("SELECT 1").fetchone()

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join(timeout=2.0)
        with self._lock:
            self._closed = True
            self._conn.close()
            for reader in self._all_readers:
                reader.close()
            self._all_readers.clear()
            self._turn.release()

    def describe(self) -> str:
        return f"sqlite:///{self.path}"


def _schema_version(cur: sqlite3.Cursor) -> int:
    exists = cur.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'conveyor_migrations'"
    ).fetchone()
    if not exists:
        return 0
    row = cur.execute("SELECT max(version) FROM conveyor_migrations").fetchone()
    return int(row[0] or 0)
