"""How many write transactions the worker spends per 1,000 jobs, and how many of them
carry both a batch's endings and the next claim (``claim(report=…)``).

One ``App.run_worker(burst=True)`` in this process drains N no-op jobs from a fresh
SQLite file; ``Queue.claim`` and ``Queue.report`` are counted as they are called. A count
of calls does not depend on how busy the machine is, unlike a rate.

    python benchmarks/worker_transactions.py [--jobs 20000] [--concurrency 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import conveyor


def measure(jobs: int, concurrency: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        q = conveyor.connect(f"sqlite:///{Path(tmp) / 'drain.db'}", use_env=False)
        app = conveyor.App(q)

        @app.task(name="noop")
        def noop(ctx: conveyor.Context) -> None:
            return None

        q.enqueue_ids([{"task": "noop"} for _ in range(jobs)])
        calls = {"claim": 0, "claim+report": 0, "report": 0}
        claim, report = q.claim, q.report

        def counted_claim(*args: Any, **kwargs: Any) -> Any:
            calls["claim+report" if kwargs.get("report") else "claim"] += 1
            return claim(*args, **kwargs)

        def counted_report(**kwargs: Any) -> Any:
            calls["report"] += 1
            return report(**kwargs)

        q.claim, q.report = counted_claim, counted_report  # type: ignore[method-assign]
        started = time.perf_counter()
        app.run_worker(burst=True, install_signals=False, concurrency=concurrency)
        elapsed = time.perf_counter() - started
        assert q.stats().completed == jobs
        q.close()
    total = sum(calls.values())
    return {**calls, "per_1000_jobs": 1000 * total / jobs, "jobs_per_s": jobs / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for run in range(1, args.runs + 1):
        r = measure(args.jobs, args.concurrency)
        print(
            f"run {run}: {r['per_1000_jobs']:.1f} write transactions per 1,000 jobs "
            f"(claims {r['claim']}, claims with endings {r['claim+report']}, "
            f"reports alone {r['report']}); {r['jobs_per_s']:,.0f} jobs/s"
        )


if __name__ == "__main__":
    main()
