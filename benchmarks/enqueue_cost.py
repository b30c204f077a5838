"""Where a single ``Queue.enqueue`` spends its time, part by part, and against a plain
commit: figures that hold on a loaded machine.

    python benchmarks/enqueue_cost.py                       # parts, both databases
    python benchmarks/enqueue_cost.py --count               # and instructions, under callgrind

**Parts** (the default): each step of ``q.enqueue("bench.noop", {"i": i})`` run on its
own, in a loop, timed as the least of several repetitions (CPU only: whatever the load,
the quickest repetition is the one nobody interrupted). The steps without I/O are the
library's Python; "statement + commit" is the driver's call that inserts the row and
commits it, and "plain commit" the same INSERT into conveyor's table as a user would
write it (``benchmarks/paired.py``'s floor), both durable, so their figures move with
the disk.

**Instructions** (``--count``): the whole enqueue and the plain commit, each counted
by ``valgrind --tool=callgrind`` as the difference between a run of ``--n`` calls and
one of a tenth as many (start-up, imports and the schema cancel out). Counts do not
depend on the load; the C of SQLite or psycopg is included, the fsync's wait is not.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.floor import _NOW, _SQL
from benchmarks.harness import PG_URL, pg_database, postgres_available
from conveyor import validation as check
from conveyor.cli.bench import NOOP_TASK
from conveyor.ops import Once
from conveyor.ops import enqueue as ops
from conveyor.options import resolved


@contextmanager
def _opened(backend: str, folder: Path) -> Iterator[tuple[conveyor.Queue, Callable[[int], Any]]]:
    """The queue, and a plain commit of one INSERT into its own table."""
    sql = _SQL[(backend, "conveyor")]["insert"].replace("{now}", _NOW)
    if backend == "sqlite":
        with conveyor.connect(f"sqlite:///{folder / 'cost.db'}") as q:
            conn = q.driver._conn  # type: ignore[attr-defined]  # as paired.py does
            yield q, lambda i: conn.execute(sql, ("default", json.dumps({"i": i})))
        return
    import psycopg

    with (
        pg_database(PG_URL) as url,
        conveyor.connect(url) as q,
        psycopg.connect(url, autocommit=True) as pg,
    ):
        yield q, lambda i: pg.execute(sql, ("default", json.dumps({"i": i})))


def _least(step: Callable[[int], Any], n: int, repeats: int) -> float:
    """Microseconds per call: the quickest of ``repeats`` loops of ``n`` calls."""
    best = float("inf")
    for _ in range(repeats):
        gc.disable()
        started = time.perf_counter_ns()
        for i in range(n):
            step(i)
        took = time.perf_counter_ns() - started
        gc.enable()
        best = min(best, took / n / 1000)
    return best


def parts(backend: str, loop: int, repeats: int, samples: int) -> list[tuple[str, float]]:
    with (
        tempfile.TemporaryDirectory(prefix="conveyor-cost-") as folder,
        _opened(backend, Path(folder)) as (q, plain),
    ):
        d, driver = q.defaults, q.driver
        payload = {"i": 1}
        q.enqueue(NOOP_TASK, payload)  # connections and statements warmed up
        job = ops.new_job(d, NOOP_TASK, payload, "default", None, 0, None, None)
        call = ops.enqueue(d, NOOP_TASK, payload)
        once = call.build(driver)
        assert isinstance(once, Once)
        op = once.op
        rows = driver.write_once(op)
        cpu: list[tuple[str, Callable[[int], Any]]] = [
            ("options (resolved)", lambda i: resolved({})),
            ("validation (names, numbers)", lambda i: (
                check.name(NOOP_TASK, "task"), check.name("default", "queue"),
                check.key(None), check.integer(0, "priority"),
                check.timestamp(None, "run_at"),
                check.integer(3, "max_attempts", low=1, high=1_000_000))),
            ("payload encoding", lambda i: check.encode_json(payload, "payload")),
            ("checked job (all of the above)", lambda i: ops.new_job(
                d, NOOP_TASK, payload, "default", None, 0, None, None)),
            ("call (checks + closures)", lambda i: ops.enqueue(d, NOOP_TASK, payload)),
            ("plan (Once + InsertJob)", lambda i: call.build(driver)),
            ("statement parameters", lambda i: op.params()),
            ("result (Job from the row)", lambda i: job.inserted(driver, rows[0])),
            ("announce (local wake-up)", lambda i: driver._announce()),
        ]  # fmt: skip
        out = [(name, _least(step, loop, repeats)) for name, step in cpu]
        # The whole call without a disk: a SQLite database in memory, the plain INSERT
        # on the same connection.
        with conveyor.connect("sqlite:///:memory:") as mem:
            conn = mem.driver._conn  # type: ignore[attr-defined]
            sql = _SQL[("sqlite", "conveyor")]["insert"].replace("{now}", _NOW)
            out.append(
                (
                    "enqueue, whole (memory db)",
                    _least(lambda i: mem.enqueue(NOOP_TASK, payload), loop, repeats),
                )
            )
            out.append(
                (
                    "plain commit (memory db)",
                    _least(
                        lambda i: conn.execute(sql, ("default", json.dumps(payload))), loop, repeats
                    ),
                )
            )
        # Durable: one call of each in turn (as benchmarks/paired.py), the p50 of each.
        durable: list[tuple[str, Callable[[int], Any]]] = [
            ("statement + commit (driver)", lambda i: driver.write_once(op)),
            ("enqueue, whole", lambda i: q.enqueue(NOOP_TASK, payload)),
            ("plain commit (floor)", plain),
        ]
        took: dict[str, list[float]] = {name: [] for name, _ in durable}
        for i in range(samples):
            for name, step in durable[i % 3 :] + durable[: i % 3]:
                started = time.perf_counter_ns()
                step(i)
                took[name].append((time.perf_counter_ns() - started) / 1000)
        out += [(name, statistics.median(took[name])) for name, _ in durable]
        return out


# -- instructions, under callgrind -------------------------------------------------------
def _calls(backend: str, what: str, n: int) -> None:
    """Run ``n`` enqueues (or plain commits) after a warm-up: the counted program."""
    with (
        tempfile.TemporaryDirectory(prefix="conveyor-cost-") as folder,
        _opened(backend, Path(folder)) as (q, plain),
    ):
        step = plain if what == "plain" else (lambda i: q.enqueue(NOOP_TASK, {"i": i}))
        for i in range(20):
            step(-1 - i)
        for i in range(n):
            step(i)


def _instructions(backend: str, what: str, n: int) -> int:
    with tempfile.TemporaryDirectory(prefix="conveyor-callgrind-") as folder:
        out = Path(folder) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             sys.executable, __file__, "--run", backend, what, str(n)],
            check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        assert found, "no totals in the callgrind output"
        return int(found.group(1))


def count(backend: str, n: int) -> dict[str, float]:
    per_call = {}
    for what in ("enqueue", "plain"):
        few, many = _instructions(backend, what, n // 10), _instructions(backend, what, n)
        per_call[what] = (many - few) / (n - n // 10)
    return per_call


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--loop", type=int, default=200, help="calls per timed loop")
    parser.add_argument("--repeats", type=int, default=100, help="timed loops per part")
    parser.add_argument("--samples", type=int, default=500, help="durable calls of each")
    parser.add_argument("--n", type=int, default=1000, help="calls counted (--count)")
    parser.add_argument("--count", action="store_true", help="instructions, under callgrind")
    parser.add_argument("--run", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        _calls(args.run[0], args.run[1], int(args.run[2]))
        return 0
    for backend in args.backends.split(","):
        if backend == "postgresql" and postgres_available(PG_URL):
            print(f"postgresql: not reachable at {PG_URL}, skipped")
            continue
        print(f"{backend}: µs per call (CPU parts: the least of {args.repeats} loops;"
              f" durable ones: p50 of {args.samples}, taken in turn)")  # fmt: skip
        for name, micros in parts(backend, args.loop, args.repeats, args.samples):
            print(f"  {name:32} {micros:8.2f}")
        if args.count:
            per_call = count(backend, args.n)
            ratio = per_call["enqueue"] / per_call["plain"]
            print(f"  instructions per call: enqueue {per_call['enqueue']:,.0f},"
                  f" plain commit {per_call['plain']:,.0f} ({ratio:.2f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
