"""What the worker's batch costs on MariaDB, part by part of conveyor's schema.

The ``claim(ack=…)`` loop (one transaction per batch: the previous batch completed and
the next claimed, as the worker does) drains ``--jobs`` jobs from a new database, once
with the schema as migrated (each statement that changes states writes its counts, one
INSERT of deltas per statement) and once on scratch copies changed in one part: the row
trigger that counted every status change before migration 0015 put back (two delta rows
per job and change; with the schema's version set back to 14, so conveyor leaves the
counting to it), the three indexes that migration 0014 moved to generated columns put
back on ``status``, and the secondary indexes other than the claim's own that hold
``status`` or a column made of it taken away (MySQL has no partial index: each job's
claim and ending rewrite an entry in the two that hold ``status`` itself, and in some
of the three on generated columns). The difference is what each part costs the loop.
Scratch databases only; each run checks the counts after its drain. Variants are
interleaved, run after run, so a change in the machine's load hits them
alike. The statements are timed too, per batch: the two locking reads, the two
UPDATEs and the two read-backs.

    python benchmarks/mariadb_parts.py [--url mysql://root@127.0.0.1:3306/test]
                                       [--jobs 20000] [--runs 3]
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.harness import parts_arguments, print_parts
from conveyor.cli.bench import drain_acked, enqueue_bulk

URL = "mysql://root@127.0.0.1:3306/test"
QUEUE = "bench"


def _old_trigger() -> str:
    """The row trigger as migration 0013 creates it (0015 dropped it)."""
    from conveyor.drivers.mysql.dialect import (
        MARIADB_COLLATION,
        PACKAGE,
        macros,
        migration_statements,
    )
    from conveyor.drivers.sql import load_migrations

    (migration,) = (m for m in load_migrations(PACKAGE, macros(MARIADB_COLLATION))
                    if m.version == 13)  # fmt: skip
    return next(
        statement
        for statement in migration_statements(migration)
        if statement.startswith("CREATE TRIGGER conveyor_count_changed")
    )


# That trigger put back, and the schema's version set back to 14, where a queue leaves
# the counting to it.
_TRIGGER = ("DELETE FROM conveyor_migrations WHERE version >= 15", _old_trigger())
# Every index of conveyor_jobs that holds ``status`` or a column made of it (migration
# 0014), but the claim's own.
_STATUS_INDEXES = tuple(
    f"DROP INDEX {name} ON conveyor_jobs"
    for name in (
        "conveyor_jobs_due",
        "conveyor_jobs_running_group",
        "conveyor_jobs_workflow_status",
        "conveyor_jobs_status",
        "conveyor_jobs_status_id",
    )
)
# The three indexes as they were before migration 0014: on status itself, so written at
# every change of every job's state.
_OLD_INDEXES = (
    "ALTER TABLE conveyor_jobs"
    " DROP INDEX conveyor_jobs_due, DROP INDEX conveyor_jobs_running_group,"
    " DROP INDEX conveyor_jobs_workflow_status,"
    " ADD INDEX conveyor_jobs_due (queue, status, run_at),"
    " ADD INDEX conveyor_jobs_running_group (queue, status, job_group),"
    " ADD INDEX conveyor_jobs_workflow_status (workflow_id, status)",
)
VARIANTS: dict[str, tuple[str, ...]] = {
    "as migrated": (),
    "with the row trigger of before 0015": _TRIGGER,
    "with the three indexes of before 0014": _OLD_INDEXES,
    "with both, as before 0014": _OLD_INDEXES + _TRIGGER,
    "without the five status indexes": _STATUS_INDEXES,
}


@contextmanager
def _statement_clock() -> Iterator[dict[str, list[int]]]:
    """Per named statement: [calls, ns], while the block runs."""
    from conveyor.drivers.mysql import driver

    spent: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    original = driver._MySQLSession.run_step

    def timed(self: Any, step: Any) -> Any:
        started = time.perf_counter_ns()
        try:
            return original(self, step)
        finally:
            entry = spent[step.name]
            entry[0] += 1
            entry[1] += time.perf_counter_ns() - started

    driver._MySQLSession.run_step = timed  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        driver._MySQLSession.run_step = original  # type: ignore[method-assign]


def _drain(url: str, jobs: int, change: tuple[str, ...]) -> tuple[float, dict[str, list[int]]]:
    """jobs/s of the claim(ack=) loop, and its statements' time, on a new database."""
    import pymysql

    from conveyor.drivers.mysql.dialect import Server, scratch_database

    with scratch_database(url, f"conveyor_parts_{uuid.uuid4().hex[:10]}") as scratch:
        with conveyor.connect(scratch) as q:
            enqueue_bulk(q, jobs, queue=QUEUE)
        alter = pymysql.connect(**Server.from_url(scratch).connect_kwargs(10.0))
        with alter.cursor() as cur:
            for statement in change:
                cur.execute(statement)
        alter.close()
        # Connected again, as the schema now is (migrating would undo a variant's
        # change): a queue reads the schema's version when it connects.
        with conveyor.connect(scratch, migrate=False) as q, _statement_clock() as spent:
            took = drain_acked(q, jobs, queue=QUEUE)
            counted = q.task_stats(QUEUE)  # the counts alone (stats() reads more)
        if [(s.completed, s.total) for s in counted.values()] != [(jobs, jobs)]:
            raise SystemExit(f"counts wrong after the drain: {counted}")  # once, by one means
    return jobs / took, dict(spent)


def main() -> None:
    args = parts_arguments(__doc__.split("\n\n")[0], URL)
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    per_batch: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in VARIANTS}
    for _ in range(args.runs):
        for name, change in VARIANTS.items():
            rate, spent = _drain(args.url, args.jobs, change)
            rates[name].append(rate)
            batches = max(1, args.jobs / 100)
            for statement, (_, ns) in spent.items():
                per_batch[name][statement].append(ns / batches / 1e6)
    print_parts("MariaDB", args.jobs, args.runs, rates)
    print("ms per batch of 100, by statement (median):")
    for name, statements in per_batch.items():
        parts = sorted(statements.items(), key=lambda kv: -statistics.median(kv[1]))
        shown = ", ".join(f"{s} {statistics.median(v):.2f}" for s, v in parts if v)
        print(f"  {name}: {shown}")


if __name__ == "__main__":
    main()
