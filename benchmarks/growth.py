"""What a table of finished jobs costs: the worker drain and every read the console and the
examples use, on a database holding 1,000 finished jobs and on one holding 10 million.

The target: with 10 million finished jobs in the table, the worker drain keeps at least
90% of its rate at the smallest size, and every read stays within 1.5x of its time there.

For each backend and each size, a fresh database (a SQLite file, a PostgreSQL schema
chosen with ``?schema=``, a MariaDB database) is migrated by ``conveyor.connect`` and
filled with ``N`` finished jobs by plain SQL inserts into conveyor's own tables (test
data, not a workload: a recursive CTE on SQLite, ``generate_series`` on PostgreSQL,
MariaDB's sequence tables), in chunks: 90% completed, 7% failed, 3% cancelled, over four
queues and five tasks, one job in four with a key, created 0.25 s apart; each completed
job keeps a random claim id, its claim's time and a worker, as an ended claim leaves
them (so the index of claim ids is as large as in a history made in service). The per-row
count triggers keep conveyor's count tables right; ``stats()`` is checked against ``N``.
PostgreSQL then gets a ``VACUUM ANALYZE`` (what autovacuum does after a load); SQLite and
MariaDB get nothing (conveyor never runs ANALYZE on SQLite; InnoDB samples by itself).
Then the load's pages are written out (a checkpoint; InnoDB's dirty pages flushed), so
the drains do not share the disk with the fill's writes.

Then pending work is added through the API (250 jobs in each queue, keyed ones among
them, 10 left running under a claim) and measured, the reads taking turns round by round:

- ``q.jobs(...)`` as the console's jobs page asks for it (newest first, 51 rows): the
  first page of each status, and filtered by queue, by task and by key;
- ``q.jobs(...)`` as the API and the examples call it (oldest first): by queue, by
  status, by task, by queue and status (a page of 500, metadata_sync), by queue, key and
  status (book_pipeline);
- ``q.stats()``, ``q.stats(queue)``, ``q.queue_stats()`` (the console's queue list),
  ``q.task_stats()``, ``q.task_stats(queue)``;
- the download queue example's ``dequeue()`` (which recovers expired leases once a
  second, then reads the oldest pending job).

Then the worker drain: ``benchmarks/drains.py``'s conveyor worker drain (``conveyor
worker --burst``, ``--processes`` processes, timed from the first job to the last by the
jobs' own logs) of ``--drain`` fresh jobs, ``--drain-runs`` times (median; the drained
jobs are deleted after each run, so every run starts from the same table), after
``--warmup-drains`` untimed ones (shown apart): right after a load of ten million rows
the pages a drain touches are not in the caches yet, which a table that grew in service
would have; on PostgreSQL the first drains ran at a fifth to two thirds of the later ones.

    python benchmarks/growth.py                                  # 1,000 and 10,000,000
    python benchmarks/growth.py --sizes 1000,100000 --backends sqlite
    python benchmarks/growth.py --sizes 1000,10000000 --out      # benchmarks/results/growth.md

Each size's database is dropped once measured. A 10-million-job SQLite file takes about
6 GB, a PostgreSQL schema about as much.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks import drains
from benchmarks.harness import PG_URL, machine, postgres_available, sqlite_dir
from conveyor.cli.bench import Latency, VerificationFailed
from examples.download_queue.queue import DownloadQueue

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "growth.md"
BACKENDS = ("sqlite", "postgresql", "mariadb")
DRAIN_TARGET = 0.90  # the drain keeps at least this share of its rate at the smallest size
READ_TARGET = 1.5  # a read takes at most this many times its time at the smallest size

# -- the finished jobs, per dialect ---------------------------------------------------------
# Job i (1..N) of the fill: its queue and task by i % 10, its status by i % 97 (a prime,
# so statuses spread over every queue), a key on every fourth, created (N - i) * 0.25 s
# before the fill started, started a second later, finished a second after that.
QUEUES = {"emails": 4, "reports": 2, "downloads": 3, "thumbnails": 1}  # tenths of the jobs
STATUSES = {"completed": 87, "failed": 7, "cancelled": 3}  # of every 97 jobs

TASKS = {
    "send_email": 2,
    "send_digest": 2,
    "build_report": 2,
    "download": 3,
    "make_thumbnail": 1,
}  # tenths of the jobs, in the order of QUEUES' jobs


def _case(shares: dict[str, int], residue: str, name: str) -> str:
    """``CASE`` giving each name its share of the residues, in order."""
    at, arms = 0, []
    for value, share in list(shares.items())[:-1]:
        at += share
        arms.append(f"WHEN {residue} < {at} THEN '{value}'")
    return f"CASE {' '.join(arms)} ELSE '{list(shares)[-1]}' END AS {name}"


def mix(modulo: str) -> str:
    """The queue, task and status columns of job ``i``, with ``modulo`` the dialect's
    ``i mod n`` (a format of ``n``): one definition for the three fills."""
    tenth, of_97 = modulo.format(n=10), modulo.format(n=97)
    columns = (
        _case(QUEUES, tenth, "queue"),
        _case(TASKS, tenth, "task"),
        _case(STATUSES, of_97, "status"),
    )
    return ", ".join(columns)


SQLITE_FILL = """
WITH RECURSIVE seq(i) AS (
    SELECT :first UNION ALL SELECT i + 1 FROM seq WHERE i < :last
), job AS (
    SELECT i,
           @MIX@,
           :now - (:total - i) * 0.25 AS created
    FROM seq
)
INSERT INTO conveyor_jobs (queue, task, payload, key, status, priority, run_at, attempts,
                           max_attempts, result, error, error_kind, created_at, started_at,
                           finished_at, updated_at, claim_id, claimed_at, worker)
SELECT queue, task,
       CASE WHEN queue = 'downloads'
            THEN json_object('message_id', i, 'url', 'https://example.org/files/' || i)
            ELSE json_object('n', i) END,
       CASE WHEN i % 4 = 0 THEN 'k-' || i END,
       status, 0, created,
       CASE status WHEN 'completed' THEN 1 WHEN 'failed' THEN 3 ELSE 0 END,
       3,
       CASE WHEN status = 'completed' THEN '{"ok": true}' END,
       CASE WHEN status = 'failed' THEN 'gave up after 3 attempts' END,
       CASE WHEN status = 'failed' THEN 'terminal' END,
       created,
       CASE WHEN status <> 'cancelled' THEN created + 1 END,
       created + 2,
       created + 2,
       CASE WHEN status = 'completed' THEN lower(hex(randomblob(16))) END,
       CASE WHEN status = 'completed' THEN created + 1 END,
       CASE WHEN status = 'completed' THEN 'growth-fill' END
FROM job
"""
SQLITE_FILL = SQLITE_FILL.replace("@MIX@", mix("i % {n}"))

POSTGRES_FILL = """
INSERT INTO conveyor_jobs (queue, task, payload, key, status, priority, run_at, attempts,
                           max_attempts, result, error, error_kind, created_at, started_at,
                           finished_at, updated_at, claim_id, claimed_at, worker)
SELECT queue, task,
       CASE WHEN queue = 'downloads'
            THEN jsonb_build_object('message_id', i, 'url', 'https://example.org/files/' || i)
            ELSE jsonb_build_object('n', i) END,
       CASE WHEN mod(i, 4) = 0 THEN 'k-' || i END,
       status, 0, created,
       CASE status WHEN 'completed' THEN 1 WHEN 'failed' THEN 3 ELSE 0 END,
       3,
       CASE WHEN status = 'completed' THEN '{"ok": true}'::jsonb END,
       CASE WHEN status = 'failed' THEN 'gave up after 3 attempts' END,
       CASE WHEN status = 'failed' THEN 'terminal' END,
       created,
       CASE WHEN status <> 'cancelled' THEN created + interval '1 second' END,
       created + interval '2 seconds',
       created + interval '2 seconds',
       CASE WHEN status = 'completed' THEN replace(gen_random_uuid()::text, '-', '') END,
       CASE WHEN status = 'completed' THEN created + interval '1 second' END,
       CASE WHEN status = 'completed' THEN 'growth-fill' END
FROM (SELECT i,
             @MIX@,
             now() - (%(total)s - i) * interval '250 milliseconds' AS created
      FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i) AS job
"""

POSTGRES_FILL = POSTGRES_FILL.replace("@MIX@", mix("mod(i, {n})"))

# seq_<first>_to_<last> is a table of MariaDB's Sequence engine: the integers first..last.
MARIADB_FILL = """
INSERT INTO conveyor_jobs (queue, task, payload, `key`, status, priority, run_at, attempts,
                           max_attempts, result, error, error_kind, created_at, started_at,
                           finished_at, updated_at, claim_id, claimed_at, worker)
SELECT queue, task,
       CASE WHEN queue = 'downloads'
            THEN JSON_OBJECT('message_id', i, 'url', CONCAT('https://example.org/files/', i))
            ELSE JSON_OBJECT('n', i) END,
       CASE WHEN i % 4 = 0 THEN CONCAT('k-', i) END,
       status, 0, created,
       CASE status WHEN 'completed' THEN 1 WHEN 'failed' THEN 3 ELSE 0 END,
       3,
       CASE WHEN status = 'completed' THEN '{{"ok": true}}' END,
       CASE WHEN status = 'failed' THEN 'gave up after 3 attempts' END,
       CASE WHEN status = 'failed' THEN 'terminal' END,
       created,
       CASE WHEN status <> 'cancelled' THEN created + INTERVAL 1 SECOND END,
       created + INTERVAL 2 SECOND,
       created + INTERVAL 2 SECOND,
       CASE WHEN status = 'completed' THEN MD5(CONCAT(RAND(), i)) END,
       CASE WHEN status = 'completed' THEN created + INTERVAL 1 SECOND END,
       CASE WHEN status = 'completed' THEN 'growth-fill' END
FROM (SELECT seq AS i,
             @MIX@,
             UTC_TIMESTAMP(6) - INTERVAL (({total} - seq) * 250000) MICROSECOND AS created
      FROM seq_{first}_to_{last}) AS job
"""
MARIADB_FILL = MARIADB_FILL.replace("@MIX@", mix("seq % {n}"))

CHUNK = {"sqlite": 500_000, "postgresql": 1_000_000, "mariadb": 100_000}


def expected_counts(n: int) -> dict[str, int]:
    """How many of jobs 1..n the fill gives each final status (i % 97 decides)."""
    per_residue = [n // 97 + (1 if 0 < r <= n % 97 else 0) for r in range(97)]
    out, low = {}, 0
    for status, share in STATUSES.items():
        out[status] = sum(per_residue[low : low + share])
        low += share
    return out


# -- a database of one backend ---------------------------------------------------------------
class Database:
    """One fresh database: its URL for conveyor, and a plain connection for the fixtures."""

    def __init__(self, backend: str, url: str, path: Path | None = None) -> None:
        self.backend = backend
        self.url = url
        self.path = path  # SQLite
        self._conn: Any = None

    @property
    def drain_db(self) -> str:
        """What ``benchmarks/drains.py`` takes: the SQLite path, else the URL."""
        return str(self.path) if self.path is not None else self.url

    def conn(self) -> Any:
        if self._conn is None:
            if self.backend == "sqlite":
                self._conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=60)
            elif self.backend == "postgresql":
                import psycopg

                base, _, query = self.url.partition("?schema=")
                self._conn = psycopg.connect(base, autocommit=True)
                self._conn.execute(f'SET search_path TO "{query}"')  # type: ignore[arg-type]
            else:
                from benchmarks.floor_queue import mariadb_connect

                self._conn = mariadb_connect(self.url)
        return self._conn

    def execute(self, sql: str, params: Any = None) -> None:
        conn = self.conn()
        if self.backend == "mariadb":
            conn.cursor().execute(sql, params)
        else:
            conn.execute(sql, params or ())

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def fill(self, n: int, log: Callable[[str], None]) -> float:
        """``n`` finished jobs, in chunks of one statement each; seconds taken."""
        started = time.perf_counter()
        now = time.time()
        step = CHUNK[self.backend]
        for first in range(1, n + 1, step):
            last = min(n, first + step - 1)
            if self.backend == "sqlite":
                self.execute("BEGIN IMMEDIATE")
                self.execute(SQLITE_FILL, {"first": first, "last": last, "total": n, "now": now})
                self.execute("COMMIT")
            elif self.backend == "postgresql":
                self.execute(POSTGRES_FILL, {"first": first, "last": last, "total": n})
            else:
                self.execute(MARIADB_FILL.format(first=first, last=last, total=n))
            if n > step:
                log(f"    {last:>12,} of {n:,} ({time.perf_counter() - started:.0f} s)")
        return time.perf_counter() - started

    def settle(self) -> None:
        """After a load: PostgreSQL's planner statistics and visibility map, as autovacuum
        would leave them. SQLite and MariaDB are left as conveyor leaves them. Then the
        load's pages are written out (a checkpoint; InnoDB's dirty pages flushed), as
        they would have been long before a real table grew this large: otherwise the
        drains that follow share the disk with gigabytes of writes, and their commits'
        fsyncs wait for them (PostgreSQL's drain at 10M ran at 2,600 jobs/s, then 9,700
        as the checkpoint ended, against 14,500 at 1,000 jobs)."""
        if self.backend == "postgresql":
            self.execute("VACUUM ANALYZE conveyor_jobs")
            self.execute("CHECKPOINT")
        elif self.backend == "sqlite":
            self.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            self._flush_innodb()

    def _flush_innodb(self, wait: float = 600.0) -> None:
        """Until InnoDB has written (nearly) every page the load dirtied, or ``wait`` s."""
        cur = self.conn().cursor()
        cur.execute("SELECT @@GLOBAL.innodb_max_dirty_pages_pct")
        (kept,) = cur.fetchone()
        cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")  # flush now, at full speed
        try:
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
                if int(cur.fetchone()[1]) < 100:
                    return
                time.sleep(1.0)
        finally:
            cur.execute(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(kept)}")

    def forget_drained(self) -> None:
        """The drain's jobs go (the count triggers follow), so each run starts alike."""
        self.execute(f"DELETE FROM conveyor_jobs WHERE queue = '{drains.QUEUE}'")


@contextlib.contextmanager
def fresh(backend: str, workdir: Path, pg_url: str, mariadb_url: str) -> Iterator[Database]:
    """A new, empty database; dropped (or deleted) afterwards."""
    if backend == "sqlite":
        with sqlite_dir(str(workdir)) as folder:
            path = folder / "growth.db"
            db = Database(backend, f"sqlite:///{path}", path)
            try:
                yield db
            finally:
                db.close()
    elif backend == "postgresql":
        import psycopg

        schema = f"conveyor_growth_{uuid.uuid4().hex[:10]}"
        sep = "&" if "?" in pg_url else "?"
        db = Database(backend, f"{pg_url}{sep}schema={schema}")
        try:
            yield db
        finally:
            db.close()
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
    else:
        with drains.mariadb_database(mariadb_url) as url:
            db = Database(backend, url)
            try:
                yield db
            finally:
                db.close()


# -- pending work, and the reads -------------------------------------------------------------
PENDING = 250  # per queue
RUNNING = 10


def add_pending(q: conveyor.Queue) -> None:
    """Work waiting beside the history: ``PENDING`` jobs per queue (every other email
    keyed), and ``RUNNING`` reports held by a claim."""
    tasks = {"emails": ["send_email", "send_digest"], "reports": ["build_report"],
             "thumbnails": ["make_thumbnail"]}  # fmt: skip
    for queue, names in tasks.items():
        items = [
            {"task": names[j % len(names)], "payload": {"n": j},
             **({"key": f"pending-{j}"} if queue == "emails" and j % 2 == 0 else {})}
            for j in range(PENDING)
        ]  # fmt: skip
        q.enqueue_many(items, queue=queue)
    downloads = [
        {"task": "download", "max_attempts": 4,
         "payload": {"message_id": 10**9 + j, "url": f"https://example.org/new/{j}"}}
        for j in range(PENDING)
    ]  # fmt: skip
    q.enqueue_ids(downloads, queue="downloads")
    q.claim("reports", limit=RUNNING, lease=3600, worker="growth", count_remaining=False)


def reads(q: conveyor.Queue, dq: DownloadQueue) -> dict[str, Callable[[], Any]]:
    """Every read the console and the examples make, by name."""
    page = 51  # the console's 50 rows, and one more to know whether there is a next page
    out: dict[str, Callable[[], Any]] = {}
    for status in ("pending", "running", "completed", "failed", "cancelled"):
        out[f"console: {status} jobs"] = lambda s=status: q.jobs(  # type: ignore[misc]
            status=s, limit=page, newest_first=True
        )
    out.update({
        "console: jobs of a queue": lambda: q.jobs(queue="thumbnails", limit=page,
                                                  newest_first=True),
        "console: jobs of a task": lambda: q.jobs(task="build_report", limit=page,
                                                 newest_first=True),
        "console: jobs with a key": lambda: q.jobs(key="pending-42", limit=page,
                                                  newest_first=True),
        "jobs(queue)": lambda: q.jobs(queue="thumbnails"),
        "jobs(status=pending)": lambda: q.jobs(status="pending"),
        "jobs(status=failed)": lambda: q.jobs(status="failed"),
        "jobs(task)": lambda: q.jobs(task="build_report"),
        "jobs(queue, status), page of 500": lambda: q.jobs(queue="emails", status="pending",
                                                           limit=500),
        "jobs(queue, key, status=running)": lambda: q.jobs(queue="emails", key="pending-42",
                                                           status="running", limit=1),
        "stats()": lambda: q.stats(),
        "stats(queue)": lambda: q.stats("downloads"),
        "queue_stats()": lambda: q.queue_stats(),
        "task_stats()": lambda: q.task_stats(),
        "task_stats(queue)": lambda: q.task_stats("emails"),
        "download queue: dequeue()": dq.dequeue,
    })  # fmt: skip
    return out


def time_reads(calls: dict[str, Callable[[], Any]], rounds: int,
               budget: float) -> tuple[dict[str, Latency], dict[str, int | None]]:  # fmt: skip
    """Up to ``rounds`` timed calls of each read, the reads taking turns round by round
    (a burst of load from elsewhere lands on all of them alike); a read stops early once
    it has spent ``budget`` seconds, with at least 5 calls. Two untimed calls first, the
    second counting the rows a list returns."""
    rows: dict[str, int | None] = {}
    for name, call in calls.items():
        call()
        answer = call()
        rows[name] = len(answer) if isinstance(answer, list | tuple) else None
    took: dict[str, list[float]] = {name: [] for name in calls}
    spent = dict.fromkeys(calls, 0.0)
    for _ in range(rounds):
        live = [n for n in calls if spent[n] < budget or len(took[n]) < 5]
        if not live:
            break
        for name in live:
            started = time.perf_counter()
            calls[name]()
            t = time.perf_counter() - started
            took[name].append(t)
            spent[name] += t
    return {name: Latency.of(seconds) for name, seconds in took.items()}, rows


# -- one backend ----------------------------------------------------------------------------
@dataclass
class SizeResult:
    size: int
    fill_s: float
    drains: list[float]
    reads: dict[str, Latency]
    warmups: list[float] = field(default_factory=list)  # untimed: caches cold after the fill
    rows: dict[str, int | None] = field(default_factory=dict)  # rows each list returned

    @property
    def drain(self) -> float:
        return statistics.median(self.drains)


@dataclass
class BackendResult:
    backend: str
    sizes: list[SizeResult] = field(default_factory=list)
    note: str = ""


def measure_size(backend: str, size: int, args: argparse.Namespace, workdir: Path,
                 log: Callable[[str], None]) -> SizeResult:  # fmt: skip
    with fresh(backend, workdir, args.pg, args.mariadb) as db, conveyor.connect(db.url) as q:
        log(f"[{backend}] {size:,} finished jobs: filling")
        fill_s = db.fill(size, log)
        if backend == "mariadb":
            q.fold_counts()  # the row triggers left one delta per job: fold them (untimed)
        stats = q.stats()
        want = expected_counts(size)
        got = {"completed": stats.completed, "failed": stats.failed,
               "cancelled": stats.cancelled}  # fmt: skip
        if got != want or stats.pending or stats.running:
            raise VerificationFailed(f"{backend}: after the fill, stats() says {stats}, "
                                     f"expected {want}")  # fmt: skip
        log(f"[{backend}] filled {size:,} in {fill_s:.1f} s; stats() agrees")
        add_pending(q)
        db.settle()
        with DownloadQueue(q, retention=None) as dq:  # the filled history stays
            latencies, rows = time_reads(reads(q, dq), args.rounds, args.budget)
        for name, lat in latencies.items():
            log(f"  {name:36} p50 {lat.p50:9.3f} ms  p99 {lat.p99:9.3f} ms  ({lat.count})")
        rates, warmups = [], []
        for run in range(args.warmup_drains + args.drain_runs):
            result = drains.drain_on(drains._conveyor(backend), db.drain_db, args.drain,
                                     args.processes, workdir)  # fmt: skip
            if run < args.warmup_drains:
                warmups.append(result["jobs/s"])
                log(f"  worker drain, warm-up {run + 1}: {result['jobs/s']:,.0f} jobs/s")
            else:
                rates.append(result["jobs/s"])
                log(f"  worker drain {len(rates)}: {result['jobs/s']:,.0f} jobs/s")
            db.forget_drained()
        return SizeResult(size, fill_s, rates, latencies, warmups, rows)


# -- the table ------------------------------------------------------------------------------
def _size(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def table(result: BackendResult) -> list[str]:
    """Markdown rows: each measure at each size, and its ratio to the smallest size
    (marked **outside** when it misses the target)."""
    sizes = result.sizes
    head = ["measure", *(_size(s.size) for s in sizes),
            *(f"{_size(s.size)} / {_size(sizes[0].size)}" for s in sizes[1:])]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(name: str, values: list[float], fmt: str, ok: Callable[[float], bool],
            rows: list[int] | None = None) -> None:  # fmt: skip
        ratios = []
        for k, v in enumerate(values[1:], 1):
            r = v / values[0] if values[0] else float("inf")
            shown = f"{r:.2f}"
            if rows is not None:
                r = r * rows[0] / rows[k]
                shown += f", per row {r:.2f}"
            ratios.append(shown if ok(r) else f"**{shown} outside**")
        lines.append("| " + " | ".join([name, *(format(v, fmt) for v in values), *ratios])
                     + " |")  # fmt: skip

    row(f"worker drain, jobs/s (target >= {DRAIN_TARGET:.2f})", [s.drain for s in sizes],
        ",.0f", lambda r: r >= DRAIN_TARGET)  # fmt: skip
    for name in sizes[0].reads:
        # A page that holds fewer rows at one size (a status the fixture has few of at
        # the small one) is judged per row returned, which is what its time pays for.
        counts = [s.rows.get(name) or 0 for s in sizes]
        per_row = counts if 0 not in counts and len(set(counts)) > 1 else None
        label = name
        if per_row is not None:
            label += " (" + " / ".join(f"{c} rows" for c in per_row) + ")"
        for pct in ("p50", "p99"):
            values = [getattr(s.reads[name], pct) for s in sizes]
            row(f"{label}, {pct} ms", values, ".3f", lambda r: r <= READ_TARGET, per_row)
    fills = ", ".join(f"{_size(s.size)} in {s.fill_s:,.0f} s" for s in sizes)
    lines.append("")
    lines.append(f"Fill (untimed fixture): {fills}. Drain runs: "
                 + "; ".join(f"{_size(s.size)} " + ", ".join(f"{d:,.0f}" for d in s.drains)
                             for s in sizes) + " jobs/s.")  # fmt: skip
    if any(s.warmups for s in sizes):
        lines.append("Warm-up drains, untimed (the first after the fill): "
                     + "; ".join(f"{_size(s.size)} " + ", ".join(f"{d:,.0f}" for d in s.warmups)
                                 for s in sizes) + " jobs/s.")  # fmt: skip
    return lines


def markdown(results: list[BackendResult], meta: dict[str, Any]) -> str:
    out = ["# Growth: 1,000 finished jobs against many", "",
           f"`{meta['command']}`, {meta['date']}", "",
           f"Machine: {meta['machine']['cpu']}, {meta['machine']['cores']} cores, "
           f"load average at start {meta['machine']['load_at_start']}. "
           f"Targets: drain >= {DRAIN_TARGET:.2f}x, reads <= {READ_TARGET}x the smallest size "
           "(judged on p50; p99 is shown, over few calls for the slow reads).", ""]  # fmt: skip
    for result in results:
        out += [f"## {result.backend}", ""]
        if result.note:
            out += [result.note, ""]
        out += [*table(result), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="1000,10000000",
        help="finished jobs in the table, comma-separated (smallest first)",
    )
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--drain", type=int, default=20_000, help="jobs per worker drain")
    parser.add_argument("--drain-runs", type=int, default=3, help="drains per size (median)")
    parser.add_argument("--warmup-drains", type=int, default=1,
                        help="untimed drains first (shown apart): right after the fill, the "
                             "pages a drain touches are not yet in the caches")  # fmt: skip
    parser.add_argument("--processes", type=int, default=4, help="worker processes")
    parser.add_argument("--rounds", type=int, default=200, help="timed calls per read, at most")
    parser.add_argument(
        "--budget",
        type=float,
        default=5.0,
        help="seconds per read and size after which it stops (5 calls at least)",
    )
    parser.add_argument("--pg", default=PG_URL, help="PostgreSQL server URL (a schema of its "
                        "own per size, dropped afterwards)")  # fmt: skip
    parser.add_argument("--mariadb", default=drains.MARIADB_URL, help="MariaDB server URL (a "
                        "database of its own per size, dropped afterwards)")  # fmt: skip
    parser.add_argument("--workdir", default=None, help="where the SQLite files go")
    parser.add_argument(
        "--out",
        nargs="?",
        const=str(OUT),
        default=None,
        help=f"write the tables as Markdown (default path: {OUT})",
    )
    args = parser.parse_args(argv)

    try:
        sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s})
    except ValueError:
        parser.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if len(sizes) < 2 or sizes[0] < 1:
        parser.error("--sizes: expected at least two positive sizes")
    backends = [b for b in args.backends.split(",") if b]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        parser.error(f"--backends: unknown {', '.join(sorted(unknown))}")
    if "postgresql" in backends and (problem := postgres_available(args.pg)):
        print(f"skipping PostgreSQL: {problem}", file=sys.stderr)
        backends.remove("postgresql")
    if "mariadb" in backends and (problem := drains.mariadb_available(args.mariadb)):
        print(f"skipping MariaDB: {problem}", file=sys.stderr)
        backends.remove("mariadb")

    import tempfile

    meta = {"machine": machine(), "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["python benchmarks/growth.py",
                                 *(argv if argv is not None else sys.argv[1:])])}  # fmt: skip
    results = []
    with tempfile.TemporaryDirectory(prefix="conveyor-growth-", dir=args.workdir) as tmp:
        for backend in backends:
            result = BackendResult(backend)
            for size in sizes:
                result.sizes.append(measure_size(backend, size, args, Path(tmp), print))
            results.append(result)
            print("\n".join(table(result)))
    text = markdown(results, meta)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
