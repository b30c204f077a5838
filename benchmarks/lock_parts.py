"""What SQLite's write lock is held for, part by part of conveyor's schema, and what a
history table for finished jobs would change.

The worker's write transaction, run alone in one process: ``BEGIN IMMEDIATE``, the
previous batch's endings (``complete_jobs``, brief), the claim of the next batch
(``claim_jobs``), ``COMMIT`` (synchronous=FULL), timed from the BEGIN to the COMMIT
returning, until the backlog is drained. It runs on conveyor's table as a migrated
database has it, and on scratch copies:

- with parts taken away (the count trigger, the dependency trigger, the two status
  indexes, every index no claim or ending reads), so the difference is what each part
  costs the lock per job;
- with the claim returning only the ids it took, the rows read after the commit (timed
  apart: that read holds no write lock, but it is work the claim's RETURNING did);
- with the count trigger changed: one that only appends a row per change of status (to
  be folded later), and the trigger as it is with a WHEN that skips the rows of a claim
  and of an ending;
- with finished jobs moved to a history table by each ending (the row inserted there as
  completed, with its count, and deleted from the jobs table in the same transaction),
  the jobs table keeping either every index it has today or only those the claim path,
  dedupe and flow control read; the history table has the indexes the lists of finished
  jobs read.

And with the claim ids of before 0.3 (random, where they now begin with the time): every
job keeps its last claim id under an index, so with ``--history N`` (N finished jobs put
in the table first, each with a claim id of the variant's kind) the difference is what
random ids cost a claim once the index is large.

Scratch copies only: conveyor needs all of its parts, and has no history table. Each run
checks that every job ended once and that the counts agree with the rows. Variants are
interleaved, run after run, so a change in the machine's load hits them alike.

    python benchmarks/lock_parts.py [--jobs 30000] [--batch 100] [--runs 3] [--history 0]
"""

from __future__ import annotations

import argparse
import json
import secrets
import sqlite3
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import conveyor
from conveyor.cli.bench import enqueue_bulk
from conveyor.drivers.sqlite.counting import count_moves
from conveyor.ops.claims import new_claim_id

_STATUS = ("conveyor_jobs_status", "conveyor_jobs_status_id")
_UNREAD = (*_STATUS, "conveyor_jobs_task", "conveyor_jobs_queue_id", "conveyor_jobs_finished")
# The indexes of the jobs table that only lists (of every job, finished ones included) read.
_LISTS = (*_UNREAD, "conveyor_jobs_key")
_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

# What lists of finished jobs read, on the history table (as on the jobs table today).
_HISTORY_INDEXES = (
    "CREATE INDEX done_status ON conveyor_jobs_done (status, queue, id)",
    "CREATE INDEX done_status_id ON conveyor_jobs_done (status, id)",
    "CREATE INDEX done_queue_id ON conveyor_jobs_done (queue, id)",
    "CREATE INDEX done_task ON conveyor_jobs_done (task, id)",
    "CREATE INDEX done_finished ON conveyor_jobs_done (finished_at)",
    "CREATE INDEX done_key ON conveyor_jobs_done (key, queue, id) WHERE key IS NOT NULL",
)
# Its rows are counted as they arrive; the jobs table's delete trigger takes them out.
_HISTORY_COUNT = f"""
CREATE TRIGGER done_counted AFTER INSERT ON conveyor_jobs_done
BEGIN
    INSERT INTO conveyor_counts (queue, status, task, n)
    VALUES (NEW.queue, NEW.status, NEW.task, 1)
    ON CONFLICT (queue, status, task) DO UPDATE SET n = n + 1;
    INSERT INTO conveyor_throughput (minute, queue, completed, failed)
    VALUES (CAST({_NOW} / 60 AS INTEGER) * 60, NEW.queue,
            NEW.status = 'completed', NEW.status = 'failed')
    ON CONFLICT (minute, queue) DO UPDATE
    SET completed = completed + excluded.completed, failed = failed + excluded.failed;
END
"""


# The count trigger as an append of one row per change of status, to be folded later.
_APPENDING = (
    """CREATE TABLE conveyor_count_moves (
        id INTEGER PRIMARY KEY, queue TEXT NOT NULL, task TEXT NOT NULL,
        old TEXT NOT NULL, new TEXT NOT NULL, at REAL NOT NULL)""",
    f"""CREATE TRIGGER conveyor_count_changed AFTER UPDATE OF status ON conveyor_jobs
    WHEN OLD.status <> NEW.status
    BEGIN
        INSERT INTO conveyor_count_moves (queue, task, old, new, at)
        VALUES (NEW.queue, NEW.task, OLD.status, NEW.status, {_NOW});
    END""",
)
# The count trigger since migration 0018 fires for statements that name `key` (claims and
# completions write their counts themselves: conveyor.drivers.sqlite.counting); before
# it, for every change of status, counting every row. And the same trigger with a WHEN
# that skips the claim's and ending's rows.
_EVERY_ROW = ("AFTER UPDATE OF key ON conveyor_jobs", "AFTER UPDATE OF status ON conveyor_jobs")
_SKIPPING = (
    "WHEN OLD.status <> NEW.status",
    "WHEN OLD.status <> NEW.status"
    " AND NOT (OLD.status = 'pending' AND NEW.status = 'running')"
    " AND NOT (OLD.status = 'running' AND NEW.status = 'completed')",
)


class _Counts:
    """What ``counting.count_moves`` needs of a session: the count statements by name."""

    def __init__(self, conn: sqlite3.Connection, statements: Any) -> None:
        self._conn, self._statements = conn, statements

    def execute(self, name: str, params: dict[str, Any]) -> int:
        return self._conn.execute(self._statements.text(name, params), params).rowcount


def _queue_task(description: Any, rows: list[Any]) -> list[dict[str, Any]]:
    names = [column[0] for column in description]
    queue, task = names.index("queue"), names.index("task")
    return [{"queue": row[queue], "task": row[task]} for row in rows]


@dataclass(frozen=True)
class Variant:
    drop_trigger: bool = False
    drop: tuple[str, ...] = ()
    history: bool = False
    trigger: tuple[str, ...] = ()  # statements that make a count trigger of its own
    skipping: bool = False  # the count trigger's WHEN skips the claim's and ending's rows
    every_row: bool = False  # the count trigger as before migration 0018 counts every row
    drop_dependency_trigger: bool = False  # run per row too (its WHEN: has_dependents)
    ids_only: bool = False  # the claim returns ids; its rows are read after the commit
    timed_claims: bool = False  # claim ids led by the claim's time, not random


VARIANTS: dict[str, Variant] = {
    "as migrated": Variant(),
    "count trigger counting every row (before migration 0018)": Variant(every_row=True),
    "without the count trigger": Variant(drop_trigger=True),
    "count trigger appending a row per change": Variant(drop_trigger=True, trigger=_APPENDING),
    "count trigger skipping the claim's and ending's rows": Variant(skipping=True),
    "without the dependency trigger": Variant(drop_dependency_trigger=True),
    "without both triggers": Variant(drop_trigger=True, drop_dependency_trigger=True),
    "without the two status indexes": Variant(drop=_STATUS),
    "claim returning ids, rows read after the commit": Variant(ids_only=True),
    "without both triggers and the two status indexes, ids": Variant(
        drop_trigger=True, drop=_STATUS, drop_dependency_trigger=True, ids_only=True
    ),
    "without the trigger and the indexes no claim reads": Variant(True, _UNREAD),
    "without the list indexes": Variant(drop=_LISTS),
    "history table, jobs table as it is": Variant(history=True),
    "history table, jobs table without list indexes": Variant(drop=_LISTS, history=True),
    "claim ids led by the time": Variant(timed_claims=True),
}
# Claim ids of finished jobs put in first (--history): random, or led by a time before
# the drain's, as the variant's own.
_ORDERED_ID = "printf('%012x', 1700000000000 + value) || lower(hex(randomblob(10)))"
_RANDOM_ID = "lower(hex(randomblob(16)))"


def _timed_claim_id() -> str:
    """A UUIDv7's layout: the time in milliseconds, then random bits (32 hex digits)."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(10)}"


def _move_to_history(conn: sqlite3.Connection) -> tuple[str, str]:
    """The history table made, and the two statements of an ending that moves a job
    there: the completed row inserted (guarded as ``complete_jobs`` is), then the
    inserted ids deleted from the jobs table."""
    (table,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'conveyor_jobs'"
    ).fetchone()
    conn.execute(
        table.replace("CREATE TABLE conveyor_jobs", "CREATE TABLE conveyor_jobs_done", 1).replace(
            "AUTOINCREMENT", ""
        )
    )
    for statement in (*_HISTORY_INDEXES, _HISTORY_COUNT):
        conn.execute(statement)
    ended = {"status": "'completed'", "result": "item.result", "error": "NULL",
             "error_kind": "NULL", "finished_at": _NOW, "lease_expires_at": "NULL",
             "updated_at": _NOW}  # fmt: skip
    columns = [row[1] for row in conn.execute("PRAGMA table_info(conveyor_jobs)")]
    select = ", ".join(ended.get(c, f"conveyor_jobs.{c}") for c in columns)
    insert = f"""
        INSERT INTO conveyor_jobs_done ({", ".join(columns)})
        SELECT {select}
        FROM (SELECT value ->> '$.id' AS id, value ->> '$.claim_id' AS claim_id,
                     value ->> '$.result' AS result
              FROM json_each(:items)) AS item
        JOIN conveyor_jobs ON conveyor_jobs.id = item.id
         AND conveyor_jobs.claim_id = item.claim_id AND +conveyor_jobs.status = 'running'
        WHERE true
        RETURNING id"""
    delete = "DELETE FROM conveyor_jobs WHERE id IN (SELECT value FROM json_each(:ids))"
    return insert, delete


def _held_per_job(
    path: Path, jobs: int, batch: int, variant: Variant, history: int = 0
) -> tuple[float, float, float]:
    """µs of write lock per job to drain ``jobs`` in batches of ``batch``: the time
    held, the CPU time of this thread while holding it (SQLite's work, without the
    waits for the disk and for the processor that make the time held vary), and the
    time spent after the commit reading the claimed rows (``ids_only``)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with conveyor.connect(f"sqlite:///{path}") as q:
        enqueue_bulk(q, jobs, queue="bench")
        statements = q.driver._queries  # type: ignore[attr-defined]
        claim_sql = statements.text("claim_jobs", {})
        if variant.ids_only:
            assert claim_sql.rstrip().endswith("RETURNING *")
            claim_sql = claim_sql.rstrip().removesuffix("RETURNING *") + "RETURNING id, queue, task"
        done_sql = statements.text("complete_jobs", {"brief": 1})
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    if history:
        claim = _ORDERED_ID if variant.timed_claims else _RANDOM_ID
        conn.execute(
            "WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n"
            " WHERE value < ?)"
            " INSERT INTO conveyor_jobs (queue, task, payload, status, attempts, max_attempts,"
            " claim_id, run_at, created_at, updated_at, finished_at)"
            f" SELECT 'history', 'bench.noop', '{{}}', 'completed', 1, 3, {claim}, 0, 0, 0, 0"
            " FROM n",
            (history,),
        )
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if variant.drop_trigger or variant.skipping or variant.every_row:
        ((trigger,),) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'conveyor_count_changed'"
        )
        conn.execute("DROP TRIGGER conveyor_count_changed")
        assert _EVERY_ROW[0] in trigger
        assert _SKIPPING[0] in trigger
        if variant.skipping:
            conn.execute(trigger.replace(*_EVERY_ROW).replace(*_SKIPPING))
        elif variant.every_row:
            conn.execute(trigger.replace(*_EVERY_ROW))
    # As the driver does since migration 0018: a claim's and an ending's counts written
    # by a statement each (where a variant keeps the trigger as migrated).
    counting = not (variant.drop_trigger or variant.skipping or variant.every_row)
    counts = _Counts(conn, statements) if counting else None
    if variant.drop_dependency_trigger:
        conn.execute("DROP TRIGGER conveyor_dependency_met")
    for index in variant.drop:
        conn.execute(f"DROP INDEX {index}")
    for statement in variant.trigger:
        conn.execute(statement)
    move = _move_to_history(conn) if variant.history else None
    held = cpu = after = 0
    read = "SELECT * FROM conveyor_jobs WHERE id IN (SELECT value FROM json_each(?))"
    previous: list[tuple[int, str]] = []
    while True:
        started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
        conn.execute("BEGIN IMMEDIATE")
        if previous:
            items = json.dumps([{"id": i, "claim_id": c, "result": None} for i, c in previous])
            if move is None:
                done = conn.execute(done_sql, {"items": items})
                ended = done.fetchall()
                if counts is not None:
                    count_moves(counts, _queue_task(done.description, ended),  # type: ignore[arg-type]
                                "running", "completed")  # fmt: skip
            else:
                moved = [row[0] for row in conn.execute(move[0], {"items": items})]
                conn.execute(move[1], {"ids": json.dumps(moved)})
        claim_id = _timed_claim_id() if variant.timed_claims else new_claim_id()
        params = {"queue": "bench", "limit": batch, "claim_id": claim_id, "worker": "w",
                  "lease_s": 60}  # fmt: skip
        claimed = conn.execute(claim_sql, params)
        rows = claimed.fetchall()
        if counts is not None and rows:
            count_moves(counts, _queue_task(claimed.description, rows),  # type: ignore[arg-type]
                        "pending", "running")  # fmt: skip
        conn.execute("COMMIT")
        held += time.perf_counter_ns() - started
        cpu += time.thread_time_ns() - started_cpu
        if variant.ids_only and rows:
            started = time.perf_counter_ns()
            rows = conn.execute(read, (json.dumps([row[0] for row in rows]),)).fetchall()
            after += time.perf_counter_ns() - started
        if not rows:
            break
        previous = [(row[0], claim_id) for row in rows]
    # (A trigger that skips the claim's and ending's rows leaves their counts behind.)
    counted = not (variant.drop_trigger or variant.skipping)
    if variant.history and counts is not None:
        counted = False  # the history table's endings count as they move, not as above
    _check(conn, jobs, history=variant.history, counted=counted)
    conn.close()
    return held / jobs / 1000, cpu / jobs / 1000, after / jobs / 1000


def _check(conn: sqlite3.Connection, jobs: int, *, history: bool, counted: bool) -> None:
    """Every job ended once, where the variant keeps it, and (with the count trigger
    kept) the counts say so."""
    table = "conveyor_jobs_done" if history else "conveyor_jobs"
    ((done,),) = conn.execute(
        f"SELECT count(*) FROM {table} WHERE status = 'completed' AND queue = 'bench'"
    )
    ((rows,),) = conn.execute("SELECT count(*) FROM conveyor_jobs WHERE queue = 'bench'")
    expected_rows = 0 if history else jobs
    counts = dict(
        conn.execute(
            "SELECT status, sum(n) FROM conveyor_counts WHERE queue = 'bench' GROUP BY status"
        )
    )
    if done != jobs or rows != expected_rows:
        raise RuntimeError(f"{done} jobs completed and {rows} in the jobs table, of {jobs}")
    if counted and (counts.get("completed") != jobs or any(
            n for status, n in counts.items() if status != "completed")):  # fmt: skip
        raise RuntimeError(f"the counts say {counts}, of {jobs} completed jobs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--history", type=int, default=0, help="finished jobs put in first")
    parser.add_argument(
        "--only", help="comma-separated beginnings of variant names (as migrated always runs)"
    )
    args = parser.parse_args()
    wanted = [w.strip() for w in args.only.split(",")] if args.only else [""]
    variants = {name: v for name, v in VARIANTS.items()
                if name == "as migrated" or any(name.startswith(w) for w in wanted)}  # fmt: skip
    held: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    later: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "parts.db"
        for _ in range(args.runs):
            for name, variant in variants.items():
                wall, used, read = _held_per_job(path, args.jobs, args.batch, variant, args.history)
                held[name].append(wall)
                cpu[name].append(used)
                later[name].append(read)
    print(f"write lock held per job, µs, then the CPU time used holding it (and for the "
          f"claims returning ids, the rows' read after the commit): {args.jobs} jobs "
          f"in batches of {args.batch} after {args.history} finished jobs put in first, "
          f"SQLite {sqlite3.sqlite_version}, synchronous=FULL; "
          f"median of {args.runs} interleaved runs (min-max)")  # fmt: skip
    for name in variants:
        read = statistics.median(later[name])
        print(f"  {name:56s}{_figure(held, name)}{_figure(cpu, name)}"
              + (f"  read after: {read:.1f}" if read else ""))  # fmt: skip


def _figure(figures: dict[str, list[float]], name: str) -> str:
    """The median, its spread, and its difference to the table as migrated."""
    values = figures[name]
    median = statistics.median(values)
    base = statistics.median(figures["as migrated"])
    return f" {median:6.1f} ({min(values):.1f}-{max(values):.1f}) {median - base:+6.1f}"


if __name__ == "__main__":
    main()
