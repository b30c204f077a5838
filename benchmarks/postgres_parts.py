"""What the worker's batch costs on PostgreSQL, part by part of conveyor's schema.

The ``claim(ack=…)`` loop (one transaction per batch: the previous batch completed and
the next claimed, as the worker does) drains ``--jobs`` jobs from a new database, once
with the schema as migrated and once on scratch copies with one part taken away: the
count trigger that runs once per UPDATE statement over its transition tables (every
row the statement changed, as it was and as it is), and the two indexes that hold
``status`` in their key (each claim and each ending writes an entry in each; the
partial indexes on one state are left). Counts are wrong without the trigger: scratch
databases only. Variants are interleaved, run after run, so a change in the machine's
load hits them alike; the schema as migrated is checked for its counts after its drain.

    python benchmarks/postgres_parts.py [--url postgresql://root@127.0.0.1:5432/test]
                                        [--jobs 20000] [--runs 3]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.harness import parts_arguments, pg_database, print_parts
from conveyor.cli.bench import drain_acked, enqueue_bulk

URL = "postgresql://root@127.0.0.1:5432/test"
QUEUE = "bench"
VARIANTS: dict[str, tuple[str, ...]] = {
    "as migrated": (),
    "without the count trigger on updates": (
        "DROP TRIGGER conveyor_count_changed ON {schema}.conveyor_jobs",
    ),
    "without the two indexes keyed on status": (
        "DROP INDEX {schema}.conveyor_jobs_status",
        "DROP INDEX {schema}.conveyor_jobs_workflow_status",
    ),
}


def _drain(url: str, jobs: int, change: tuple[str, ...]) -> float:
    """jobs/s of the claim(ack=) loop on a new database with ``change`` made to it."""
    import psycopg

    with pg_database(url) as fresh:
        with conveyor.connect(fresh) as q:
            enqueue_bulk(q, jobs, queue=QUEUE)
        with psycopg.connect(fresh, autocommit=True) as conn:
            row = conn.execute(
                "SELECT table_schema FROM information_schema.tables"
                " WHERE table_name = 'conveyor_jobs'"
            ).fetchone()
            assert row is not None
            for statement in change:
                conn.execute(statement.format(schema=f'"{row[0]}"'))  # type: ignore[arg-type]
            conn.execute("VACUUM ANALYZE")
        with conveyor.connect(fresh) as q:
            took = drain_acked(q, jobs, queue=QUEUE)
            if not change:  # the counts are the trigger's: checked where it is
                counted = q.task_stats(QUEUE)
                if [(s.completed, s.total) for s in counted.values()] != [(jobs, jobs)]:
                    raise SystemExit(f"counts wrong after the drain: {counted}")
    return jobs / took


def main() -> None:
    args = parts_arguments(__doc__.split("\n\n")[0], URL)
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(args.runs):
        for name, change in VARIANTS.items():
            rates[name].append(_drain(args.url, args.jobs, change))
    print_parts("PostgreSQL", args.jobs, args.runs, rates)


if __name__ == "__main__":
    main()
