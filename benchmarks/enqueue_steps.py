"""A durable single enqueue, step by step: from a plain commit into conveyor's table up
to ``Queue.enqueue``, each step adding one layer, all timed in turn on one database.

    python benchmarks/enqueue_steps.py --backend sqlite
    python benchmarks/enqueue_steps.py --backend postgresql --rounds 3000
    python benchmarks/enqueue_steps.py --backend mariadb [--client mysqlclient]

Each round runs every step once, in a shuffled order (so none always follows the same
neighbour, and a burst of load elsewhere hits all alike); each step is one durable
commit. The steps:

- a plain commit: one INSERT into conveyor's own table, two parameters, nothing returned
  (what ``benchmarks/paired.py`` compares the enqueue with);
- conveyor's statement: the driver's ``insert_job`` with the parameters of a real enqueue
  (its ``ON CONFLICT``, eleven named parameters, ``RETURNING``), run on a plain
  connection;
- on PostgreSQL, the same statement with its NOTIFY (what the driver runs), then the
  same through the driver's pool;
- on MariaDB, first the plain commit returning the three columns a single enqueue reads
  back (``INSERT … RETURNING id, run_at, created_at``), then conveyor's statement (which
  returns them too), then the same through the driver's pool (a pooled connection,
  checked for a socket the server closed, and a cursor); the plain connection is of the
  client library of ``--client``, as the queue's;
- ``driver.write_once``: the driver's whole path for one operation;
- ``Queue.enqueue``: the checks, the operation, the driver, the returned ``Job``.

The difference between two neighbouring steps is what that layer costs at this
durability; the p50 of each and its ratio to the plain commit are printed.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.drains import MARIADB_URL
from benchmarks.floor import _NOW, _SQL
from benchmarks.floor_queue import mariadb_connect
from benchmarks.harness import PG_URL, mariadb_database, pg_database, sqlite_dir
from conveyor.ops.enqueue import plain_job

TASK = "bench.noop"
PAYLOAD = '{"i":1}'
Steps = dict[str, Callable[[], Any]]


@contextmanager
def _sqlite() -> Iterator[Steps]:
    with sqlite_dir() as folder, conveyor.connect(f"sqlite:///{folder / 'steps.db'}") as q:
        driver: Any = q.driver
        # The queue's own connection: a second one would find the file changed before
        # every turn and drop its page cache, a cost of neither side.
        conn: sqlite3.Connection = driver._conn
        op = plain_job(q.defaults, TASK, {"i": 1}, {}).insert(driver)
        plain = _SQL[("sqlite", "conveyor")]["insert"].replace("{now}", _NOW)
        statement, params = driver._queries[op.op], op.params()
        yield {
            "a plain commit into conveyor's table": lambda: conn.execute(
                plain, ("default", PAYLOAD)
            ),
            "conveyor's statement": lambda: conn.execute(statement, params).fetchall(),
            "driver.write_once": lambda: driver.write_once(op, queues=("default",)),
            "Queue.enqueue": lambda: q.enqueue(TASK, {"i": 1}),
        }


@contextmanager
def _postgres(pg_url: str) -> Iterator[Steps]:
    import psycopg
    from psycopg.rows import dict_row

    with pg_database(pg_url) as url, conveyor.connect(url) as q:
        driver: Any = q.driver
        conn = psycopg.connect(url, autocommit=True)
        cur = conn.cursor(row_factory=dict_row)
        op = plain_job(q.defaults, TASK, {"i": 1}, {}).insert(driver)
        plain = _SQL[("postgresql", "conveyor")]["insert"]
        statement, params = driver._queries[op.op], op.params()
        announcing = driver._announced(statement)
        notified = {**params, "notify_channel": driver.channel, "notify_payload": "q:default"}

        def pooled() -> None:
            pooled_conn = driver._pool.getconn()
            try:
                pooled_conn.cursor(row_factory=dict_row).execute(announcing, notified).fetchall()
            finally:
                driver._pool.putconn(pooled_conn)

        try:
            yield {
                "a plain commit into conveyor's table": lambda: conn.execute(
                    plain, ("default", PAYLOAD)
                ),
                "conveyor's statement": lambda: cur.execute(statement, params).fetchall(),
                "the same with its NOTIFY": lambda: cur.execute(announcing, notified).fetchall(),
                "the same through the driver's pool": pooled,
                "driver.write_once": lambda: driver.write_once(op, queues=("default",)),
                "Queue.enqueue": lambda: q.enqueue(TASK, {"i": 1}),
            }
        finally:
            conn.close()


@contextmanager
def _mariadb(server_url: str, client: str) -> Iterator[Steps]:
    from conveyor.drivers.mysql.session import closed_by_server

    with mariadb_database(server_url) as url, conveyor.connect(f"{url}?client={client}") as q:
        driver: Any = q.driver
        conn = mariadb_connect(url, client)
        cur = conn.cursor()
        op = plain_job(q.defaults, TASK, {"i": 1}, {}).insert(driver)
        plain = _SQL[("mariadb", "conveyor")]["insert"]
        returning = plain + " RETURNING id, run_at, created_at"
        statement, params = driver._queries["insert_job_returning"], op.params()

        def pooled() -> None:
            pooled_conn = driver._pool.get()
            try:
                closed_by_server(driver._client.fileno(pooled_conn))
                pooled_cur = pooled_conn.cursor(driver._client.dict_cursor)
                pooled_cur.execute(statement, params)
                pooled_cur.fetchall()
            finally:
                driver._pool.put(pooled_conn)

        try:
            yield {
                "a plain commit into conveyor's table": lambda: cur.execute(
                    plain, ("default", PAYLOAD)
                ),
                "the same, RETURNING three columns": lambda: (
                    cur.execute(returning, ("default", PAYLOAD)),
                    cur.fetchall(),
                ),
                "conveyor's statement": lambda: (cur.execute(statement, params), cur.fetchall()),
                "the same through the driver's pool": pooled,
                "driver.write_once": lambda: driver.write_once(op, queues=("default",)),
                "Queue.enqueue": lambda: q.enqueue(TASK, {"i": 1}),
            }
        finally:
            conn.close()


def measure(steps: Steps, rounds: int, warmup: int) -> dict[str, float]:
    """The p50 of each step in µs, over ``rounds`` rounds after ``warmup`` untimed ones."""
    took: dict[str, list[float]] = {name: [] for name in steps}
    order = list(steps)
    clock = time.perf_counter_ns
    for i in range(warmup + rounds):
        random.shuffle(order)
        for name in order:
            started = clock()
            steps[name]()
            if i >= warmup:
                took[name].append((clock() - started) / 1000)
    return {name: statistics.median(values) for name, values in took.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "mariadb"), default="sqlite")
    parser.add_argument("--client", choices=("pymysql", "mysqlclient"), default="pymysql")
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--pg", default=PG_URL)
    parser.add_argument("--mariadb", default=MARIADB_URL)
    args = parser.parse_args()
    opened = (
        _sqlite()
        if args.backend == "sqlite"
        else _postgres(args.pg)
        if args.backend == "postgresql"
        else _mariadb(args.mariadb, args.client)
    )
    with opened as steps:
        p50 = measure(steps, args.rounds, args.warmup)
    base = p50["a plain commit into conveyor's table"]
    print(f"{args.backend}: p50 of {args.rounds} rounds, steps in shuffled order (µs; "
          f"x the plain commit; + the step before)")  # fmt: skip
    before = None
    for name, value in p50.items():
        added = "" if before is None else f"  {value - before:+7.1f}"
        print(f"  {name:40s} {value:8.1f}  {value / base:5.3f}x{added}")
        before = value


if __name__ == "__main__":
    main()
