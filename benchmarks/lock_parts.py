"""What SQLite's write lock is held for, part by part of conveyor's schema.

The worker's write transaction, run alone in one process: ``BEGIN IMMEDIATE``, the
previous batch's endings (``complete_job_ids``), the claim of the next batch
(``claim_jobs``), ``COMMIT`` (synchronous=FULL), timed from the BEGIN to the COMMIT
returning, until the backlog is drained. It runs on conveyor's table as a migrated
database has it, and on scratch copies with parts taken away (the count trigger, the two
status indexes, every index no claim or ending reads), so the difference is what each
part costs the lock per job. Scratch copies only: conveyor needs all of them. Variants
are interleaved, run after run, so a change in the machine's load hits them alike.

    python benchmarks/lock_parts.py [--jobs 30000] [--batch 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import conveyor
from conveyor.cli.bench import enqueue_bulk

_STATUS = ("conveyor_jobs_status", "conveyor_jobs_status_id")
_UNREAD = (*_STATUS, "conveyor_jobs_task", "conveyor_jobs_queue_id", "conveyor_jobs_finished")
VARIANTS: dict[str, tuple[bool, tuple[str, ...]]] = {
    # name: (drop the count trigger, indexes dropped)
    "as migrated": (False, ()),
    "without the count trigger": (True, ()),
    "without the two status indexes": (False, _STATUS),
    "without the trigger and the indexes no claim reads": (True, _UNREAD),
}


def _held_per_job(path: Path, jobs: int, batch: int, drop_trigger: bool,
                  drop: tuple[str, ...]) -> float:  # fmt: skip
    """µs of write lock per job to drain ``jobs`` in batches of ``batch``."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with conveyor.connect(f"sqlite:///{path}") as q:
        enqueue_bulk(q, jobs, queue="bench")
        statements = q.driver._queries  # type: ignore[attr-defined]
        claim_sql = statements.text("claim_jobs", {})
        done_sql = statements.text("complete_job_ids", {})
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    if drop_trigger:
        conn.execute("DROP TRIGGER conveyor_count_changed")
    for index in drop:
        conn.execute(f"DROP INDEX {index}")
    held = 0
    previous: list[tuple[int, str]] = []
    while True:
        started = time.perf_counter_ns()
        conn.execute("BEGIN IMMEDIATE")
        if previous:
            items = [{"id": i, "claim_id": c, "result": None} for i, c in previous]
            conn.execute(done_sql, {"items": json.dumps(items)}).fetchall()
        claim_id = uuid.uuid4().hex
        params = {"queue": "bench", "limit": batch, "claim_id": claim_id, "worker": "w",
                  "lease_s": 60}  # fmt: skip
        rows = conn.execute(claim_sql, params).fetchall()
        conn.execute("COMMIT")
        held += time.perf_counter_ns() - started
        if not rows:
            break
        previous = [(row[0], claim_id) for row in rows]
    conn.close()
    return held / jobs / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "parts.db"
        for _ in range(args.runs):
            for name, (trigger, drop) in VARIANTS.items():
                figures[name].append(_held_per_job(path, args.jobs, args.batch, trigger, drop))
    print(f"write lock held per job, µs: {args.jobs} jobs in batches of {args.batch}, "
          f"SQLite {sqlite3.sqlite_version}, synchronous=FULL; median of {args.runs} "
          "interleaved runs (min-max)")  # fmt: skip
    base = statistics.median(figures["as migrated"])
    for name, values in figures.items():
        median = statistics.median(values)
        print(f"  {name:52s} {median:6.1f}  ({min(values):.1f}-{max(values):.1f})"
              f"  {median - base:+6.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
