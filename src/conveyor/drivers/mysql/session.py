"""What the synchronous and asynchronous MySQL sessions share, as ``PostgresValues``
is shared by PostgreSQL's pair: a connection's set-up, how conveyor works on a caller's
connection, the handler table, the statements a session runs on its one cursor (bound,
then answered), and the pace of retries and of the watch for other processes' commits.
Only the waiting differs: the drivers' sessions call the cursor, or await it."""

from __future__ import annotations

import select
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

from pymysql.constants import SERVER_STATUS

from conveyor.drivers.mysql.dialect import LOCK_WAIT_TIMEOUT, bind, is_mariadb
from conveyor.drivers.mysql.handlers import (
    PACKED_JOB,
    Insert,
    Rows,
    Step,
    async_handlers,
    sync_handlers,
)
from conveyor.drivers.mysql.operator_handlers import OPERATOR_HANDLERS
from conveyor.drivers.operations import Operation
from conveyor.drivers.sql import Statements

# The operations the dialect performs with several statements, the queue's and the
# operator's (kept in a module of their own, which imports handlers.py), for sessions
# that run their statements one after the other, and for those that await them.
SYNC_HANDLERS = sync_handlers(OPERATOR_HANDLERS)
ASYNC_HANDLERS = async_handlers(OPERATOR_HANDLERS)

SQL_MODE = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,ERROR_FOR_DIVISION_BY_ZERO"
# Statements that make a session of their own on a fresh connection.
SESSION_SETUP = (
    "SET time_zone = '+00:00'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    f"SET SESSION sql_mode = '{SQL_MODE}'",
    f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT}",
)

# How often a watcher looks for other processes' commits.
WATCH_INTERVAL = 0.05
# The newest deltas a watcher reads: a commit that lands among them is seen even when
# a later id committed first.
WATCH_ROWS = 100
WATCH = (
    "SELECT max(id) AS top, count(*) AS n FROM"
    f" (SELECT id FROM conveyor_count_deltas ORDER BY id DESC LIMIT {WATCH_ROWS}) AS recent"
)


def session_init(server_version: str) -> str:
    """``SESSION_SETUP`` as one statement (a pool's ``init_command``): the isolation
    level's variable is named differently on MariaDB and MySQL."""
    isolation = "tx_isolation" if is_mariadb(server_version) else "transaction_isolation"
    return (
        f"SET time_zone = '+00:00', SESSION {isolation} = 'READ-COMMITTED',"
        f" SESSION sql_mode = '{SQL_MODE}',"
        f" SESSION innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT}"
    )


# Operations run without BEGIN and COMMIT where they are one statement: a single
# enqueue on MariaDB (``INSERT … RETURNING``; its row trigger counts it).
_ALONE = frozenset({"insert_job"})


def runs_alone(op: Operation[Any], queries: Statements) -> bool:
    """Whether ``op`` is one autocommitted statement on this server, in one round trip.
    A session's BEGIN is how it finds an idle connection the server dropped before
    anything ran on it; for these, ``closed_by_server`` looks at the socket instead."""
    return op.op in _ALONE and "insert_job_returning" in queries


def closed_by_server(fd: int) -> bool:
    """Whether an idle connection's socket has something to read: a connection at rest
    has nothing to, so the server closed it (an error packet, or the end of the stream)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def own_transaction(conn: Any) -> bool:
    """Whether work on a caller's connection is a transaction of its own (the connection
    is in autocommit mode, nothing begun), else a savepoint inside theirs, so a failure
    of ours leaves the rest of their transaction as it was. mysqlclient's connections
    say nothing of an open transaction: Django's, outside ``atomic()``, autocommit."""
    status: int = getattr(conn, "server_status", 0)
    in_transaction = bool(status & SERVER_STATUS.SERVER_STATUS_IN_TRANS)
    return bool(conn.get_autocommit()) and not in_transaction


class Counting(IntEnum):
    """Which writes count themselves, by the schema's version. Up to migration 0014 row
    triggers count every job inserted, changed or deleted. Migration 0015 took the
    trigger on changes away: each statement that changes states writes its own counts
    (handlers.py). Migration 0017 lets a bulk insert count its jobs in one row too: its
    jobs carry the creation time it set beforehand, which the insert trigger skips.
    Migration 0018 does the same for deletes: the delete trigger skips the rows of a
    statement that counts them itself. A schema still at an earlier version (a queue
    opened with migrate=False) keeps its triggers counting. Read from the migrations
    table: information_schema's list of triggers can wait on the metadata locks of DDL
    in any other database of the server."""

    TRIGGERS = 0
    STATEMENTS = 15
    BULK_INSERTS = 17
    DELETES = 18
    LATEST = DELETES


SCHEMA_VERSION = "SELECT max(version) FROM conveyor_migrations"
_NO_SUCH_TABLE = 1146


def counting(version: int | None) -> Counting:
    """How a schema at ``version`` counts (None: no schema yet, which migrating makes
    the latest)."""
    if version is None:
        return Counting.LATEST
    return max(c for c in Counting if c <= version)


def is_missing_table(exc: BaseException) -> bool:
    return bool(exc.args) and exc.args[0] == _NO_SUCH_TABLE


def begin_statements(own: bool) -> tuple[str, str, str]:
    """How a session on a caller's connection begins, commits and rolls back."""
    if own:
        return "BEGIN", "COMMIT", "ROLLBACK"
    return "SAVEPOINT conveyor", "RELEASE SAVEPOINT conveyor", "ROLLBACK TO SAVEPOINT conveyor"


class CursorStatements:
    """A session's statements on its one cursor (a PyMySQL, mysqlclient or aiomysql
    dict cursor): each step bound to its statement, and the cursor's answer read as the
    step asks (rows; the first new id and the count of an insert; a count)."""

    def _use(
        self,
        cursor: Any,
        queries: Statements,
        consecutive_ids: bool,
        escape: Callable[[Any], str] | None = None,
        counting: Counting = Counting.LATEST,
    ) -> None:
        self._cur = cursor
        self._queries = queries
        self._consecutive_ids = consecutive_ids
        self._counting = counting
        self._escape = escape or cursor.connection.escape
        # Packed rows pay where a row's columns are read in Python (PyMySQL, aiomysql);
        # mysqlclient reads them in C, faster than the array (benchmarks/mysql_rows.py).
        self._packed_rows = PACKED_JOB in queries["jobs_locked"] and not type(
            cursor
        ).__module__.startswith("MySQLdb")

    @property
    def consecutive_ids(self) -> bool:
        return self._consecutive_ids

    @property
    def counts_moves(self) -> bool:
        return self._counting >= Counting.STATEMENTS

    @property
    def counts_bulk_inserts(self) -> bool:
        return self._counting >= Counting.BULK_INSERTS

    @property
    def counts_deletes(self) -> bool:
        return self._counting >= Counting.DELETES

    @property
    def packed_rows(self) -> bool:
        return self._packed_rows

    @property
    def returning_inserts(self) -> bool:
        return "insert_job_returning" in self._queries

    def _bound(self, step: Step) -> tuple[str, Mapping[str, Any]]:
        return bind(self._queries.text(step.name, step.params), step.params, self._escape)

    def _answer(self, step: Step, rows: Any) -> Any:
        if isinstance(step, Rows):
            return list(rows)
        if isinstance(step, Insert):
            return int(self._cur.lastrowid), int(self._cur.rowcount)
        return int(self._cur.rowcount)
