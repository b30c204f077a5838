"""What conveyor's own SQLite statements cost, counted rather than timed: WAL pages written
per enqueue (what a durable commit has to sync) and SQLite virtual-machine instructions
executed per job for an enqueue, a claim and an ending (the CPU spent while holding the
write lock). Counts do not depend on how busy the machine is, unlike a rate.

The instructions are counted with ``sqlite3``'s progress handler (every 10 instructions)
on every connection the queue opens; pages from the growth of the WAL file before its
first checkpoint.

    python benchmarks/statement_costs.py [--backlog 5000] [--batch 100]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import conveyor

_STEP = 10  # the progress handler runs every this many instructions
_counted = [0]
_connect = sqlite3.connect


def _counting_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = _connect(*args, **kwargs)

    def tick() -> int:
        _counted[0] += 1
        return 0

    conn.set_progress_handler(tick, _STEP)
    return conn


def instructions() -> int:
    return _counted[0] * _STEP


def measure(backlog: int, batch: int) -> dict[str, float]:
    sqlite3.connect = _counting_connect  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "costs.db"
            q = conveyor.connect(f"sqlite:///{path}", use_env=False)
            q.enqueue("bench.noop", {"n": 0})
            wal = path.with_name(path.name + "-wal")
            size, start = wal.stat().st_size, instructions()
            for n in range(100):
                q.enqueue("bench.noop", {"n": n})
            with _connect(path) as conn:
                page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            enqueue_pages = (wal.stat().st_size - size) / 100 / (page_size + 24)
            enqueue_ops = (instructions() - start) / 100
            for at in range(0, backlog, 5000):
                q.enqueue_ids([{"task": "bench.noop"} for _ in range(min(5000, backlog - at))])
            claims = []
            start = instructions()
            while True:
                claim = q.claim("default", limit=batch, count_remaining=False)
                if not claim.jobs:
                    break
                claims.append(claim)
            jobs = sum(len(c.jobs) for c in claims)
            claim_ops = (instructions() - start) / jobs
            start = instructions()
            for claim in claims:
                q.report(completed=[(j.id, j.claim_id, None) for j in claim.jobs])
            ending_ops = (instructions() - start) / jobs
            q.close()
    finally:
        sqlite3.connect = _connect  # type: ignore[assignment]
    return {
        "enqueue_wal_pages": enqueue_pages,
        "enqueue_instructions": enqueue_ops,
        "claim_instructions_per_job": claim_ops,
        "ending_instructions_per_job": ending_ops,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=5000, help="jobs pending at the start")
    parser.add_argument("--batch", type=int, default=100, help="jobs per claim")
    args = parser.parse_args()
    r = measure(args.backlog, args.batch)
    print(
        f"enqueue one: {r['enqueue_wal_pages']:.2f} WAL pages, "
        f"{r['enqueue_instructions']:,.0f} SQLite instructions"
    )
    print(
        f"claim of {args.batch} from a backlog of {args.backlog:,}: "
        f"{r['claim_instructions_per_job']:,.0f} instructions per job; "
        f"ending (report of the batch): {r['ending_instructions_per_job']:,.0f} per job"
    )


if __name__ == "__main__":
    main()
