"""Searching jobs by a payload field on a large table: what one page of the bounded walk
costs, and what walking the whole table costs.

Fills a fresh database as ``benchmarks/dashboard.py`` does (``--rows`` jobs, default
1,000,000, each with the payload ``{"i": n}``, statuses and creation times of a month of
work), then times ``GET /api/jobs/search`` through the HTTP app in process, ``--rounds``
times each:

- a value among the newest jobs (found at once);
- a value that no job has (the page walks its whole ``scan``: the worst page);
- the same with a queue and a status (the walk follows the filters' index);
- a larger ``scan`` (100,000, the most a page may walk).

and once, the whole walk, page after page, to a job at the start of the table.

    python benchmarks/payload_search.py                     # both databases, 1M rows
    python benchmarks/payload_search.py --backends sqlite --rows 200000 --rounds 20
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi.testclient import TestClient

import conveyor
from benchmarks.dashboard import PG_URL, database, fill, pct, shape, timed
from conveyor.web import create_app


def search(client: TestClient, **params: Any) -> dict[str, Any]:
    answer = client.get(f"/api/jobs/search?{urlencode(params)}")
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def measure(q: conveyor.Queue, backend: str, rows: int, rounds: int) -> None:
    print(f"\n{backend}: filling {rows:,} jobs …", flush=True)
    took = fill(q, rows)
    took += shape(q, rows)
    print(f"filled in {took:.0f} s")
    cases = {
        "newest job's value (found at once)": {"field": "i", "value": str(rows - 5)},
        "no job has it: one page walks 10,000 jobs": {"field": "i", "value": "none"},
        "no job has it, queue=mail&status=completed": {
            "field": "i", "value": "none", "queue": "mail", "status": "completed",
        },
        "no job has it: one page walks 100,000 jobs": {
            "field": "i", "value": "none", "scan": 100_000,
        },
    }  # fmt: skip
    with TestClient(create_app(q, tokens={}), base_url="http://localhost") as client:
        print(f"{'request':<48} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for name, params in cases.items():
            samples = timed(lambda p=params: search(client, **p), rounds)
            print(f"{name:<48} {pct(samples, 50):8.1f} {pct(samples, 95):8.1f} "
                  f"{max(samples):8.1f}")  # fmt: skip
        # The whole walk, page after page, to the oldest job.
        started = time.perf_counter()
        pages, before, found = 0, None, []
        while True:
            params: dict[str, Any] = {"field": "i", "value": "1", "scan": 100_000}
            if before is not None:
                params["before"] = before
            data = search(client, **params)
            pages += 1
            found += [j["id"] for j in data["jobs"]]
            before = data["next_before"]
            if before is None:
                break
        walked = time.perf_counter() - started
        print(f"whole table walked in {pages} page(s) of 100,000: {walked:.2f} s "
              f"({rows / walked:,.0f} jobs/s), found {found}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--pg", default=PG_URL)
    parser.add_argument("--workdir", default=None, help="where the SQLite file goes")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for backend in args.backends.split(","):
            with database(backend, args.pg, Path(tmp)) as q:
                measure(q, backend, args.rows, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
