"""What a claimed job's row costs the client on MariaDB: its columns one by one, or
packed into one JSON array (what conveyor reads back on MariaDB), through each client.

    python benchmarks/mysql_rows.py [--url mysql://root@127.0.0.1:3306/test]
                                    [--rows 100] [--rounds 50] [--runs 3]

Fills a scratch database with ``--rows`` pending jobs, then reads them ``--rounds`` times
with the statement a claim's read-back runs (``jobs_locked``) in each of its two forms,
``jobs_locked_columns`` (the columns) and ``jobs_locked`` (packed on MariaDB), and turns
every row into a ``Job`` as the queue does. Prints the CPU time of this process per row
(the server's time is not in it), each variant interleaved with the other ``--runs``
times, for PyMySQL and, where installed, mysqlclient (which the queue lets read the
columns: it reads them in C).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from conveyor.cli.bench import enqueue_bulk
from conveyor.drivers.mysql.dialect import scratch_database
from conveyor.drivers.mysql.handlers import Rows, unpacked


def _read(q: Any, statement: str, ids: tuple[int, ...]) -> list[conveyor.Job]:
    """The rows of ``statement`` (run inside a session, as a handler runs it), as jobs."""
    driver = q.driver
    with driver.session() as session:
        rows = session.run_step(Rows(statement, {"locked": ids}))
    if statement == "jobs_locked":  # packed: read as the handlers read it
        rows = unpacked(rows)
    return [driver.decode_job(row) for row in rows]


def measure(url: str, rows: int, rounds: int, runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"columns": [], "packed": []}
    with conveyor.connect(url) as q:
        enqueue_bulk(q, rows, queue="rows")
        ids = tuple(job.id for job in q.jobs(queue="rows", limit=rows))
        whole = _read(q, "jobs_locked_columns", ids)
        if _read(q, "jobs_locked", ids) != whole:
            raise SystemExit("the packed rows did not read as the columns did")
        for _ in range(runs):
            for name, statement in (("columns", "jobs_locked_columns"), ("packed", "jobs_locked")):
                started = time.process_time()
                for _ in range(rounds):
                    _read(q, statement, ids)
                times[name].append((time.process_time() - started) / rounds / rows * 1e6)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    clients = ["pymysql"]
    try:
        import MySQLdb  # noqa: F401  (optional: the mysqlclient extra)

        clients.append("mysqlclient")
    except ImportError:
        print("mysqlclient is not installed: PyMySQL only")
    for client in clients:
        name = f"conveyor_rows_{uuid.uuid4().hex[:10]}"
        with scratch_database(args.url, name) as url:
            times = measure(f"{url}?client={client}", args.rows, args.rounds, args.runs)
        figures = ", ".join(
            f"{variant} {statistics.median(t):.1f} ({min(t):.1f} to {max(t):.1f})"
            for variant, t in times.items()
        )
        print(f"{client}: µs of client CPU per claimed row, median (min to max): {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
