"""Enqueue-to-start latency on an idle worker: a ``conveyor worker`` process waits on an
empty queue; this process enqueues one job at a time, at random gaps long enough for
the worker's polling to back off fully, and reads how long each job waited between its
``created_at`` and ``started_at`` (both by the database clock).

    python -m tests.worker.latency --backend postgresql --samples 30
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import conveyor
from tests.worker.procs import WorkerProcess, wait_for


def measure(
    url: str, tmp: Path, *, samples: int, gap: tuple[float, float] = (0.6, 1.2)
) -> list[float]:
    """Seconds from enqueue to start, one per sample."""
    q = conveyor.connect(url)
    worker = WorkerProcess("tests.worker.apps:latency", url, tmp, tmp / "effects.txt",
                           "--concurrency", "2", tag="latency").start()  # fmt: skip
    try:
        warm = q.enqueue("latency.ping")
        if not wait_for(lambda: (q.get(warm.id) or warm).is_final, 30):
            raise RuntimeError(f"worker did not start: {worker.log()}")
        waits = []
        for _ in range(samples):
            time.sleep(random.uniform(*gap))
            job = q.enqueue("latency.ping")
            wait_for(lambda j=job: (q.get(j.id) or j).started_at is not None, 10, every=0.01)
            done = q.get(job.id)
            assert done is not None and done.started_at is not None, worker.log()
            waits.append((done.started_at - done.created_at).total_seconds())
        return waits
    finally:
        worker.kill()
        q.close()


def describe(waits: list[float]) -> str:
    ms = sorted(w * 1000 for w in waits)
    p90 = ms[max(0, int(len(ms) * 0.9) - 1)]
    return (f"{len(ms)} samples: median {statistics.median(ms):.0f} ms, p90 {p90:.0f} ms, "
            f"max {ms[-1]:.0f} ms")  # fmt: skip


def main() -> None:
    from tests.conftest import drop_schema, fresh_url

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "mysql"], default="sqlite")
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url, schema = fresh_url(args.backend, Path(tmp))
        try:
            print(f"{args.backend}: {describe(measure(url, Path(tmp), samples=args.samples))}")
        finally:
            if schema:
                drop_schema(schema)


if __name__ == "__main__":
    main()
