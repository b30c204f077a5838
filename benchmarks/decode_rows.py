"""How long a claimed row takes to become a ``Job``, on each database, in this process.

    python benchmarks/decode_rows.py                       # all three databases
    python benchmarks/decode_rows.py --backends sqlite --rows 200

Claims ``--rows`` fresh jobs, keeps the rows the driver handed to the decoder, and times
two ways of decoding them, interleaved, ``--rounds`` times each, the caches of decoded
times cleared before every pass (a claimed job's own times are new to them):

- **generated**: ``Values.decode_job``, one generated function per dialect that stores
  each column straight into ``Job``'s slots (``conveyor.drivers.values``);
- **plan loop**: the same plan read field by field into a dict, then ``Job`` built by
  keywords: how rows were decoded before.

Prints the best and the median µs per row of each. CPU only: the database's time to
answer is not in it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.profile_worker import database
from conveyor.drivers import values as values_module
from conveyor.drivers.values import Values

QUEUE = "decode"


def _time_caches() -> list[Any]:
    """The caches of decoded instants (each dialect keeps one)."""
    from conveyor.drivers.mysql import dialect as mysql
    from conveyor.drivers.postgres import dialect as postgres
    from conveyor.drivers.sqlite import driver as sqlite

    return [sqlite._epoch_to_utc, postgres._to_milliseconds, mysql._to_milliseconds,
            mysql.datetime_column]  # fmt: skip


def claimed_rows(url: str, n: int) -> tuple[Values, list[dict[str, Any]]]:
    """``n`` rows as a claim hands them to the decoder, and the driver that decodes them."""
    seen: list[tuple[Values, dict[str, Any]]] = []
    decode = Values.decode_job

    def keep(self: Values, row: Any, **kw: Any) -> conveyor.Job:
        seen.append((self, dict(row)))
        return decode(self, row, **kw)

    with conveyor.connect(url) as q:
        q.enqueue_many(
            [{"task": "bench.noop", "payload": {"i": i, "url": f"https://example.org/{i}"}}
             for i in range(n)],
            queue=QUEUE,
        )  # fmt: skip
        Values.decode_job = keep  # type: ignore[method-assign]
        try:
            claim = q.claim(QUEUE, limit=n, lease=300)
        finally:
            Values.decode_job = decode  # type: ignore[method-assign]
        q.ack(claim.id)
    return seen[0][0], [row for _, row in seen]


def plan_loop(v: Values) -> Callable[[dict[str, Any]], conveyor.Job]:
    make, empty = values_module._make_job, values_module._NO_PROGRESS
    plan = v._job_plan
    return lambda row: make(**v._read(row, plan), progress=empty, deduplicated=False)


def measure(backend: str, n: int, rounds: int) -> dict[str, list[float]]:
    with database(backend) as url:
        v, rows = claimed_rows(url, n)
    ways: dict[str, Callable[[dict[str, Any]], conveyor.Job]] = {
        "generated": lambda row: v.decode_job(row),
        "plan loop": plan_loop(v),
    }
    first = {name: [way(r) for r in rows] for name, way in ways.items()}
    if first["generated"] != first["plan loop"]:
        raise SystemExit(f"{backend}: the two ways decode the rows differently")
    caches = _time_caches()
    out: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            for cache in caches:
                cache.cache_clear()
            started = time.perf_counter()
            for row in rows:
                way(row)
            out[name].append((time.perf_counter() - started) / len(rows) * 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql,mariadb")
    parser.add_argument("--rows", type=int, default=100, help="rows of one claim")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args(argv)
    for backend in args.backends.split(","):
        figures = measure(backend, args.rows, args.rounds)
        shown = ", ".join(
            f"{name} {min(xs):.2f} µs/row (median {statistics.median(xs):.2f})"
            for name, xs in figures.items()
        )
        ratio = statistics.median(figures["plan loop"]) / statistics.median(figures["generated"])
        print(f"{backend:<10} {shown}; the plan loop takes {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
