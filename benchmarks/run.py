"""Run the benchmark suite: conveyor, its peers and the plain-SQL floor, side by side.

    python benchmarks/run.py            # the full run (about 15 minutes)
    python benchmarks/run.py --quick    # small sizes, one run (a minute or two)

Figures go to benchmarks/results/ (JSON and Markdown) and the charts to docs/img/.
Every drain verifies that each job ran and completed exactly once.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import backlog, drains, isolated, paired, report
from benchmarks.floor import MariaDBFloor, PostgresFloor, SQLiteFloor
from benchmarks.harness import (
    PG_URL,
    Figure,
    Scale,
    machine,
    pg_durability,
    postgres_available,
    summarise,
)
from benchmarks.systems.conveyor_api import ConveyorAcked, ConveyorAPI, ConveyorIds

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("sqlite", "postgresql", "mariadb")


def find_peers(backend: str, workdir: Path, pg_url: str) -> tuple[list[Any], dict[str, str]]:
    """The peers that import here, and why the others could not run."""
    found: list[Any] = []
    missing: dict[str, str] = {}
    if backend == "sqlite":
        candidates = [("huey", "huey_peer", "HueyPeer"),
                      ("persistqueue", "persistqueue_peer", "PersistQueuePeer"),
                      ("litequeue", "litequeue_peer", "LiteQueuePeer")]  # fmt: skip
    elif backend == "postgresql":
        candidates = [("procrastinate", "procrastinate_peer", "ProcrastinatePeer"),
                      ("pgqueuer", "pgqueuer_peer", "PgQueuerPeer")]  # fmt: skip
    else:  # none of the peers serves MySQL or MariaDB
        candidates = []
    for package, module, cls in candidates:
        try:
            __import__(package)
            peer_cls = getattr(importlib.import_module(f"benchmarks.systems.{module}"), cls)
        except ImportError as exc:
            missing[package] = f"not installed ({exc}); pip install 'conveyor[bench]'"
            continue
        found.append(peer_cls(workdir) if backend == "sqlite" else peer_cls(pg_url))
    return found, missing


class Runner:
    def __init__(self, scale: Scale, workdir: Path, pg_url: str, *, with_peers: bool,
                 only: set[str] | None, log: Callable[[str], None] = print,
                 mariadb_url: str = drains.MARIADB_URL) -> None:  # fmt: skip
        self.scale = scale
        self.workdir = workdir
        self.pg_url = pg_url
        self.mariadb_url = mariadb_url
        self.with_peers = with_peers
        self.only = only
        self.log = log
        self.figures: list[Figure] = []
        self.problems: dict[str, str] = {}

    def wanted(self, workload: str) -> bool:
        return self.only is None or workload in self.only

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)
        self.log(f"  {figure.backend:10} {figure.system:28} {figure.workload:42} "
                 f"{figure.value:12,.3f} {figure.metric}")  # fmt: skip

    def attempt(self, what: str, fn: Callable[[], Iterable[Figure]]) -> None:
        """Run one measurement; a peer that breaks is reported, not fatal."""
        try:
            for figure in fn():
                self.add(figure)
        except Exception as exc:
            self.problems[what] = f"{type(exc).__name__}: {exc}"
            self.log(f"  ! {what}: {exc}")
            if "Verification" in type(exc).__name__:
                raise
            traceback.print_exc(file=sys.stderr)

    def server(self, backend: str) -> str:
        """The server a backend's measurements make their databases on."""
        return self.mariadb_url if backend == "mariadb" else self.pg_url

    def systems(self, backend: str, *, peers: bool = True) -> list[Any]:
        if backend == "sqlite":
            floors: list[Any] = [SQLiteFloor(self.workdir), SQLiteFloor(self.workdir, "conveyor")]
        elif backend == "mariadb":
            floors = [MariaDBFloor(self.mariadb_url), MariaDBFloor(self.mariadb_url, "conveyor")]
        else:
            floors = [PostgresFloor(self.pg_url), PostgresFloor(self.pg_url, "conveyor")]
        out = [*floors, ConveyorAPI(backend, self.workdir, self.server(backend))]
        if self.with_peers and peers:
            found, missing = find_peers(backend, self.workdir, self.pg_url)
            out += found
            self.problems.update({f"{backend} {k}": v for k, v in missing.items()})
        return out

    def run_round(self, backend: str, run: int) -> None:
        s = self.scale
        self.log(f"[{backend}] run {run + 1} of {s.runs}")
        self.run_apis(backend, run)
        if self.wanted("drain"):
            # Every system's own workers, the same number of processes for each.
            for system in drains.systems(backend, with_peers=self.with_peers):
                self.attempt(
                    f"{backend} {system.name} drain ({s.processes} processes)",
                    partial(drains.figures, system, self.workdir, self.pg_url, s.drain,
                            s.peer_drain, s.processes, self.mariadb_url),
                )  # fmt: skip
            if backend == "sqlite":
                self.attempt("sqlite write lock held",
                             partial(drains.lock_figures, self.workdir, s.drain))  # fmt: skip
        if self.wanted("workers") and backend != "mariadb":
            from benchmarks import workers

            self.attempt(
                f"{backend} workers",
                partial(workers.figures, backend, self.workdir, self.pg_url, s),
            )

    def run_apis(self, backend: str, run: int) -> None:
        """Enqueue one and bulk, each system in a fresh process; conveyor's API loops."""
        s = self.scale
        systems = self.systems(backend)
        if self.wanted("bulk"):
            systems.append(ConveyorIds(backend, self.workdir, self.server(backend)))
        # Rotate the order run by run, so no system always follows the same neighbour.
        shift = run % len(systems)
        systems = systems[shift:] + systems[:shift]
        if self.wanted("enqueue_one"):
            singles = [x for x in systems if not isinstance(x, ConveyorIds)]
            self.attempt(f"{backend} enqueue_one", partial(
                isolated.enqueue_one, singles, s.enqueue_one, s.warmup, s.blocks,
                self.problems))  # fmt: skip
        for system in systems:
            tag = f"{backend} {system.name}"
            if self.wanted("bulk"):
                self.attempt(f"{tag} bulk", partial(
                    isolated.in_fresh_process, isolated.bulk, system, s.bulk))  # fmt: skip
        if self.wanted("drain"):
            # One-process API loops: conveyor's claim loops and the two-transaction floor.
            loops = [*self.systems(backend, peers=False),
                     ConveyorAcked(backend, self.workdir, self.server(backend))]  # fmt: skip
            for system in loops:
                self.attempt(f"{backend} {system.name} drain", partial(
                    isolated.in_fresh_process, isolated.drain, system, s.drain))  # fmt: skip
        if self.wanted("enqueue_one"):
            self.attempt(
                f"{backend} paired enqueue",
                partial(isolated.in_fresh_process, paired.figures, backend, self.workdir,
                        self.server(backend), s.enqueue_one, s.warmup),
            )  # fmt: skip

    def run_backlog(self, backend: str) -> None:
        s = self.scale
        # The previous phase may have left gigabytes of dirty pages to write back: let the
        # disk settle so its flush does not land on this phase's fsyncs.
        os.sync()
        time.sleep(2.0)
        self.log(f"[{backend}] backlogs {s.backlogs}, then {s.retained:,} completed retained")
        api = ConveyorAPI(backend, self.workdir, self.server(backend))

        def measure() -> Iterable[Figure]:
            with api.queue() as q:
                yield from backlog.backlogs(q, backend, s.backlogs, s.latency_rounds)
                # On MySQL the counts are written by conveyor's statements, not by
                # triggers: the fixture's one UPDATE of every pending job would leave
                # them wrong there.
                if backend != "mariadb":
                    yield from backlog.retained(q, backend, 10_000 if s.runs > 1 else 1_000,
                                                s.latency_rounds)  # fmt: skip

        self.attempt(f"{backend} backlog", measure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one run")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (the test suite's)")
    parser.add_argument("--runs", type=int, help="runs per workload (median reported)")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--only", help="comma-separated: enqueue_one,bulk,drain,workers,backlog")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument(
        "--processes", type=int, help="worker processes of every system in the drains (default 4)"
    )
    parser.add_argument("--mariadb", default=drains.MARIADB_URL, help="MariaDB server URL (the "
                        "floor queue's drains; a database of its own per measurement)")  # fmt: skip
    parser.add_argument("--pg", default=PG_URL, help="PostgreSQL server URL (a database of "
                        "its own is created per measurement and dropped)")  # fmt: skip
    parser.add_argument("--workdir", default=None, help="where the SQLite files go")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--charts", default=str(ROOT / "docs" / "img"))
    parser.add_argument("--no-charts", action="store_true")
    args = parser.parse_args(argv)

    scale = Scale.smoke() if args.smoke else Scale.quick() if args.quick else Scale()
    if args.runs:
        scale.runs = args.runs
    if args.processes:
        scale.processes = args.processes
    only = set(args.only.split(",")) if args.only else None
    backends = [b for b in args.backends.split(",") if b]
    problem = postgres_available(args.pg) if "postgresql" in backends else None
    if problem:
        print(f"skipping PostgreSQL: {problem}", file=sys.stderr)
        backends.remove("postgresql")
    problem = drains.mariadb_available(args.mariadb) if "mariadb" in backends else None
    if problem:
        print(f"skipping MariaDB: {problem}", file=sys.stderr)
        backends.remove("mariadb")

    import tempfile

    started = time.time()
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-", dir=args.workdir) as tmp:
        runner = Runner(scale, Path(tmp), args.pg, with_peers=not args.no_peers, only=only,
                        mariadb_url=args.mariadb)  # fmt: skip
        # Runs interleave the backends, so a burst of load from elsewhere on the machine
        # lands on one run of each rather than on every run of one.
        for run in range(scale.runs):
            for backend in backends:
                runner.run_round(backend, run)
        if runner.wanted("backlog"):
            for backend in backends:
                runner.run_backlog(backend)
    elapsed = time.time() - started

    summaries = summarise(runner.figures)
    meta = {
        "machine": machine(),
        "postgres": pg_durability(args.pg) if "postgresql" in backends else None,
        "mariadb": drains.mariadb_durability(args.mariadb) if "mariadb" in backends else None,
        "scale": {k: v for k, v in vars(scale).items() if k != "extra"},
        "elapsed_s": round(elapsed, 1),
        "problems": runner.problems,
        "command": " ".join(
            ["python benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]
        ),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "smoke" if args.smoke else "quick" if args.quick else "latest"
    payload = {"meta": meta, "summaries": [s.to_dict() for s in summaries]}
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    text = report.markdown(summaries, meta)
    (out / f"{name}.md").write_text(text)
    print(text)
    if not args.no_charts:
        try:
            from benchmarks import charts

            for path in charts.draw(
                summaries, Path(args.charts), suffix="" if name == "latest" else f"-{name}"
            ):
                print(f"chart: {path}")
        except ImportError as exc:
            print(f"no charts: {exc} (pip install 'conveyor[bench]')", file=sys.stderr)
    failed = [k for k, v in runner.problems.items() if "not installed" not in v]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
