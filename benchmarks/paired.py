"""Enqueue one, paired: conveyor against a plain durable commit, in lockstep.

The same database (one SQLite file, one PostgreSQL or MariaDB database) takes, turn about, a plain
INSERT into a bare table, the same plain INSERT into conveyor's own table, and
``Queue.enqueue``. Each is one durable commit. Because the three alternate operation by
operation, a burst of load from elsewhere on the machine hits all three alike, which
makes their ratio steadier than that of separate runs: on a shared machine, a single
p50 moves by more than the 10% being judged.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import conveyor
from benchmarks.floor import _NOW, _SQL, _SQLITE_BARE, MariaDBFloor, PostgresFloor
from benchmarks.harness import Figure, server_database, sqlite_dir
from conveyor.cli.bench import NOOP_TASK, Latency

WORKLOAD = "enqueue one, paired"


@contextmanager
def _sqlite(workdir: Path) -> Iterator[tuple[conveyor.Queue, Callable[[str, str], Any]]]:
    with sqlite_dir(str(workdir)) as folder:
        path = folder / "paired.db"
        with conveyor.connect(f"sqlite:///{path}") as q:
            # The plain INSERTs go through the queue's own connection: a second
            # connection would find the file changed before every turn and drop its page
            # cache (and make the queue's connection do the same), which is not a cost of
            # either side.
            conn: sqlite3.Connection = q.driver._conn  # type: ignore[attr-defined]
            for statement in _SQLITE_BARE:
                conn.execute(statement)
            yield q, lambda sql, payload: conn.execute(sql, ("default", payload))


@contextmanager
def _server(
    floor: MariaDBFloor | PostgresFloor,
) -> Iterator[tuple[conveyor.Queue, Callable[[str, str], Any]]]:
    """A new database on the floor's server: the queue, and the floor's own connection
    (autocommit, its bare table made) for the plain INSERTs."""
    with server_database(floor.backend, floor.url) as url, conveyor.connect(url) as q:
        conn = floor._open(url)
        try:
            yield q, lambda sql, payload: floor._run(conn, sql, ("default", payload))
        finally:
            conn.close()


def figures(backend: str, workdir: Path, server_url: str, n: int,
            warmup: int = 0) -> list[Figure]:  # fmt: skip
    """``server_url``: the PostgreSQL or MariaDB server (a new database on it)."""
    sql = {table: _SQL[(backend, table)]["insert"].replace("{now}", _NOW)
           for table in ("bare", "conveyor")}  # fmt: skip
    took: dict[str, list[float]] = {"floor": [], "floor (conveyor table)": [], "conveyor": []}
    opened = (_sqlite(workdir) if backend == "sqlite"
              else _server(MariaDBFloor(server_url) if backend == "mariadb"
                           else PostgresFloor(server_url)))  # fmt: skip
    with opened as (q, plain):
        steps: list[tuple[str, Callable[[int], Any]]] = [
            ("floor", lambda i: plain(sql["bare"], json.dumps({"i": i}))),
            ("floor (conveyor table)", lambda i: plain(sql["conveyor"], json.dumps({"i": i}))),
            ("conveyor", lambda i: q.enqueue(NOOP_TASK, {"i": i})),
        ]
        for i in range(warmup):  # untimed, as for every enqueue-one figure
            for _name, step in steps:
                step(-1 - i)
        clock = time.perf_counter_ns
        for i in range(n):
            # Rotate who goes first, so none always follows the same neighbour.
            for name, step in steps[i % 3 :] + steps[: i % 3]:
                started = clock()
                step(i)
                took[name].append((clock() - started) / 1e9)
    out = []
    for name, samples in took.items():
        lat = Latency.of(samples)
        out += [Figure(WORKLOAD, backend, name, "p50 ms", lat.p50),
                Figure(WORKLOAD, backend, name, "p99 ms", lat.p99)]  # fmt: skip
    return out
