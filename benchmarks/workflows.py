"""How long a workflow run takes to enqueue (every step in one transaction), and to
read back, on each database.

    python benchmarks/workflows.py                       # 10,000 steps, both databases
    python benchmarks/workflows.py --steps 1000 --runs 5 --backends sqlite

Two shapes of ``--steps`` steps: a fan-out/fan-in (one step, then steps - 2 in parallel
after it, then one after them all: as many edges as steps, twice over) and a chain
(each step after the one before); and, for scale, as many plain jobs through
``enqueue_ids`` (no dependencies) under the same conditions. Each run enqueues into a
fresh database; printed: the median and the best time ``enqueue_workflow`` took, steps
per second (of the median), each run's time, and the time ``workflow(id)`` takes to
read the run back with all its steps. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.harness import PG_URL, postgres_available


def fan_in_groups(steps: int) -> conveyor.Workflow:
    """One extract step, pages after it, and one finalize step per 1,000 pages."""
    wf = conveyor.Workflow("fan-out-fan-in")
    first = wf.add("bench.extract", book=1)
    pages = []
    room = steps - 1
    while room > 0:
        batch = min(room - 1, 1000) if room > 1 else 0
        chunk = [wf.add("bench.page", page=len(pages) + n, after=[first]) for n in range(batch)]
        pages.extend(chunk)
        wf.add("bench.finalize", after=chunk or [first])
        room -= batch + 1
    return wf


def chain(steps: int) -> conveyor.Workflow:
    wf = conveyor.Workflow("chain")
    last = wf.add("bench.step", n=0)
    for n in range(1, steps):
        last = wf.add("bench.step", n=n, after=[last])
    return wf


SHAPES: dict[str, Callable[[int], conveyor.Workflow]] = {"fan": fan_in_groups, "chain": chain}
BASELINE = "jobs"  # as many plain jobs through enqueue_ids, for scale


def _url(backend: str, folder: Path) -> tuple[str, str | None]:
    if backend == "sqlite":
        return f"sqlite:///{folder / 'workflows.db'}", None
    schema = f"bench_wf_{uuid.uuid4().hex[:8]}"
    return f"{PG_URL}?schema={schema}", schema


def measure(backend: str, shape: str, steps: int) -> tuple[float, float]:
    """Seconds to enqueue one run of ``steps`` steps, and to read it back."""
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder:
        url, schema = _url(backend, Path(folder))
        q = conveyor.connect(url)
        try:
            if shape == BASELINE:
                items = [{"task": "bench.page", "payload": {"page": n}} for n in range(steps)]
                start = time.perf_counter()
                q.enqueue_ids(items)
                return time.perf_counter() - start, 0.0
            wf = SHAPES[shape](steps)
            assert len(wf) == steps, (len(wf), steps)
            start = time.perf_counter()
            run = q.enqueue_workflow(wf)
            enqueued = time.perf_counter() - start
            start = time.perf_counter()
            read = q.workflow(run.id)
            reading = time.perf_counter() - start
            if read.total != steps or q.stats().pending != steps:
                raise SystemExit(f"{backend} {shape}: expected {steps} pending steps")
            return enqueued, reading
        finally:
            if schema:
                q.drop_schema()
            q.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    shapes = [*SHAPES, BASELINE]
    parser.add_argument("--shapes", nargs="+", default=shapes, choices=shapes)
    args = parser.parse_args(argv)
    for backend in args.backends:
        problem = postgres_available() if backend == "postgresql" else None
        if problem:
            print(f"{backend:10} skipped: {problem}")
            continue
        for shape in args.shapes:
            figures = [measure(backend, shape, args.steps) for _ in range(args.runs)]
            enq = statistics.median(f[0] for f in figures)
            read = statistics.median(f[1] for f in figures)
            each = ", ".join(f"{f[0]:.3f}" for f in figures)
            best = min(f[0] for f in figures) * 1000
            tail = "" if shape == BASELINE else f", read back {read * 1000:7.1f} ms"
            print(
                f"{backend:10} {shape:6} {args.steps:>6} steps: enqueue {enq * 1000:8.1f} ms"
                f" (best {best:.0f} ms; {args.steps / enq:,.0f} steps/s;"
                f" runs {each} s){tail}"
            )


if __name__ == "__main__":
    main()
