"""Claim latency as the table grows: conveyor alone, on each database.

One queue is filled to each backlog size in turn (1k, 10k, 100k, 1M pending jobs, by bulk
``enqueue_ids``); at each size, ``rounds`` claims of one job are each completed
(p50/p99, ``count_remaining=False``), a few more with ``count_remaining=True`` (the
default) show what counting the backlog costs, and ``stats()`` is timed as a dashboard
polls it. Then every pending job is marked completed in one
plain UPDATE (a fixture, not a workload), fresh jobs are added, and the same claim
latency is measured with those 1M completed rows retained.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import conveyor
from benchmarks.harness import Figure
from conveyor.cli import bench as workloads
from conveyor.cli.bench import Latency

STATS_ROUNDS = 20


def _label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def _analyze(q: conveyor.Queue) -> None:
    """Fresh planner statistics, as autovacuum/ANALYZE would have after a bulk load."""
    with q.driver.session() as s:
        cur = getattr(s, "_cur")  # noqa: B009 - benchmark fixture, not a queue operation
        cur.execute("ANALYZE conveyor_jobs")


def backlogs(q: conveyor.Queue, backend: str, sizes: tuple[int, ...],
             rounds: int) -> Iterator[Figure]:  # fmt: skip
    pending = 0
    for size in sizes:
        if size > pending:
            added = size - pending
            took = workloads.enqueue_bulk(q, added, queue="backlog", ids=True)
            pending = size
            if backend != "mariadb":  # InnoDB samples its statistics by itself
                _analyze(q)
            yield Figure(
                f"bulk fill to {_label(size)}", backend, "conveyor", "jobs/s", added / took
            )
        lat = workloads.claim_complete(q, rounds, queue="backlog")
        yield Figure(f"claim+complete @{_label(size)}", backend, "conveyor", "p50 ms", lat.p50)
        yield Figure(f"claim+complete @{_label(size)}", backend, "conveyor", "p99 ms", lat.p99)
        # The default claim counts what remains (Claim.remaining): what the target judges.
        counted = workloads.claim_complete(q, rounds, queue="backlog", count_remaining=True)
        for metric, value in (("p50 ms", counted.p50), ("p99 ms", counted.p99)):
            yield Figure(f"claim+complete @{_label(size)}, counting remaining", backend,
                         "conveyor", metric, value)  # fmt: skip
        read = stats_latency(q, STATS_ROUNDS)
        yield Figure(f"stats() @{_label(size)}", backend, "conveyor", "p50 ms", read.p50)
        yield Figure(f"stats() @{_label(size)}", backend, "conveyor", "p99 ms", read.p99)
        pending -= 2 * rounds


def stats_latency(q: conveyor.Queue, rounds: int) -> Latency:
    """``stats()`` over every queue, as a dashboard polls it."""
    took = []
    for _ in range(rounds):
        started = time.perf_counter()
        q.stats()
        took.append(time.perf_counter() - started)
    return Latency.of(took)


def retained(q: conveyor.Queue, backend: str, fresh: int, rounds: int) -> Iterator[Figure]:
    """Complete every pending job in one statement, then claim among the survivors."""
    with q.driver.session() as s:
        cur = getattr(s, "_cur")  # noqa: B009
        now = "now()" if backend == "postgresql" else "((julianday('now') - 2440587.5) * 86400.0)"
        cur.execute(
            f"UPDATE conveyor_jobs SET status = 'completed', finished_at = {now},"
            f" updated_at = {now} WHERE status = 'pending'"
        )
    if backend == "postgresql":
        _vacuum(q)
    else:
        _analyze(q)
    total = q.stats().completed
    workloads.enqueue_bulk(q, fresh, queue="retained")
    lat = workloads.claim_complete(q, rounds, queue="retained")
    what = f"claim+complete, {total:,} completed retained"
    yield Figure(what, backend, "conveyor", "p50 ms", lat.p50)
    yield Figure(what, backend, "conveyor", "p99 ms", lat.p99)


def _vacuum(q: conveyor.Queue) -> None:
    """VACUUM cannot run in a transaction: use a connection of its own."""
    import psycopg

    backend = q.driver
    conninfo = getattr(backend, "_conninfo")  # noqa: B009
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{getattr(backend, "schema")}"')  # noqa: B009
        conn.execute("VACUUM ANALYZE conveyor_jobs")
