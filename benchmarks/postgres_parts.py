"""What the worker's batch costs on PostgreSQL, part by part of conveyor's schema.

The ``claim(ack=…)`` loop (one transaction per batch: the previous batch completed and
the next claimed, as the worker does) drains ``--jobs`` jobs from a new database, once
with the schema as migrated and once on scratch copies with one part taken away: the
count trigger that runs once per UPDATE statement over its transition tables (every
row the statement changed, as it was and as it is), and the two indexes that hold
``status`` in their key (each claim and each ending writes an entry in each; the
partial indexes on one state are left), and the task and creation-time indexes (keyed on
columns that never change, written all the same by every update that is not HOT). Counts
are wrong without the trigger: scratch databases only. Variants are interleaved, run
after run, so a change in the machine's load hits them alike; the schema as migrated is
checked for its counts after its drain.

Beside each rate, the CPU each job cost (median over the runs): PostgreSQL's, read from
``/proc`` for the server processes of the drain's database and the server's background
processes (so only with the server on this machine, and best on a quiet one), and this
process's own (the loop and its connection pool). CPU time moves less with the
machine's load than a rate does, and it says which side of the connection a part costs.

    python benchmarks/postgres_parts.py [--url postgresql://root@127.0.0.1:5432/test]
                                        [--jobs 20000] [--runs 3]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.harness import cpu_ticks, parts_arguments, pg_database, print_parts
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
    # Keyed on columns no claim or ending changes, yet written by both: an UPDATE that
    # changes any indexed column (status) is not HOT, so it writes every index.
    "without the task and creation-time indexes": (
        "DROP INDEX {schema}.conveyor_jobs_task",
        "DROP INDEX {schema}.conveyor_jobs_created",
    ),
}


def _server_ticks(conn: Any) -> dict[int, int | None]:
    """Each server process of ``conn``'s database (but ``conn``'s own) and each
    background process, with its CPU ticks so far."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
        " AND (datname = current_database() OR backend_type <> 'client backend')"
    ).fetchall()
    return {pid: cpu_ticks(pid) for (pid,) in rows}


def _server_cpu(before: dict[int, int | None], after: dict[int, int | None]) -> float | None:
    """Seconds of CPU the server spent between two readings (a process that started in
    between counts whole); None where a process cannot be read (a remote server)."""
    if not after or any(t is None for t in after.values()):
        return None
    spent = sum(t - (before.get(pid) or 0) for pid, t in after.items() if t is not None)
    return spent / os.sysconf("SC_CLK_TCK")


def _drain(url: str, jobs: int, change: tuple[str, ...]) -> tuple[float, Cpu]:
    """jobs/s of the claim(ack=) loop on a new database with ``change`` made to it, and
    the CPU per job (µs) of the server and of this process."""
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
        with conveyor.connect(fresh) as q, psycopg.connect(fresh, autocommit=True) as probe:
            q.stats(QUEUE)  # the pool's first connection opened before the clocks start
            before, mine = _server_ticks(probe), time.process_time()
            took = drain_acked(q, jobs, queue=QUEUE)
            mine, server = time.process_time() - mine, _server_cpu(before, _server_ticks(probe))
            if not change:  # the counts are the trigger's: checked where it is
                counted = q.task_stats(QUEUE)
                if [(s.completed, s.total) for s in counted.values()] != [(jobs, jobs)]:
                    raise SystemExit(f"counts wrong after the drain: {counted}")
    return jobs / took, Cpu(None if server is None else server / jobs * 1e6, mine / jobs * 1e6)


@dataclass(frozen=True)
class Cpu:
    server: float | None  # µs per job
    client: float


def _cpu_lines(cpu: dict[str, list[Cpu]]) -> list[str]:
    def med(values: list[float | None]) -> str:
        known = [v for v in values if v is not None]
        return f"{statistics.median(known):6.1f}" if known else "     -"

    lines = ["CPU per job, µs (median): PostgreSQL's processes / this process"]
    for name, runs in cpu.items():
        lines.append(f"  {name:44s} {med([c.server for c in runs])} / "
                     f"{med([c.client for c in runs])}")  # fmt: skip
    return lines


def main() -> None:
    args = parts_arguments(__doc__.split("\n\n")[0], URL)
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[Cpu]] = {name: [] for name in VARIANTS}
    for _ in range(args.runs):
        for name, change in VARIANTS.items():
            rate, spent = _drain(args.url, args.jobs, change)
            rates[name].append(rate)
            cpu[name].append(spent)
    print_parts("PostgreSQL", args.jobs, args.runs, rates)
    print("\n".join(_cpu_lines(cpu)))


if __name__ == "__main__":
    main()
