"""What ``task_stats()`` costs at a million jobs, beside counting the jobs themselves.

``task_stats()`` reads the counts the triggers keep per queue, status and task (as
``stats()`` reads them per queue), not the jobs. This script fills one database with
``--jobs`` jobs (default 1M) spread over 20 tasks and 2 queues, moves most of them to
final statuses with one plain UPDATE (a fixture, not a workload; the triggers count
it), checks the counts against the jobs, then prints the p50/p99 of ``task_stats()``
(every queue, and one queue) and, for reference, of the GROUP BY over the jobs that
``task_stats()`` was before migration 17.

    python benchmarks/task_stats.py                      # SQLite and PostgreSQL, 1M jobs
    python benchmarks/task_stats.py --jobs 100000 --backends sqlite

PostgreSQL: a fresh database on ``--pg`` (default ``$CONVEYOR_BENCH_POSTGRES_URL`` or the
local server), dropped afterwards, vacuumed after the load (what autovacuum does next).
Figures, not assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import conveyor
from benchmarks.harness import PG_URL, pg_database, sqlite_dir

TASKS = 20
CHUNK = 5000
GROUP_BY = "SELECT queue, task, status, count(*) FROM conveyor_jobs GROUP BY queue, task, status"


def fill(q: conveyor.Queue, n: int) -> float:
    """``n`` jobs, task ``t00``…``t19`` and queues ``a``/``b`` in turn; seconds taken."""
    started = time.perf_counter()
    for start in range(0, n, CHUNK):
        items = [
            {"task": f"t{i % TASKS:02d}", "queue": "ab"[i % 2]}
            for i in range(start, min(n, start + CHUNK))
        ]
        q.enqueue_ids(items)
    return time.perf_counter() - started


def execute(url: str, sql: str) -> list[tuple[Any, ...]]:
    """A fixture statement on a connection of its own, outside the queue's operations
    (autocommit: VACUUM runs outside a transaction); the rows it returns."""
    if url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            rows = conn.execute(sql).fetchall()
            conn.commit()
            return [tuple(r) for r in rows]
    if url.startswith(("mysql", "mariadb")):
        from benchmarks.floor_queue import mariadb_connect

        conn = mariadb_connect(url)
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)  # type: ignore[arg-type]
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def spread_statuses(url: str) -> None:
    """Most jobs final, as in a queue that has been running a while: 70% completed,
    10% failed, 5% cancelled, the rest pending."""
    execute(url, """
        UPDATE conveyor_jobs SET status = CASE
            WHEN id % 100 < 70 THEN 'completed'
            WHEN id % 100 < 80 THEN 'failed'
            WHEN id % 100 < 85 THEN 'cancelled'
            ELSE 'pending' END,
          finished_at = CASE WHEN id % 100 < 85 THEN created_at END
    """)  # fmt: skip


def timed(call: Callable[[], Any], rounds: int) -> tuple[float, float]:
    took = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))]


def measure(q: conveyor.Queue, backend: str, rounds: int) -> None:
    for scope, queue in (("every queue", None), ("queue a", "a")):
        p50, p99 = timed(lambda: q.task_stats(queue), rounds)  # noqa: B023
        print(f"{backend:10} task_stats({scope}): p50 {p50:8.2f} ms  p99 {p99:8.2f} ms")


@contextlib.contextmanager
def database(backend: str, pg: str) -> Iterator[str]:
    if backend == "sqlite":
        with sqlite_dir() as folder:
            yield f"sqlite:///{folder / 'task-stats.db'}"
    else:
        with pg_database(pg) as url:
            yield url


def run(backend: str, jobs: int, rounds: int, pg: str) -> None:
    with database(backend, pg) as url, conveyor.connect(url) as q:
        took = fill(q, jobs)
        print(f"{backend:10} filled {jobs:,} jobs in {took:.1f} s")
        spread_statuses(url)
        execute(url, "VACUUM ANALYZE conveyor_jobs" if backend == "postgresql" else "ANALYZE")
        counted = {(queue, task, status): n for queue, task, status, n in execute(url, GROUP_BY)}
        for task, stats in q.task_stats().items():  # the kept counts are the jobs' own
            for status in ("pending", "completed", "failed", "cancelled"):
                n = sum(counted.get((queue, task, status), 0) for queue in "ab")
                assert getattr(stats, status) == n, (task, status)
        measure(q, backend, rounds)
        p50, p99 = timed(lambda: execute(url, GROUP_BY), rounds)
        print(
            f"{backend:10} GROUP BY over the jobs (reference): p50 {p50:8.1f} ms  p99 {p99:8.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg", default=PG_URL)
    args = parser.parse_args()
    for backend in args.backends.split(","):
        run(backend.strip(), args.jobs, args.rounds, args.pg)


if __name__ == "__main__":
    main()
