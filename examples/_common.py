"""What every example's command line shares: the database option and a JSON summary."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any


def parser(name: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m examples.{name}", description=description)
    p.add_argument(
        "--db", default=f"sqlite:///{name}.db", help=f"database URL (default sqlite:///{name}.db)"
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    return p


def report(summary: dict[str, Any], as_json: bool) -> None:
    summary = {
        k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
        for k, v in summary.items()
    }
    if as_json:
        print(json.dumps(summary, default=str))
        return
    for key, value in summary.items():
        print(f"{key:>24}: {value}")


def work_until_idle(app: Any, queue: str, *, concurrency: int = 4, limit: float = 60.0) -> None:
    """Run burst workers until the queue holds no pending job, scheduled retries included
    (a burst worker stops as soon as nothing is claimable *now*)."""
    import time

    deadline = time.monotonic() + limit
    while True:
        app.run_worker(burst=True, concurrency=concurrency, lease=10, install_signals=False)
        stats = app.queue.stats(queue)
        if not stats.pending and not stats.running:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"queue {queue} still busy after {limit:g}s: {stats}")
        time.sleep(0.05)
