"""Drains in worker processes: every system with the same number of processes.

Each run starts from a database of its own holding ``n`` pending no-op jobs (filled
without being timed, then ``os.sync()`` so the fill's dirty pages are not written back
during the drain), starts N worker processes of the system as its users run it (its own
CLI or consumer at its defaults), and waits until every job ran. Every job appends one
line to its process's log (``benchmarks.drain_apps.log_job``); the logs prove exactly
once and give the stretch while every process ran jobs (``steady_window``), which
leaves every worker's start-up and shutdown out, its siblings' too. Afterwards the
database must agree (every job completed).

Systems, per database (``SYSTEMS``):

- the **floor** queue (``benchmarks.floor_queue``): claim 100 + acknowledge the previous
  batch in one transaction; on SQLite, PostgreSQL and MariaDB;
- **conveyor**: ``conveyor worker --burst`` at its defaults (10 threads); a conveyor entry
  for MariaDB is added by itself once ``conveyor.connect`` takes ``mysql://`` URLs;
- huey: one ``huey_consumer -k process -w N`` (N worker processes);
- litequeue: N processes of its documented ``pop()`` / ``done()`` loop (it has no
  consumer); persist-queue: the same with ``get()`` / ``ack()``, but in one process
  only: it is not safe across processes (two processes can get the same item);
- procrastinate: N ``procrastinate worker --one-shot`` processes (default concurrency 1),
  and a tuned row at ``--concurrency 10``;
- pgqueuer: N processes of what ``pgq run --mode drain`` runs (its command line fails on
  its own log-level option in this version; ``benchmarks.peer_loops.pgqueuer_run``) at
  its default ``--batch-size 10``, and a tuned row at ``--batch-size 100``.
"""

from __future__ import annotations

import bisect
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure, cpu_ticks, mariadb_database, pg_database, sqlite_dir
from conveyor.cli.bench import VerificationFailed, verify_once

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MARIADB_URL = os.environ.get("CONVEYOR_BENCH_MARIADB_URL", "mysql://root@127.0.0.1:3306/test")
QUEUE = "bench"
TIMEOUT = 600.0


@dataclass
class Run:
    """One drain in progress: its database, its log folder, its job count."""

    db: str
    logs: Path
    n: int
    processes: int


@dataclass
class DrainSystem:
    name: str
    backend: str
    fill: Callable[[Run], None]
    argv: Callable[[Run], list[list[str]]]  # one command line per process to start
    check: Callable[[Run], None]  # the database agrees that every job completed
    stops_itself: bool = True  # else stopped (SIGINT, graceful) once every job has run
    processes: int | None = None  # fixed: the system is not safe with more
    note: str = ""


# -- fresh databases ------------------------------------------------------------------------
@contextlib.contextmanager
def fresh_database(backend: str, workdir: Path, pg_url: str, mariadb_url: str) -> Iterator[str]:
    if backend == "sqlite":
        with sqlite_dir(str(workdir)) as folder:
            yield str(folder / "drain.db")
    elif backend == "postgresql":
        with pg_database(pg_url) as url:
            yield url
    else:
        with mariadb_database(mariadb_url) as url:
            yield url


def mariadb_available(url: str = MARIADB_URL) -> str | None:
    try:
        from benchmarks.floor_queue import mariadb_connect

        mariadb_connect(url).close()
    except Exception as exc:
        return f"MariaDB at {url} is unreachable: {exc}"
    return None


def mariadb_durability(url: str = MARIADB_URL) -> dict[str, str]:
    from benchmarks.floor_queue import mariadb_connect

    conn = mariadb_connect(url)
    cur = conn.cursor()
    out = {}
    for name in ("version", "innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin"):
        cur.execute("SHOW VARIABLES LIKE %s", (name,))
        row = cur.fetchone()
        out[name] = str(row[1]) if row else "?"
    conn.close()
    return out


# -- the systems ----------------------------------------------------------------------------
def _py(*args: str) -> list[str]:
    return [sys.executable, *args]


def _floor(backend: str) -> DrainSystem:
    from benchmarks import floor_queue

    def check(run: Run) -> None:
        done, other = floor_queue.done_count(backend, run.db)
        if (done, other) != (run.n, 0):
            raise VerificationFailed(f"floor queue: {done} done and {other} not, of {run.n}")

    return DrainSystem(
        "floor queue", backend,
        fill=lambda run: floor_queue.create_and_fill(backend, run.db, run.n),
        argv=lambda run: [_py("-m", "benchmarks.floor_queue", backend, run.db)] * run.processes,
        check=check,
    )  # fmt: skip


def conveyor_url(backend: str, db: str) -> str:
    return f"sqlite:///{db}" if backend == "sqlite" else db


def _conveyor(backend: str, *, clocked: bool = False, client: str | None = None) -> DrainSystem:
    """``client``: MySQL's ``?client=`` for the workers' URL (their own row)."""
    import conveyor
    from conveyor.cli.bench import enqueue_bulk

    def fill(run: Run) -> None:
        with conveyor.connect(conveyor_url(backend, run.db)) as q:
            enqueue_bulk(q, run.n, queue=QUEUE)

    def argv(run: Run) -> list[list[str]]:
        head = (
            _py("-m", "benchmarks.lockclock", "-m", "conveyor")
            if clocked
            else _py("-m", "conveyor")
        )
        app = "benchmarks.drain_apps:conveyor_app"
        url = conveyor_url(backend, run.db) + (f"?client={client}" if client else "")
        cmd = [*head, "worker", "--app", app, "--db", url, "--burst", "--log-level", "warning"]
        return [cmd] * run.processes

    def check(run: Run) -> None:
        with conveyor.connect(conveyor_url(backend, run.db)) as q:
            stats = q.stats(QUEUE)
        if stats.completed != run.n or stats.pending or stats.running or stats.failed:
            raise VerificationFailed(
                f"conveyor worker drain: expected {run.n} completed, got {stats}"
            )

    name = f"conveyor worker, {client}" if client else "conveyor worker"
    return DrainSystem(name, backend, fill, argv, check)


def _conveyor_speaks(scheme: str) -> bool:
    """Whether this conveyor takes ``scheme://`` URLs (MariaDB is being added)."""
    try:
        from conveyor.config import parse_url

        parse_url(f"{scheme}://root@127.0.0.1:3306/test")
    except Exception:
        return False
    return True


def _huey() -> DrainSystem:
    def fill(run: Run) -> None:
        os.environ["BENCH_DB"] = run.db
        from benchmarks import drain_apps

        huey = drain_apps._huey_app()
        huey.storage.conn.execute("PRAGMA synchronous = OFF")  # the fill is not measured
        for i in range(run.n):
            huey.bench_noop(i)
        huey.storage.close()

    def argv(run: Run) -> list[list[str]]:
        return [[str(BIN / "huey_consumer"), "benchmarks.drain_apps.huey_app",
                 "-w", str(run.processes), "-k", "process", "-q"]]  # fmt: skip

    def check(run: Run) -> None:
        import sqlite3

        left = sqlite3.connect(run.db).execute("SELECT count(*) FROM task").fetchone()[0]
        if left:
            raise VerificationFailed(f"huey drain: {left} tasks left")

    return DrainSystem("huey", "sqlite", fill, argv, check, stops_itself=False,
                       note="one huey_consumer -k process -w N")  # fmt: skip


def _litequeue() -> DrainSystem:
    def fill(run: Run) -> None:
        from litequeue import LiteQueue  # type: ignore[import-untyped]

        q = LiteQueue(run.db)
        with q.transaction(mode="IMMEDIATE"):
            for i in range(run.n):
                q.put(json.dumps({"i": i}))
        q.close()

    def check(run: Run) -> None:
        import sqlite3

        rows = sqlite3.connect(run.db).execute(
            "SELECT count(*) FROM Queue WHERE status <> 2").fetchone()[0]  # fmt: skip
        if rows:
            raise VerificationFailed(f"litequeue drain: {rows} messages not done")

    return DrainSystem(
        "litequeue", "sqlite", fill,
        argv=lambda run: [_py("-m", "benchmarks.peer_loops", "litequeue", run.db)] * run.processes,
        check=check, note="its pop()/done() loop in N processes",
    )  # fmt: skip


def _persistqueue() -> DrainSystem:
    def fill(run: Run) -> None:
        from persistqueue import SQLiteAckQueue

        q = SQLiteAckQueue(run.db)
        q._putter.execute("PRAGMA synchronous = OFF")  # the fill is not measured
        for i in range(run.n):
            q.put({"i": i})
        q.close()

    def check(run: Run) -> None:
        from persistqueue import SQLiteAckQueue

        q = SQLiteAckQueue(run.db)
        left = q.qsize()
        q.close()
        if left:
            raise VerificationFailed(f"persist-queue drain: {left} items left")

    return DrainSystem(
        "persist-queue", "sqlite", fill,
        argv=lambda run: [_py("-m", "benchmarks.peer_loops", "persist-queue", run.db)],
        check=check, processes=1,
        note="its get()/ack() loop in 1 process: it is not safe across processes",
    )  # fmt: skip


def _procrastinate(concurrency: int = 1) -> DrainSystem:
    def fill(run: Run) -> None:
        import asyncio

        import procrastinate

        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=run.db))

        @app.task(name="noop", queue=QUEUE)
        def noop(i: int) -> None: ...

        async def go() -> None:
            async with app.open_async():
                await app.schema_manager.apply_schema_async()
                for start in range(0, run.n, 1000):
                    await noop.batch_defer_async(
                        *({"i": i} for i in range(start, min(run.n, start + 1000)))
                    )

        asyncio.run(go())

    def argv(run: Run) -> list[list[str]]:
        app = "benchmarks.drain_apps.procrastinate_app"
        cmd = [str(BIN / "procrastinate"), "--app", app, "worker", "--queues", QUEUE,
               "--one-shot", "--concurrency", str(concurrency)]  # fmt: skip
        return [cmd] * run.processes

    def check(run: Run) -> None:
        import psycopg

        with psycopg.connect(run.db) as conn:
            row = conn.execute("SELECT count(*) FILTER (WHERE status = 'succeeded'),"
                               " count(*) FROM procrastinate_jobs").fetchone()  # fmt: skip
        if row is None or row[0] != run.n or row[1] != run.n:
            raise VerificationFailed(f"procrastinate drain: {row} of {run.n} succeeded")

    name = "procrastinate" if concurrency == 1 else f"procrastinate (concurrency={concurrency})"
    return DrainSystem(name, "postgresql", fill, argv, check)


def _pgqueuer(batch_size: int = 10) -> DrainSystem:
    def fill(run: Run) -> None:
        import asyncio

        import psycopg
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries

        async def go() -> None:
            conn = await psycopg.AsyncConnection.connect(run.db, autocommit=True)
            queries = Queries(PsycopgDriver(conn))
            await queries.install()
            for start in range(0, run.n, 1000):
                count = min(run.n, start + 1000) - start
                payloads = [json.dumps({"i": i}).encode() for i in range(start, start + count)]
                await queries.enqueue(["noop"] * count, payloads, [0] * count)
            await conn.close()

        asyncio.run(go())

    def argv(run: Run) -> list[list[str]]:
        cmd = _py("-m", "benchmarks.peer_loops", "pgqueuer",
                  "benchmarks.drain_apps:pgqueuer_factory", str(batch_size))  # fmt: skip
        return [cmd] * run.processes

    def check(run: Run) -> None:
        import psycopg

        with psycopg.connect(run.db) as conn:
            row = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()
        if row is None or row[0]:
            raise VerificationFailed(f"pgqueuer drain: {row} jobs left in its queue")

    name = "pgqueuer" if batch_size == 10 else f"pgqueuer (batch_size={batch_size})"
    return DrainSystem(name, "postgresql", fill, argv, check)


def systems(backend: str, *, with_peers: bool = True) -> list[DrainSystem]:
    """Every system that drains on ``backend``: the floor first, then conveyor, then peers."""
    out = [_floor(backend)]
    if backend in ("sqlite", "postgresql") or (backend == "mariadb" and _conveyor_speaks("mysql")):
        out.append(_conveyor(backend))
        if backend == "mariadb" and importlib.util.find_spec("MySQLdb") is not None:
            out.append(_conveyor(backend, client="mysqlclient"))  # the C client library
    if not with_peers:
        return out
    peers: dict[str, list[tuple[str, Callable[[], DrainSystem]]]] = {
        "sqlite": [("huey", _huey), ("litequeue", _litequeue), ("persistqueue", _persistqueue)],
        "postgresql": [("pgqueuer", _pgqueuer), ("pgqueuer", lambda: _pgqueuer(100)),
                       ("procrastinate", _procrastinate),
                       ("procrastinate", lambda: _procrastinate(10))],
        "mariadb": [],
    }  # fmt: skip
    for package, build in peers[backend]:
        try:
            __import__(package)
        except ImportError:
            continue
        out.append(build())
    return out


# -- one drain ------------------------------------------------------------------------------
def drain(system: DrainSystem, n: int, processes: int, workdir: Path, pg_url: str,
          mariadb_url: str = MARIADB_URL) -> dict[str, Any]:  # fmt: skip
    """Drain ``n`` jobs with ``processes`` worker processes (the system's fixed count if it
    has one); returns jobs/s, the processes used and, where clocked, the write lock held."""
    with fresh_database(system.backend, workdir, pg_url, mariadb_url) as db:
        return drain_on(system, db, n, processes, workdir)


def drain_on(system: DrainSystem, db: str, n: int, processes: int,
             workdir: Path) -> dict[str, Any]:  # fmt: skip
    """``drain`` on a database that exists (a SQLite path or a server URL): the system's
    fill adds ``n`` pending jobs to whatever it holds."""
    processes = system.processes or processes
    with sqlite_dir(str(workdir)) as logs:
        run = Run(db, logs, n, processes)
        system.fill(run)
        os.sync()
        env = {**os.environ, "BENCH_LOG_DIR": str(logs), "BENCH_DB": db,
               "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}  # fmt: skip
        procs = []
        for k, cmd in enumerate(system.argv(run)):
            with open(logs / f"stderr-{k}.txt", "wb") as err:  # a file: a pipe could fill up
                procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                              stderr=err))  # fmt: skip
        sampler = CpuSampler([p.pid for p in procs])
        try:
            _wait(system, procs, logs, n, sampler)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        failed = [k for k, p in enumerate(procs)
                  if p.returncode not in (0, -signal.SIGINT, -signal.SIGTERM)]  # fmt: skip
        if failed and system.stops_itself:
            err = (logs / f"stderr-{failed[0]}.txt").read_text(errors="replace")
            raise RuntimeError(f"{system.name}: a worker exited with "
                               f"{procs[failed[0]].returncode}: {err.strip()[-600:]}")  # fmt: skip
        seen, stamps, spans = _read_logs(logs)
        verify_once(seen, n, len(seen), what=f"{system.name} drain")
        system.check(run)
        window = steady_window(stamps, spans, processes)
        first, last = window or (stamps[0], stamps[-1])
        jobs = bisect.bisect_right(stamps, last) - bisect.bisect_left(stamps, first)
        rate = (jobs - 1) / (max(last - first, 1) / 1e9) if jobs > 1 else 0.0
        out: dict[str, Any] = {"jobs/s": rate, "processes": processes,
                               "steady": None if window is None else jobs / n}  # fmt: skip
        cpu = sampler.per_job(stamps, first, last)
        if cpu is not None:
            out["cpu"] = cpu
        held = _lock_held(logs)
        if held is not None:
            out["lock ns"], out["transactions"], out["inside ns"] = held
    return out


def _count_lines(logs: Path) -> int:
    total = 0
    for path in logs.glob("*.log"):
        with contextlib.suppress(OSError):
            total += path.read_bytes().count(b"\n")
    return total


def _wait(system: DrainSystem, procs: list[subprocess.Popen[bytes]], logs: Path, n: int,
          sampler: CpuSampler | None = None) -> None:  # fmt: skip
    deadline = time.monotonic() + TIMEOUT
    stopping = False
    while any(p.poll() is None for p in procs):
        if sampler is not None:
            sampler.sample()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{system.name}: the drain did not finish in {TIMEOUT:.0f} s")
        if not system.stops_itself and not stopping and _count_lines(logs) >= n:
            for proc in procs:
                proc.send_signal(signal.SIGINT)  # graceful for huey's consumer
            stopping = True
            deadline = time.monotonic() + 60
        time.sleep(0.05)


@dataclass(frozen=True)
class CpuPerJob:
    """CPU time spent per job while jobs ran (from the first job's log line to the last):
    the whole machine's, and the part of it in the worker processes (the rest is the
    database server, where there is one, and whatever else ran)."""

    machine_us: float
    workers_us: float
    busy: float  # the machine's cores busy, on average (2.0: two cores all the time)

    def __str__(self) -> str:
        return (f"CPU {self.machine_us:.0f} µs per job ({self.workers_us:.0f} in the "
                f"workers), {self.busy:.2f} of {os.cpu_count()} cores busy")  # fmt: skip


class CpuSampler:
    """What bounds a drain on a small machine: samples the machine's busy CPU time
    (``/proc/stat``) and the worker processes' own (``/proc/<pid>/stat``, their threads
    included) while they run, so the CPU spent per job can be read off the span the
    jobs' own log lines cover (start-up and shutdown left out). Linux only; elsewhere
    it measures nothing."""

    _TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def __init__(self, pids: list[int]) -> None:
        self._pids = pids
        self._samples: list[tuple[int, float, float]] = []  # (time ns, machine s, workers s)
        self.sample()

    def sample(self) -> None:
        try:
            with open("/proc/stat", "rb") as f:
                fields = f.readline().split()[1:]
        except OSError:
            return
        # user nice system idle iowait irq softirq steal: busy is all but idle and iowait
        ticks = [int(x) for x in fields[:8]]
        busy = sum(ticks) - ticks[3] - ticks[4]
        workers = 0
        for pid in self._family():
            workers += cpu_ticks(pid) or 0
        self._samples.append((time.time_ns(), busy / self._TICK, workers / self._TICK))

    def _family(self) -> set[int]:
        """The worker processes and theirs (huey's consumer runs its workers as its own
        children)."""
        found, todo = set(), list(self._pids)
        while todo:
            pid = todo.pop()
            if pid in found:
                continue
            found.add(pid)
            for children in Path(f"/proc/{pid}/task").glob("*/children"):
                with contextlib.suppress(OSError, ValueError):
                    todo += [int(c) for c in children.read_text().split()]
        return found

    def per_job(self, stamps: list[int], first: int, last: int) -> CpuPerJob | None:
        """The CPU spent per job between the first sample after ``first`` and the last
        sample before ``last`` (None if that was too short to tell)."""
        if len(stamps) < 2 or len(self._samples) < 2:
            return None
        inside = [s for s in self._samples if first <= s[0] <= last]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < 100_000_000:  # 0.1 s at least
            return None
        (t0, m0, w0), (t1, m1, w1) = inside[0], inside[-1]
        jobs = bisect.bisect_right(stamps, t1) - bisect.bisect_left(stamps, t0)
        if jobs <= 0:
            return None
        return CpuPerJob(
            machine_us=(m1 - m0) / jobs * 1e6,
            workers_us=(w1 - w0) / jobs * 1e6,
            busy=(m1 - m0) / ((t1 - t0) / 1e9),
        )


def _read_logs(logs: Path) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """Every job's number, every job's log time in order, and each process's first and
    last job's time (one log per process)."""
    seen: list[int] = []
    stamps: list[int] = []
    spans: list[tuple[int, int]] = []
    for path in logs.glob("*.log"):
        own = []
        for line in path.read_bytes().splitlines():
            number, stamp = line.split()
            seen.append(int(number))
            own.append(int(stamp))
        if own:
            spans.append((min(own), max(own)))
            stamps += own
    if not stamps:
        raise VerificationFailed("drain: no job ran")
    stamps.sort()
    return seen, stamps, spans


def steady_window(
    stamps: list[int], spans: list[tuple[int, int]], processes: int
) -> tuple[int, int] | None:
    """The stretch of a drain while all its processes ran jobs: from the last process's
    first job to the first process's last. Processes started together do not start
    draining together: on two cores each one's start-up (conveyor's imports, say) takes
    CPU from those already draining, and the lighter a system's start-up the less its
    span suffers from it, so a drain timed from its first job to its last was fairer to
    the floor queue than to any system with a real runtime. None when a process ran no
    job, or when the stretch holds under a quarter of them (then the whole span)."""
    if len(spans) < processes:
        return None
    first, last = max(f for f, _ in spans), min(t for _, t in spans)
    if last <= first:
        return None
    inside = bisect.bisect_right(stamps, last) - bisect.bisect_left(stamps, first)
    return (first, last) if inside * 4 >= len(stamps) else None


def _lock_held(logs: Path) -> tuple[int, int, int | None] | None:
    """Nanoseconds the write lock was held, in how many transactions, and (where the
    clock tells) how much of it was spent inside SQLite's own calls."""
    files = list(logs.glob("*.lock"))
    if not files:
        return None
    ns = transactions = inside = 0
    told = True
    for path in files:
        numbers = [int(x) for x in path.read_text().split()]
        ns, transactions = ns + numbers[0], transactions + numbers[1]
        told = told and len(numbers) > 2
        inside += numbers[2] if len(numbers) > 2 else 0
    return ns, transactions, inside if told else None


# -- figures for run.py ---------------------------------------------------------------------
WORKLOAD = "drain, worker processes"
FLOOR = "floor queue"
FLOOR_ONE = "floor queue, 1 process"
LOCK = "write lock held per job"


def figures(system: DrainSystem, workdir: Path, pg_url: str, n: int, peer_n: int,
            processes: int, mariadb_url: str = MARIADB_URL) -> list[Figure]:  # fmt: skip
    """One system's drain with ``processes`` workers (and the floor's with one, too)."""
    backend = system.backend
    out: list[Figure] = []
    ours = system.name == FLOOR or system.name.startswith("conveyor worker")
    result = drain(system, n if ours else peer_n, processes, workdir, pg_url, mariadb_url)
    note = f"{result['processes']} process{'es' if result['processes'] > 1 else ''}"
    note += f"; {result['cpu']}" if "cpu" in result else ""
    if result["processes"] > 1:
        steady = result["steady"]
        note += ("; from the first job to the last" if steady is None
                 else f"; while all ran ({steady:.0%} of the jobs)")  # fmt: skip
    note += f"; {system.note}" if system.note else ""
    out.append(Figure(WORKLOAD, backend, system.name, "jobs/s", result["jobs/s"], note))
    if system.name == FLOOR and processes != 1:
        # The reference of everything that runs in one process (the API loops).
        one = drain(system, n, 1, workdir, pg_url, mariadb_url)
        out.append(Figure(WORKLOAD, backend, FLOOR_ONE, "jobs/s", one["jobs/s"], "1 process"))
    return out


def lock_figures(workdir: Path, n: int) -> list[Figure]:
    """SQLite: the write lock held per job, floor against conveyor's worker, one process
    each (so no time spent waiting for another process's lock is counted)."""
    out = []
    for system in (_floor("sqlite"), _conveyor("sqlite", clocked=True)):
        result = drain(system, n, 1, workdir, "", MARIADB_URL)
        if "lock ns" not in result:
            raise RuntimeError(f"{system.name}: no lock clock was written")
        note = f"{result['transactions']} write transactions for {n} jobs"
        if result["inside ns"] is not None:
            inside = result["inside ns"] / 1000 / n
            note += f"; {inside:.1f} µs of it inside SQLite's calls, the rest Python"
        out.append(Figure(LOCK, "sqlite", system.name, "us", result["lock ns"] / 1000 / n, note))
    return out
