"""Claim latency while the retention policies prune a large backlog.

Fills one database with ``--jobs`` completed jobs (default 1M) in queue ``old`` (a
fixture UPDATE makes them completed), sets a retention policy that lets them all go,
then runs a claimer (claim one job of queue ``work``, complete it, in a
loop with a 2 ms think time, on a connection of its own) and prints the p50/p99/max of
a claim and its completion:

1. with nothing else running (the baseline);
2. while ``RetentionPruner`` deletes the backlog, ``--batch`` jobs per transaction with
   ``--pause`` seconds between batches (every worker runs it);
3. for comparison, while one ``prune()`` deletes a backlog of the same size in
   batches of a thousand (``conveyor prune``'s way);
4. right after that prune, ``--counted`` claims that count the jobs remaining
   (``count_remaining=True``, the default), one after the other: on PostgreSQL and
   MariaDB they read the count deltas the deletes left until folds take them.

    python benchmarks/retention.py                             # SQLite and PostgreSQL, 1M
    python benchmarks/retention.py --jobs 200000 --backends sqlite,postgresql,mariadb

Figures, not assertions. The claimer is a thread of the same process as the pruner.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import conveyor
from benchmarks.drains import MARIADB_URL
from benchmarks.harness import PG_URL, server_database, sqlite_dir
from benchmarks.task_stats import execute
from conveyor.maintenance import RetentionPruner

CHUNK = 5000
FINISH = (
    "UPDATE conveyor_jobs SET status = 'completed', attempts = 1, started_at = created_at,"
    " finished_at = created_at WHERE queue = 'old'"
)


def fill(q: conveyor.Queue, url: str, n: int) -> float:
    started = time.perf_counter()
    for start in range(0, n, CHUNK):
        q.enqueue_ids([{"task": "old", "payload": {"n": i}}
                       for i in range(start, min(n, start + CHUNK))], queue="old")  # fmt: skip
    execute(url, FINISH)
    return time.perf_counter() - started


class Claimer:
    """Claim and complete one job of queue ``work`` at a time, a short think time
    between, timing each claim-and-complete (a write waiting on the pruner's
    transaction waits in one or the other); the pool of pending jobs is topped up
    untimed."""

    def __init__(self, url: str, think: float = 0.002) -> None:
        self.q = conveyor.connect(url, migrate=False)
        self.think = think
        self.took: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            claim = self.q.claim("work", count_remaining=False)
            if not claim.jobs:
                self.q.enqueue_ids([{"task": "work"}] * 2000, queue="work")
                continue
            self.q.complete(claim.jobs[0].id, claim.id)
            self.took.append((time.perf_counter() - started) * 1000)
            time.sleep(self.think)

    def __enter__(self) -> Claimer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.q.close()


def figures(took: list[float], what: str = "claim+complete") -> str:
    ordered = sorted(took)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"{what:14} {len(ordered):6}  p50 {statistics.median(ordered):7.2f} ms  "
            f"p99 {p99:8.2f} ms  max {ordered[-1]:8.1f} ms")  # fmt: skip


def counted_claims(url: str, n: int) -> str:
    """``n`` claims of one job that count the jobs remaining, each acknowledging the
    one before, timed one by one (the pending jobs enqueued first, untimed)."""
    took: list[float] = []
    with conveyor.connect(url, migrate=False) as q:
        q.enqueue_ids([{"task": "work"}] * n, queue="work")
        ack = None
        for _ in range(n):
            started = time.perf_counter()
            claim = q.claim("work", ack=ack)
            took.append((time.perf_counter() - started) * 1000)
            ack = claim.id
        q.claim("work", ack=ack, limit=1)
    return f"{figures(took, 'counted claim')}  all {sum(took) / 1000:.2f} s"


def during(url: str, work: Callable[[], int]) -> tuple[str, int, float]:
    with Claimer(url) as claimer:
        time.sleep(0.5)
        started = time.perf_counter()
        removed = work()
        took = time.perf_counter() - started
    return figures(claimer.took), removed, took


@contextlib.contextmanager
def database(backend: str, pg: str, mariadb: str) -> Iterator[str]:
    if backend == "sqlite":
        with sqlite_dir() as folder:
            yield f"sqlite:///{folder / 'retention.db'}"
    else:
        with server_database(backend, mariadb if backend == "mariadb" else pg) as url:
            yield url


def run(backend: str, args: argparse.Namespace) -> None:
    jobs, batch, pause = args.jobs, args.batch, args.pause
    with database(backend, args.pg, args.mariadb) as url, conveyor.connect(url) as q:
        print(f"{backend:10} filled {jobs:,} completed jobs in {fill(q, url, jobs):.1f} s")
        with Claimer(url) as claimer:
            time.sleep(args.baseline)
        print(f"{backend:10} {'baseline':34} {figures(claimer.took)}")
        q.set_retention("completed", 0, queue="old")
        pruner = RetentionPruner(q, batch=batch, pause=pause, max_batches=10**6)
        text, removed, took = during(url, pruner.run_once)
        label = f"retention, {batch}/batch, {pause * 1000:g} ms pause"
        print(f"{backend:10} {label:34} {text}  ({removed:,} pruned in {took:.1f} s)")
        q.clear_retention(queue="old")
        fill(q, url, jobs)
        text, removed, took = during(url, lambda: q.prune(older_than=0, statuses=["completed"]))
        print(f"{backend:10} {'prune()':34} {text}  ({removed:,} in {took:.1f} s)")
        print(f"{backend:10} {'right after it':34} {counted_claims(url, args.counted)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--pause", type=float, default=0.05)
    parser.add_argument("--baseline", type=float, default=5.0, help="seconds")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--counted", type=int, default=200, help="claims after the prune")
    parser.add_argument("--pg", default=PG_URL)
    parser.add_argument("--mariadb", default=MARIADB_URL)
    args = parser.parse_args()
    for backend in args.backends.split(","):
        run(backend.strip(), args)


if __name__ == "__main__":
    main()
