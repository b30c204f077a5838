"""What a drain reads on PostgreSQL, counted rather than timed: the index entries and
table rows each job costs the server, from its statistics views before and after.

``--processes`` worker processes (``conveyor worker --burst``, as in
``benchmarks/drains.py``) drain ``--jobs`` no-op jobs from a new database; the server's
counts for that database (``pg_stat_database``: rows returned and fetched, commits) and
for each of conveyor's indexes (``pg_stat_user_indexes``: scans, entries read, rows
fetched) are read before and after and printed per job. A count does not depend on how
busy the machine is, unlike a rate; the drain's rate is printed beside it.

    python benchmarks/postgres_reads.py [--jobs 100000] [--processes 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks import drains
from benchmarks.harness import PG_URL, pg_database

_DATABASE = (
    "SELECT xact_commit, tup_returned, tup_fetched, blks_hit FROM pg_stat_database "
    "WHERE datname = current_database()"
)
_INDEXES = "SELECT indexrelname, idx_scan, idx_tup_read, idx_tup_fetch FROM pg_stat_user_indexes"


def counts(url: str) -> dict[str, tuple[int, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        # The statistics a backend reports reach the views when it ends or after a
        # moment: wait for them, then read a fresh snapshot.
        time.sleep(1.0)
        conn.execute("SELECT pg_stat_clear_snapshot()")
        found: dict[str, tuple[int, ...]] = {}
        row = conn.execute(_DATABASE).fetchone()
        assert row is not None
        found["database"] = tuple(int(x or 0) for x in row)
        for name, *values in conn.execute(_INDEXES).fetchall():
            found[name] = tuple(int(x or 0) for x in values)
        return found


def measure(jobs: int, processes: int, pg_url: str) -> dict[str, Any]:
    with pg_database(pg_url) as url, tempfile.TemporaryDirectory() as workdir:
        system = drains._conveyor("postgresql")
        conveyor.connect(url).close()  # migrated, so the indexes are there to count
        before = counts(url)
        result = drains.drain_on(system, url, jobs, processes, Path(workdir))
        after = counts(url)
    delta = {
        name: tuple((b - a) / jobs for a, b in zip(before.get(name, (0,) * len(v)), v, strict=True))
        for name, v in after.items()
    }
    return {"rate": result["jobs/s"], "per job": delta}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--pg", default=PG_URL)
    args = parser.parse_args()
    found = measure(args.jobs, args.processes, args.pg)
    per = found["per job"]
    commits, returned, fetched, hits = per.pop("database")
    print(
        f"{args.processes} worker processes drained {args.jobs:,} jobs at "
        f"{found['rate']:,.0f} jobs/s; per job: {commits * 1000:.1f} commits per 1,000 "
        f"jobs, {returned:.1f} rows returned, {fetched:.1f} fetched, {hits:.1f} buffer hits"
    )
    print("   scans  entries read  rows fetched  (per job)  index")
    for name, (scans, read, rows) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        if scans >= 0.0005 or read >= 0.05 or rows >= 0.05:
            print(f"  {scans:6.3f}  {read:12.1f}  {rows:12.1f}             {name}")


if __name__ == "__main__":
    main()
