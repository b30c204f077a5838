"""CPU an idle worker spends: a ``conveyor worker`` process waits on an empty queue and
this process reads its user and system time from ``/proc/<pid>/stat`` (Linux) across
a quiet spell.

    python -m tests.worker.idle --backend sqlite --seconds 30
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import conveyor
from tests.worker.procs import WorkerProcess, wait_for


def cpu_seconds(pid: int) -> float:
    """User plus system time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, tmp: Path, *, seconds: float) -> float:
    """Percent of one core the idle worker used over ``seconds``."""
    q = conveyor.connect(url)
    worker = WorkerProcess("tests.worker.apps:latency", url, tmp, tmp / "effects.txt",
                           "--concurrency", "10", tag="idle").start()  # fmt: skip
    try:
        warm = q.enqueue("latency.ping")
        if not wait_for(lambda: (q.get(warm.id) or warm).is_final, 30):
            raise RuntimeError(f"worker did not start: {worker.log()}")
        time.sleep(5.0)  # past the start-up work and the poll back-off
        before, start = cpu_seconds(worker.pid), time.monotonic()
        time.sleep(seconds)
        used, spent = cpu_seconds(worker.pid) - before, time.monotonic() - start
        return 100.0 * used / spent
    finally:
        worker.kill()
        q.close()


def main() -> None:
    from tests.conftest import drop_schema, fresh_url

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "mysql"], default="sqlite")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url, schema = fresh_url(args.backend, Path(tmp))
        try:
            pct = measure(url, Path(tmp), seconds=args.seconds)
            print(f"{args.backend}: idle worker used {pct:.2f}% of a core over {args.seconds:g}s")
        finally:
            if schema:
                drop_schema(schema)


if __name__ == "__main__":
    main()
