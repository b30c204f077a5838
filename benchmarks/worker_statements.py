"""Where a worker's drain goes on a database server, statement by statement.

One in-process ``Worker`` (its default 10 threads) drains ``--jobs`` no-op jobs from a
new database while every statement its connections send is timed around the client
library's ``execute`` (psycopg's on PostgreSQL, PyMySQL's on MariaDB): so each figure is
the server's work on the statement, the round trip and the wait for it, as the worker
saw it. Printed per statement (its first words; values bound inline by the client, such
as a list of ids, are cut off): how often it ran, the mean time of one, the time per job
drained, and the rows per call where the client reports them.

    python benchmarks/worker_statements.py --backend mariadb [--jobs 10000]
    python benchmarks/worker_statements.py --backend postgresql
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.profile_worker import QUEUE, _app, database
from conveyor.cli.bench import enqueue_bulk

_SHOWN = 100  # characters of a statement that name it
_LIST = re.compile(r"\(\s*\d+(\s*,\s*\d+)+\s*\)")  # a list of ids bound inline


class Clock:
    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.spent: collections.Counter[str] = collections.Counter()
        self.rows: collections.Counter[str] = collections.Counter()
        self.on = False

    def record(self, query: str, seconds: float, rows: int) -> None:
        if not self.on:
            return
        key = _LIST.sub("(…)", " ".join(query.split()))[:_SHOWN]
        self.calls[key] += 1
        self.spent[key] += seconds
        self.rows[key] += max(rows, 0)


@contextmanager
def clocked(backend: str, clock: Clock) -> Iterator[None]:
    """The client library's ``execute`` timed while the block runs."""
    if backend == "postgresql":
        import psycopg

        cls: Any = psycopg.Cursor
    else:
        import pymysql.cursors

        cls = pymysql.cursors.Cursor
    original: Callable[..., Any] = cls.execute

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, query, *args, **kwargs)
        finally:
            text = query.as_string(self) if hasattr(query, "as_string") else str(query)
            clock.record(text, time.perf_counter() - started, self.rowcount or 0)

    cls.execute = execute
    try:
        yield
    finally:
        cls.execute = original


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("postgresql", "mariadb"), default="mariadb")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    clock = Clock()
    with database(args.backend) as url, clocked(args.backend, clock):
        app = _app(url, is_async=False)
        enqueue_bulk(app.queue, args.jobs, queue=QUEUE)
        worker = conveyor.Worker(app, burst=True, install_signals=False)
        clock.on = True
        started = time.perf_counter()
        stats = worker.run()
        took = time.perf_counter() - started
        clock.on = False
        app.queue.close()
    if stats.completed != args.jobs:
        raise SystemExit(f"the worker completed {stats.completed} of {args.jobs}")
    n = args.jobs
    print(f"{args.backend}: one worker drained {n:,} jobs at {n / took:,.0f} jobs/s")
    print(f"  {'calls':>6} {'µs/call':>8} {'µs/job':>7} {'rows/call':>9}  statement")
    for key, calls in clock.calls.most_common(args.top):
        spent = clock.spent[key]
        print(f"  {calls:6d} {spent / calls * 1e6:8.0f} {spent / n * 1e6:7.1f}"
              f" {clock.rows[key] / calls:9.1f}  {key}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
