"""Single enqueue, timed the plain way: each system as its own users would call it.

A check on the harness, kept deliberately free of it: every system is set up the way
its documentation shows (durability raised to SQLite WAL + synchronous=FULL where the
system does not already run that way; PostgreSQL as the server is configured) and timed
in a fresh process of its own, ``time.perf_counter_ns()`` around the one call, after a
warm-up, the same number of samples for everyone.

    python benchmarks/plain_enqueue.py                 # every system, each in its own process
    python benchmarks/plain_enqueue.py --system huey   # one system, in this process

It prints one line per system: p50 and p99 in microseconds. ``benchmarks/run.py`` should
agree with these within the machine's noise; when it did not, the harness was wrong
(docs/benchmarks.md, "What the harness got wrong").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PG_URL = os.environ.get("CONVEYOR_BENCH_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
SQLITE = ("conveyor-sqlite", "huey", "persist-queue", "litequeue")
POSTGRES = ("conveyor-postgresql", "pgqueuer", "procrastinate")


def _sqlite_system(name: str, folder: Path) -> tuple[Callable[[int], Any], Callable[[], None]]:
    """(enqueue one job, close) for a SQLite system, set up as its docs show."""
    if name == "conveyor-sqlite":
        import conveyor

        q = conveyor.connect(f"sqlite:///{folder / 'conveyor.db'}")  # WAL + FULL by default
        return (lambda i: q.enqueue("bench.noop", {"i": i})), q.close
    if name == "huey":
        from huey import SqliteHuey  # type: ignore[import-untyped]

        # WAL is huey's default journal mode; fsync=True is synchronous=FULL.
        huey = SqliteHuey(filename=str(folder / "huey.db"), fsync=True)

        @huey.task()  # type: ignore[untyped-decorator]
        def noop(i: int) -> None:
            pass

        return noop, huey.storage.close
    if name == "persist-queue":
        import persistqueue

        # WAL is its default, synchronous is left at SQLite's default, FULL.
        pq = persistqueue.SQLiteAckQueue(str(folder / "pq"))
        return (lambda i: pq.put({"i": i})), pq.close
    if name == "litequeue":
        from litequeue import LiteQueue  # type: ignore[import-untyped]

        lq = LiteQueue(str(folder / "lq.db"))
        lq.conn.execute("PRAGMA synchronous = FULL")  # it sets NORMAL itself
        return (lambda i: lq.put(json.dumps({"i": i}))), lq.close
    raise SystemExit(f"unknown system {name!r}")


async def _pg_system(name: str, url: str) -> tuple[Callable[[int], Any], Callable[[], Any]]:
    """(async enqueue one job, async close) for a PostgreSQL system, as its docs show."""
    if name == "pgqueuer":
        import psycopg
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries

        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        queries = Queries(PsycopgDriver(conn))
        await queries.install()

        async def put(i: int) -> Any:
            return await queries.enqueue("noop", json.dumps({"i": i}).encode())

        return put, conn.close
    if name == "procrastinate":
        import procrastinate

        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

        @app.task(name="noop")
        async def noop(i: int) -> None:
            pass

        await app.open_async()
        await app.schema_manager.apply_schema_async()

        async def defer(i: int) -> Any:
            return await noop.defer_async(i=i)

        return defer, app.close_async
    raise SystemExit(f"unknown system {name!r}")


def _percentiles(ns: list[int]) -> tuple[float, float]:
    ordered = sorted(ns)
    return ordered[len(ordered) // 2] / 1000.0, ordered[int(len(ordered) * 0.99)] / 1000.0


def measure(name: str, samples: int, warmup: int, pg_url: str = PG_URL) -> tuple[float, float]:
    """(p50, p99) in microseconds of ``samples`` enqueues after ``warmup`` untimed ones."""
    clock = time.perf_counter_ns
    took: list[int] = []
    if name in SQLITE:
        with tempfile.TemporaryDirectory(prefix="plain-enqueue-") as folder:
            put, close = _sqlite_system(name, Path(folder))
            for i in range(warmup):
                put(-1 - i)
            for i in range(samples):
                started = clock()
                put(i)
                took.append(clock() - started)
            close()
        return _percentiles(took)
    if name == "conveyor-postgresql":
        import conveyor

        with _pg_database(pg_url) as url, conveyor.connect(url) as q:
            for i in range(warmup):
                q.enqueue("bench.noop", {"i": -1 - i})
            for i in range(samples):
                started = clock()
                q.enqueue("bench.noop", {"i": i})
                took.append(clock() - started)
        return _percentiles(took)

    async def run(url: str) -> None:
        put, close = await _pg_system(name, url)
        for i in range(warmup):
            await put(-1 - i)
        for i in range(samples):
            started = clock()
            await put(i)
            took.append(clock() - started)
        await close()

    with _pg_database(pg_url) as url:
        asyncio.run(run(url))
    return _percentiles(took)


def _pg_database(pg_url: str) -> Any:
    from benchmarks.harness import pg_database  # a fresh database, dropped afterwards

    return pg_database(pg_url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", help="one system, measured in this process")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg", default=PG_URL)
    args = parser.parse_args(argv)
    if args.system:
        p50, p99 = measure(args.system, args.samples, args.warmup, args.pg)
        print(json.dumps({"system": args.system, "p50_us": p50, "p99_us": p99}))
        return 0
    names = [*(SQLITE if "sqlite" in args.backends else ()),
             *(POSTGRES if "postgresql" in args.backends else ())]  # fmt: skip
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in names:
        out = subprocess.run(
            [sys.executable, __file__, "--system", name, "--samples", str(args.samples),
             "--warmup", str(args.warmup), "--pg", args.pg],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if out.returncode:
            print(f"{name:20} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:20} p50 {row['p50_us']:8.1f} us   p99 {row['p99_us']:8.1f} us")
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
