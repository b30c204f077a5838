"""What every benchmark shares: figures, fresh databases, durable settings, medians.

A *figure* is one number one system produced on one workload in one run. The runner
repeats runs and reports the median of each figure with its spread (max - min over
median), which is how noisy this machine was for that number.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PG_URL = os.environ.get("CONVEYOR_BENCH_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")

# The durability every system runs with: SQLite in WAL mode syncing each commit
# (synchronous=FULL), PostgreSQL with fsync and synchronous_commit on (checked below).
SQLITE_PRAGMAS = ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL")


@dataclass(frozen=True)
class Figure:
    workload: str  # "drain", "enqueue_one", "claim@1M", ...
    backend: str  # "sqlite" or "postgresql"
    system: str  # "conveyor", "floor", "huey", ...
    metric: str  # "jobs/s", "p50 ms", "p99 ms", "MB", ...
    value: float
    note: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.workload, self.backend, self.system, self.metric)


@dataclass
class Summary:
    """The median of one figure over several runs, and how far apart the runs were."""

    workload: str
    backend: str
    system: str
    metric: str
    median: float
    low: float
    high: float
    runs: int
    note: str = ""

    @property
    def spread(self) -> float:
        """(max - min) / median: 0.1 means the runs were within 10% of each other."""
        return (self.high - self.low) / self.median if self.median else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "spread": round(self.spread, 4)}


def summarise(figures: list[Figure]) -> list[Summary]:
    groups: dict[tuple[str, str, str, str], list[Figure]] = {}
    for figure in figures:
        groups.setdefault(figure.key, []).append(figure)
    out = []
    for (workload, backend, system, metric), items in groups.items():
        values = [f.value for f in items]
        median = statistics.median(values)
        # A note that describes its run (the transactions a drain took, say) is the one
        # of the run nearest the median, not every run's strung together.
        note = min(items, key=lambda f: abs(f.value - median)).note
        out.append(
            Summary(workload, backend, system, metric, median,
                    min(values), max(values), len(values), note)
        )  # fmt: skip
    return out


# -- one timing method for every system -----------------------------------------------------
@dataclass(frozen=True)
class Timed:
    """The durations, in seconds, of timed calls (all of them, so that blocks of samples
    taken in different processes can be pooled before taking percentiles)."""

    seconds: list[float]

    @property
    def latency(self) -> Any:
        from conveyor.cli.bench import Latency

        return Latency.of(self.seconds)


def time_calls(call: Callable[[int], Any], n: int, warmup: int) -> Timed:
    """``n`` calls of ``call(i)``, each timed by ``time.perf_counter_ns()`` around the call
    only, after ``warmup`` untimed calls (numbered -1, -2, ...). Every system's single
    enqueue is timed by this, each in a fresh process (``benchmarks.isolated``)."""
    for i in range(warmup):
        call(-1 - i)
    clock = time.perf_counter_ns
    took = []
    for i in range(n):
        started = clock()
        call(i)
        took.append(clock() - started)
    return Timed([t / 1e9 for t in took])


async def time_calls_async(call: Callable[[int], Awaitable[Any]], n: int, warmup: int) -> Timed:
    """``time_calls`` for a coroutine function (the asyncio peers)."""
    for i in range(warmup):
        await call(-1 - i)
    clock = time.perf_counter_ns
    took = []
    for i in range(n):
        started = clock()
        await call(i)
        took.append(clock() - started)
    return Timed([t / 1e9 for t in took])


@dataclass
class Scale:
    """How big each workload is. ``quick`` is for smoke tests and a first look."""

    enqueue_one: int = 500
    # Untimed single enqueues first: the first ~1,000 commits into a new SQLite file are
    # slower (its WAL file grows with each; after the first checkpoint it is reused), and
    # a queue in use is past them.
    warmup: int = 1_000
    # Each system's samples are taken in this many blocks, each in a fresh process, the
    # systems taking turns block by block: a burst of load from elsewhere lasting a few
    # seconds then lands on every system's samples alike instead of on one system.
    blocks: int = 5
    processes: int = 4  # worker processes of every system in the process drains
    bulk: int = 20_000
    drain: int = 30_000
    peer_drain: int = 5_000
    latency_rounds: int = 500
    backlogs: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
    retained: int = 1_000_000
    worker_jobs: int = 5_000
    start_latency_rounds: int = 50
    runs: int = 3
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def quick(cls) -> Scale:
        return cls(enqueue_one=300, warmup=300, blocks=3, bulk=2_000, drain=3_000, peer_drain=1_500,
                   latency_rounds=100,
                   backlogs=(1_000, 10_000), retained=10_000, worker_jobs=1_000,
                   start_latency_rounds=10, runs=1)  # fmt: skip

    @classmethod
    def smoke(cls) -> Scale:
        return cls(enqueue_one=20, warmup=5, blocks=1, bulk=300, drain=300, peer_drain=50,
                   latency_rounds=20,
                   backlogs=(200, 500), retained=500, worker_jobs=100,
                   start_latency_rounds=3, runs=1)  # fmt: skip


# -- fresh databases ----------------------------------------------------------------------
@contextlib.contextmanager
def sqlite_dir(parent: str | None = None) -> Iterator[Path]:
    """An empty directory for SQLite files, on the same disk as ``parent``."""
    with tempfile.TemporaryDirectory(prefix="conveyor-bench-", dir=parent) as folder:
        yield Path(folder)


def sqlite_connect(path: Path | str) -> sqlite3.Connection:
    """A plain connection with the benchmark's durability (autocommit; BEGIN by hand)."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    for pragma in SQLITE_PRAGMAS:
        conn.execute(pragma)
    return conn


@contextlib.contextmanager
def pg_database(url: str = PG_URL) -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of ``url``; dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"conveyor_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    fresh = make_conninfo(url, dbname=name)
    try:
        yield fresh_url(fresh)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def mariadb_database(url: str) -> Iterator[str]:
    """A new, empty MariaDB database on the server of ``url``; dropped afterwards."""
    from benchmarks.floor_queue import mariadb_connect

    name = f"conveyor_bench_{uuid.uuid4().hex[:10]}"
    admin = mariadb_connect(url)
    admin.cursor().execute(f"CREATE DATABASE `{name}`")
    admin.close()
    base = url.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        # A connection of its own: one held open meanwhile may have timed out.
        admin = mariadb_connect(url)
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def server_database(backend: str, url: str) -> contextlib.AbstractContextManager[str]:
    """A new, empty database on the PostgreSQL or MariaDB server of ``url``: its URL."""
    return mariadb_database(url) if backend == "mariadb" else pg_database(url)


def fresh_url(conninfo: str) -> str:
    """A libpq conninfo string as a postgresql:// URL (what conveyor.connect takes)."""
    from psycopg.conninfo import conninfo_to_dict

    p = conninfo_to_dict(conninfo)
    user = p.get("user", "")
    host = p.get("host", "127.0.0.1")
    port = p.get("port", 5432)
    return f"postgresql://{user}@{host}:{port}/{p['dbname']}"


def pg_durability(url: str = PG_URL) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {
            name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "full_page_writes", "server_version")
        }


def postgres_available(url: str = PG_URL) -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL at {url} is unreachable: {exc}"
    return None


# -- the machine ------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = int(line.split()[1]) // 1024
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_mb": memory,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "system": f"{platform.system()} {platform.release()}",
        "load_at_start": [round(x, 2) for x in load],
    }


def cpu_ticks(pid: int) -> int | None:
    """CPU time (user and system, its threads included) a local process has spent, in
    clock ticks, from /proc; None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            after_name = f.read().rsplit(b")", 1)[1].split()
        return int(after_name[11]) + int(after_name[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


def rss_mb(pid: int | None = None) -> float:
    """Resident memory of a process (this one by default), in MB, from /proc."""
    status = Path(f"/proc/{pid or os.getpid()}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def parts_arguments(description: str, url: str) -> argparse.Namespace:
    """The options of a schema-parts benchmark (``mariadb_parts``, ``postgres_parts``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", default=url)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    return parser.parse_args()


def print_parts(database: str, jobs: int, runs: int, rates: dict[str, list[float]]) -> None:
    """The ``claim(ack=)`` loop's rate per variant of the schema, against "as migrated"."""
    print(f"claim(ack=) loop on {database}, jobs/s: {jobs} jobs in batches of 100; "
          f"median of {runs} interleaved runs (min-max)")  # fmt: skip
    base = statistics.median(rates["as migrated"])
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:44s} {median:8,.0f}  ({min(values):,.0f}-{max(values):,.0f})"
              f"  {median / base:5.2f}x")  # fmt: skip
