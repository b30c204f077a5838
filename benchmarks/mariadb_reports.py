"""A worker's completion on MariaDB, statement by statement, in each of its two forms.

Completing a claimed batch is two statements there (MySQL has no ``UPDATE …
RETURNING``): ``claimed_items_lock`` locks the jobs the report's claims still hold, then
``complete_update`` completes them. Each has two forms, chosen by the report:

- the lock reads (id, claim) pairs out of ``JSON_TABLE``, or, when every item names one
  claim (a worker's batch, usually), a list of ids and that one claim;
- the update joins the items (``JSON_TABLE``) for their results, or, when no item has a
  result, is a plain UPDATE of the locked ids.

Batches of ``--batch`` jobs are claimed from a table of ``--jobs`` pending ones and
completed, the two forms taking turns batch by batch (a burst of load from elsewhere
hits both alike); each statement is timed on its own connection, in its transaction,
as the driver's own statement text (``Statements.text``) with the driver's parameters.
Printed: the median time per job of each form. (The counts are left alone: a scratch
database.)

    python benchmarks/mariadb_reports.py [--url mysql://root@127.0.0.1:3306/test]
                                         [--jobs 60000] [--batch 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.floor_queue import mariadb_connect
from benchmarks.harness import mariadb_database
from conveyor.cli.bench import enqueue_bulk

URL = "mysql://root@127.0.0.1:3306/test"
QUEUE = "bench"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=URL)
    parser.add_argument("--jobs", type=int, default=60_000)
    parser.add_argument("--batch", type=int, default=300)
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {
        "lock, pairs out of JSON_TABLE": [],
        "lock, ids and one claim": [],
        "update, joined to the items": [],
        "update, the locked ids alone": [],
    }
    with mariadb_database(args.url) as url, conveyor.connect(url) as q:
        enqueue_bulk(q, args.jobs, queue=QUEUE)
        queries = q.driver._queries  # type: ignore[attr-defined]
        conn = mariadb_connect(url)
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            for turn in range(args.jobs // args.batch):
                claimed = q.claim(QUEUE, limit=args.batch)
                if not claimed.jobs:
                    break
                ids = tuple(job.id for job in claimed.jobs)
                items = json.dumps([{"id": i, "claim_id": claimed.id, "result": None} for i in ids])
                one = turn % 2 == 1
                params: dict[str, Any] = {
                    "items": items,
                    "one_claim": claimed.id if one else None,
                    "item_ids": ids if one else None,
                    "results": None if one else True,
                }
                with conn.cursor() as cur:
                    cur.execute("BEGIN")
                    lock = queries.text("claimed_items_lock", params)
                    started = time.perf_counter()
                    cur.execute(lock, params)
                    took = time.perf_counter() - started
                    locked = tuple(row[0] for row in cur.fetchall())
                    if locked != tuple(sorted(ids)):
                        raise SystemExit("the lock did not find the batch")
                    update = queries.text("complete_update", params)
                    started = time.perf_counter()
                    cur.execute(update, {**params, "locked": locked})
                    took_update = time.perf_counter() - started
                    if cur.rowcount != len(ids):
                        raise SystemExit("the update did not complete the batch")
                    cur.execute("COMMIT")
                names = list(times)
                times[names[1] if one else names[0]].append(took / len(ids) * 1e6)
                times[names[3] if one else names[2]].append(took_update / len(ids) * 1e6)
            with conn.cursor() as cur:  # the counts table is not the statements' to keep
                cur.execute("SELECT count(*) FROM conveyor_jobs WHERE status <> 'completed'")
                (left,) = cur.fetchone()
            if left:
                raise SystemExit(f"{left} jobs not completed")
        finally:
            conn.close()
    print(f"MariaDB, completing a claimed batch of {args.batch}: µs per job, median (min)")
    for name, values in times.items():
        print(f"  {name:32} {statistics.median(values):7.1f}  ({min(values):.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
