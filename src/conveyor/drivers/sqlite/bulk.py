"""Inserts on SQLite whose jobs are bound as plain parameters: a bulk enqueue's one
multi-row INSERT, and the usual single enqueue's INSERT that returns nothing
(``insert_plain_job``).

The other dialects take a batch of jobs as one JSON array that their statement takes
apart; on SQLite that meant ``json_each`` and an ``->>`` per column, each parsing the
job's row again, which took 1.2x as long per job as binding the columns
(``Values.rows_param`` keeps the rows as they are here). With ``ids_only`` it reads the
new ids after its INSERT instead of having it return a row per job: an INSERT runs
inside the write lock, so nothing else inserts between its rows, and AUTOINCREMENT gives
them consecutive ids ending at ``last_insert_rowid()`` (a trigger's own inserts leave
it as it was; ``changes()`` counts the statement's rows alone)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Protocol

from conveyor.drivers.base import Handler
from conveyor.drivers.operations import InsertJob, InsertJobs
from conveyor.drivers.values import Row

COLUMNS = 8  # a job's parameters in job_values
_INSERTED = "SELECT last_insert_rowid(), changes()"


class BulkSession(Protocol):
    def statement(self, name: str) -> str: ...

    def positional(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor: ...

    def positional_rows(self, sql: str, params: Sequence[Any]) -> list[Row]: ...

    def variable_limit(self) -> int: ...


_MADE: dict[tuple[str, int], str] = {}


def _statement(session: BulkSession, name: str, n: int) -> str:
    """``name`` with its ``{values}`` for ``n`` jobs (a batch has few distinct sizes)."""
    made = _MADE.get((name, n))
    if made is None:
        group = session.statement("job_values")
        made = session.statement(name).replace("{values}", ",\n".join([group] * n))
        if len(_MADE) < 256:
            _MADE[(name, n)] = made
    return made


def _parts(session: BulkSession, rows: Sequence[Sequence[Any]]) -> Iterator[list[Any]]:
    """The rows in parts that stay within SQLite's cap on a statement's parameters, each
    part as its parameters in order."""
    per = max(1, session.variable_limit() // COLUMNS)
    for start in range(0, len(rows), per):
        part = rows[start : start + per]
        yield list(chain.from_iterable(part))


def insert_jobs(session: BulkSession, op: InsertJobs) -> list[Row]:
    if op.ids_only:
        return _insert_job_ids(session, op)
    out: list[Row] = []
    for params in _parts(session, op.items):
        out += session.positional_rows(_statement(session, op.op, len(params) // COLUMNS), params)
    return out


def _insert_job_ids(session: BulkSession, op: InsertJobs) -> list[Row]:
    out: list[Row] = []
    for params in _parts(session, op.items):
        n = len(params) // COLUMNS
        session.positional(_statement(session, "insert_job_ids_only", n), params)
        last, count = session.positional(_INSERTED, ()).fetchone()
        if count != n:  # cannot happen: the INSERT has no conflict clause to skip a row
            raise RuntimeError(f"a bulk insert of {n} jobs inserted {count}")
        out += [{"id": i} for i in range(last - n + 1, last + 1)]
    return out


# SQLite's clock: the Julian day in milliseconds of the Unix epoch (its unix VFS adds
# this to the time of day in milliseconds, truncated).
_UNIX_EPOCH_JD_MS = 210_866_760_000_000


def sqlite_now() -> float:
    """``{now}`` (``(julianday('now') - 2440587.5) * 86400.0``) as SQLite computes it at
    this moment, to the bit: the same clock, truncated to the millisecond, through the
    same floating-point steps. A time read more coarsely or more finely would differ
    from a later ``{now}`` of the same millisecond by the rounding of the Julian day
    (tens of µs), and a job inserted at such a time would not be due until the next."""
    julian_day = (_UNIX_EPOCH_JD_MS + time.time_ns() // 1_000_000) / 86_400_000.0
    return (julian_day - 2440587.5) * 86400.0


def is_plain(op: InsertJob) -> bool:
    """Whether ``op`` can be ``insert_plain_job``: no key to conflict on, no dependency."""
    return op.key is None and op.depends_on is None and not op.waiting_for


def insert_plain_job(conn: sqlite3.Connection, sql: str, op: InsertJob) -> list[Row]:
    """One job without a key or dependencies, on ``conn`` in autocommit mode: a single
    enqueue's INSERT with its parameters bound by position and nothing returned; what
    the database would have decided (the id, the times) is read back without a row.
    The times are the value SQLite's 'now' gives ``{now}`` (``sqlite_now``). (The
    statement with its conflict clause, eleven named parameters and ``RETURNING`` took
    15 µs longer a commit: docs/benchmarks.md.)"""
    now = sqlite_now()
    run_at = now if op.run_at is None else op.run_at
    # ``conn.execute``, not a cursor of our own: an INSERT that fails (a read-only file
    # system, say) leaves its statement unfinalized in the cursor, which the error's
    # traceback would keep alive, and a closed connection with an unfinalized statement
    # stays open (sqlite3_close_v2), its files held and mapped.
    cur = conn.execute(
        sql,
        (op.queue, op.task, op.payload, op.priority, run_at, op.max_attempts, op.job_group,
         op.trace_context, now, now),
    )  # fmt: skip
    return [{"id": cur.lastrowid, "run_at": run_at, "created_at": now}]


HANDLERS: Mapping[str, Handler] = {"insert_jobs": insert_jobs}
