"""The console's reads on a million-row table: what one poll of each page costs.

Fills a fresh database with ``--rows`` jobs (default 1,000,000) over four queues and
eight tasks, created over 30 days: 90% completed, 5% failed, 2% cancelled, the rest
pending, a few hundred running (a few past their lease), keys on one queue. Then every
request a console page makes on each poll is timed through the HTTP app in process
(routing, validation and JSON included; no network), ``--rounds`` times each, and p50,
p95 and max are printed per request and per page poll. Finally one bulk retry of 1,000
failed jobs is timed.

    python benchmarks/dashboard.py                      # both databases, 1M rows
    python benchmarks/dashboard.py --backends sqlite --rows 100000 --rounds 20

PostgreSQL: ``--pg URL`` or ``$CONVEYOR_BENCH_POSTGRES_URL`` (default
``postgresql://root@127.0.0.1:5432/test``); the jobs go to a schema of their own,
dropped afterwards. The status mix and spread of creation times are written with plain
UPDATEs: a fixture, not a workload.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi.testclient import TestClient

import conveyor
from conveyor.web import create_app

PG_URL = os.environ.get("CONVEYOR_BENCH_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
# One queue per chunk of CHUNK ids, in this rotation: mail 40%, fetch 30%, books 20%, sync 10%.
ROTATION = ["mail", "fetch", "mail", "books", "fetch", "mail", "sync", "fetch", "books", "mail"]
TASKS = {
    "mail": ["mail.send_receipt", "mail.send_digest"],
    "fetch": ["fics.fetch_metadata", "fics.fetch_chapter"],
    "books": ["books.ocr", "books.extract"],
    "sync": ["catalogue.sync_batch", "catalogue.reconcile"],
}
RARE_TASK = "books.audit"  # one books job in a thousand
CHUNK = 2000
SPAN_DAYS = 30


# -- the fixture -------------------------------------------------------------------------


def fill(q: conveyor.Queue, rows: int) -> float:
    """Enqueue ``rows`` jobs; returns the seconds it took."""
    started = time.perf_counter()
    for n, start in enumerate(range(0, rows, CHUNK)):
        queue = ROTATION[n % len(ROTATION)]
        tasks = TASKS[queue]
        items = []
        for i in range(start, min(rows, start + CHUNK)):
            task = RARE_TASK if queue == "books" and i % 1000 == 0 else tasks[i % 2]
            items.append({"task": task, "payload": {"i": i}})
        q.enqueue_ids(items, queue=queue)
    return time.perf_counter() - started


def shape(q: conveyor.Queue, rows: int) -> float:
    """Statuses, errors, keys and creation times as a month of work leaves them."""
    started = time.perf_counter()
    pg = q.dialect == "postgresql"
    now = "extract(epoch from now())" if pg else "((julianday('now') - 2440587.5) * 86400.0)"
    at = (lambda e: f"to_timestamp({e})") if pg else (lambda e: e)
    span = SPAN_DAYS * 86400 / rows
    created = f"{now} - ({rows} - id) * {span}"
    statements = [
        f"UPDATE conveyor_jobs SET created_at = {at(created)}, run_at = {at(created)},"
        f" updated_at = {at(created + ' + 5')}",
        f"UPDATE conveyor_jobs SET status = 'completed', attempts = 1,"
        f" started_at = {at(created + ' + 1')}, finished_at = {at(created + ' + 5')}"
        f" WHERE id % 100 < 90",
        f"UPDATE conveyor_jobs SET status = 'failed', attempts = max_attempts,"
        f" error = 'ValueError: page ' || id || ' could not be parsed', error_kind = 'terminal',"
        f" started_at = {at(created + ' + 1')}, finished_at = {at(created + ' + 5')}"
        f" WHERE id % 100 BETWEEN 90 AND 94",
        f"UPDATE conveyor_jobs SET status = 'cancelled', finished_at = {at(created + ' + 5')}"
        f" WHERE id % 100 BETWEEN 95 AND 96",
        "UPDATE conveyor_jobs SET key = 'https://fics.example.net/s/' || id WHERE queue = 'fetch'",
    ]
    with q.driver.session() as session:
        cur = getattr(session, "_cur")  # noqa: B009 - a fixture, not a queue operation
        if pg:
            cur.execute(f'SET LOCAL search_path TO "{getattr(q.driver, "schema")}"')  # noqa: B009
        for sql in statements:
            cur.execute(sql)
    q.claim("mail", limit=300, worker="bench-worker", lease=3600)
    q.claim("sync", limit=5, worker="gone-worker", lease=1)  # their leases run out
    time.sleep(1.1)
    q.fold_counts()
    analyze(q)
    return time.perf_counter() - started


def analyze(q: conveyor.Queue) -> None:
    if q.dialect == "sqlite":
        with q.driver.session() as session:
            getattr(session, "_cur").execute("ANALYZE")  # noqa: B009
        return
    import psycopg

    backend = q.driver
    with psycopg.connect(getattr(backend, "_conninfo"), autocommit=True) as conn:  # noqa: B009
        conn.execute(f'SET search_path TO "{getattr(backend, "schema")}"')  # noqa: B009
        conn.execute("VACUUM ANALYZE")


# -- measuring ---------------------------------------------------------------------------


def timed(call: Callable[[], Any], rounds: int) -> list[float]:
    call()  # warm: plans, caches, the first connection
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def get(client: TestClient, path: str) -> Callable[[], Any]:
    def call() -> Any:
        answer = client.get(path)
        if answer.status_code != 200:
            raise SystemExit(f"GET {path}: {answer.status_code} {answer.text[:200]}")
        return answer.json()

    return call


def requests(client: TestClient, q: conveyor.Queue) -> dict[str, list[str]]:
    """The requests of one poll of each page, as the console sends them."""
    newest = q.jobs(limit=1, newest_first=True)[0].id
    middle = newest // 2
    failed = q.jobs(status="failed", queue="books", limit=1)[0].id
    key = q.jobs(queue="fetch", status="pending", limit=1)[0].key
    hour = q.jobs(limit=1, after=middle)[0].created_at
    window = urlencode({"created_after": hour.isoformat(),
                        "created_before": (hour + timedelta(hours=1)).isoformat()})  # fmt: skip
    counts = "/api/queues"
    jobs = "/api/jobs?limit=51&newest_first=true"
    detail = f"/api/jobs/{failed}"
    return {
        "overview": [counts, "/api/queues/settings", "/api/throughput?minutes=60", "/api/workers"],
        "jobs, first page": [jobs, counts],
        "jobs, status=failed": [f"{jobs}&status=failed", counts],
        "jobs, status=running (a few hundred)": [f"{jobs}&status=running", counts],
        "jobs, queue=books & status=pending": [f"{jobs}&queue=books&status=pending", counts],
        "jobs, queue=sync": [f"{jobs}&queue=sync", counts],
        f"jobs, task={RARE_TASK} (rare)": [f"{jobs}&task={RARE_TASK}", counts],
        "jobs, one hour of 30 days": [f"{jobs}&{window}", counts],
        "jobs, page in the middle (keyset)": [f"{jobs}&after={middle}", counts],
        "jobs, the page before it": [f"/api/jobs?limit=51&after={middle}", counts],
        "jobs, key and queue": [f"{jobs}&queue=fetch&key={key}", counts],
        "jobs, key alone (search box)": [f"{jobs}&key={key}", counts],
        "job detail": [detail, f"{detail}/subscribers", f"{detail}/dependents"],
    }


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(q: conveyor.Queue, backend: str, rows: int, rounds: int) -> None:
    print(f"\n== {backend}: {rows:,} jobs", flush=True)
    print(f"fill: {fill(q, rows):.1f} s; statuses, keys, times: {shape(q, rows):.1f} s")
    s = q.stats()
    print(f"pending {s.pending:,}, running {s.running:,} ({s.expired} past lease), "
          f"completed {s.completed:,}, failed {s.failed:,}, cancelled {s.cancelled:,}")  # fmt: skip
    with TestClient(create_app(q, tokens={})) as client:
        print(f"\n{'poll':42} {'request':58} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for page, paths in requests(client, q).items():
            totals = [0.0] * rounds
            for path in paths:
                samples = timed(get(client, path), rounds)
                totals = [a + b for a, b in zip(totals, samples, strict=True)]
                shown = path if len(path) <= 58 else path[:55] + "..."
                print(f"{page:42} {shown:58} {statistics.median(samples):8.1f} "
                      f"{pct(samples, 95):8.1f} {max(samples):8.1f}", flush=True)  # fmt: skip
            if len(paths) > 1:
                print(f"{page:42} {'= the whole poll':58} {statistics.median(totals):8.1f} "
                      f"{pct(totals, 95):8.1f} {max(totals):8.1f}", flush=True)  # fmt: skip
        started = time.perf_counter()
        answer = client.post("/api/jobs/bulk/retry", json={"queue": "mail", "limit": 1000}).json()
        took = time.perf_counter() - started
        print(f"\nbulk retry of {answer['changed_count']:,} failed jobs in one request: "
              f"{took:.2f} s ({answer['changed_count'] / took:,.0f} jobs/s)")  # fmt: skip


@contextmanager
def database(backend: str, pg: str, workdir: Path) -> Iterator[conveyor.Queue]:
    if backend == "sqlite":
        q = conveyor.connect(f"sqlite:///{workdir / 'dashboard.db'}")
        try:
            yield q
        finally:
            q.close()
        return
    import psycopg

    schema = f"bench_dashboard_{uuid.uuid4().hex[:8]}"
    q = conveyor.connect(f"{pg}{'&' if '?' in pg else '?'}schema={schema}")
    try:
        yield q
    finally:
        q.close()
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


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
