"""Where one ``Queue.enqueue`` spends its time, on each database.

    python benchmarks/enqueue_profile.py                 # paired ratios, both databases
    python benchmarks/enqueue_profile.py --profile       # and a pyinstrument profile

Paired (as in ``paired.py``): the same database takes, turn about, a plain INSERT into
conveyor's table (the floor) and ``Queue.enqueue``, each one durable commit, for
``--rounds`` rounds; repeated ``--runs`` times, each run's p50 ratio is printed. The
profile then runs ``--rounds`` enqueues alone under pyinstrument: what is not the
database's ``execute`` / ``fetchall`` is the library's per-call cost.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import paired
from benchmarks.harness import PG_URL, postgres_available
from conveyor.cli.bench import NOOP_TASK


def ratios(backend: str, rounds: int, runs: int) -> None:
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder:
            figures = paired.figures(backend, Path(folder), PG_URL, rounds)
        p50 = {f.system: f.value for f in figures if f.metric == "p50 ms"}
        floor = p50["floor (conveyor table)"]
        print(f"{backend:10} run {run + 1}: floor {p50['floor']:.3f} ms, floor (conveyor table)"
              f" {floor:.3f} ms, conveyor {p50['conveyor']:.3f} ms:"
              f" {p50['conveyor'] / floor:.2f}x the conveyor-table floor")  # fmt: skip


def profile(backend: str, rounds: int) -> None:
    from pyinstrument import Profiler

    from benchmarks.systems.conveyor_api import ConveyorAPI

    with (
        tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder,
        ConveyorAPI(backend, Path(folder), PG_URL).queue() as q,
    ):
        q.enqueue(NOOP_TASK, {"i": -1})  # connections and statements warmed up
        profiler = Profiler(interval=0.0001)
        with profiler:
            for i in range(rounds):
                q.enqueue(NOOP_TASK, {"i": i})
    print(profiler.output_text(unicode=True, color=False, show_all=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also profile (pyinstrument)")
    args = parser.parse_args(argv)
    for backend in [b for b in args.backends.split(",") if b]:
        if backend == "postgresql" and (problem := postgres_available(PG_URL)):
            print(f"skipping PostgreSQL: {problem}", file=sys.stderr)
            continue
        ratios(backend, args.rounds, args.runs)
        if args.profile:
            profile(backend, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
