"""conveyor's real worker runtime: ``conveyor worker`` processes running a no-op task.

- drain: N jobs enqueued, then 1 or 4 ``conveyor worker --burst`` processes run them;
  and the deployment docs/deployment.md recommends for this machine (one process on
  SQLite, one per core on PostgreSQL), whose drain the targets table judges.
  Throughput is N over the span from the first job's start to the last job's finish, by
  the database clock (process start-up is left out, as for the peers' workers). Verified:
  every job completed, each claimed exactly once (``attempts == 1``).
- enqueue to start: an idle worker; each round enqueues one job and waits for it; the
  latency is ``started_at - created_at``, both stamped by the database clock.
- memory: the worker's resident set (VmRSS) while idle, and its peak (VmHWM) after it
  ran the drain.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import conveyor
from benchmarks.harness import Figure, Scale, pg_database, sqlite_dir
from conveyor.cli.bench import Latency, VerificationFailed, enqueue_bulk

ROOT = Path(__file__).resolve().parent.parent
APP = "benchmarks.worker_app:app"
QUEUE = "bench"
CONCURRENCIES = (10, 100)  # the CLI's default, and a larger claim batch
# What docs/deployment.md recommends: one worker process on SQLite (its writes are
# serialised anyway), one per core on PostgreSQL; the CLI's default concurrency.
RECOMMENDED = "conveyor worker, recommended"


def recommended(backend: str) -> tuple[int, int]:
    """(processes, threads) of the recommended deployment on this machine."""
    return (1 if backend == "sqlite" else max(1, os.cpu_count() or 1)), CONCURRENCIES[0]


@contextlib.contextmanager
def _database(backend: str, workdir: Path, pg_url: str) -> Iterator[str]:
    if backend == "sqlite":
        with sqlite_dir(str(workdir)) as folder:
            yield f"sqlite:///{folder / 'conveyor.db'}"
    else:
        with pg_database(pg_url) as url:
            yield url


def _spawn(url: str, *, burst: bool, concurrency: int = 10) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [sys.executable, "-m", "conveyor", "worker", "--app", APP, "--db", url,
            "--concurrency", str(concurrency), "--log-level", "warning"]  # fmt: skip
    if burst:
        args.append("--burst")
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def drain(backend: str, workdir: Path, pg_url: str, n: int, processes: int,
          concurrency: int, *, label: str | None = None) -> list[Figure]:  # fmt: skip
    label = label or (f"conveyor worker, {processes} process{'es' if processes > 1 else ''}"
                      f" x {concurrency} threads")  # fmt: skip
    figures: list[Figure] = []
    with _database(backend, workdir, pg_url) as url, conveyor.connect(url) as q:
        enqueue_bulk(q, n, queue=QUEUE)
        workers = [_spawn(url, burst=True, concurrency=concurrency) for _ in range(processes)]
        peak = 0.0
        for proc in workers:
            # Sample the peak while the process is alive: /proc goes away at exit.
            while proc.poll() is None:
                with contextlib.suppress(OSError):
                    peak = max(peak, _peak_mb(proc.pid))
                time.sleep(0.05)
            if proc.returncode != 0:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"worker exited with {proc.returncode}: {err.strip()[-500:]}")
        span, bad = _span_and_repeats(q)
        stats = q.stats(QUEUE)
    if stats.completed != n or stats.pending or stats.running or stats.failed:
        raise VerificationFailed(f"{label}: expected {n} completed, got {stats}")
    if bad:
        raise VerificationFailed(f"{label}: {bad} jobs were claimed more than once")
    how = f"{processes} process{'es' if processes > 1 else ''} x {concurrency} threads"
    note = how if label == RECOMMENDED else ""
    figures.append(Figure("drain", backend, label, "jobs/s", n / span, note))
    if processes == 1 and concurrency == CONCURRENCIES[0]:
        figures.append(Figure("peak memory after drain (VmHWM)", backend, label, "MB", peak))
    return figures


def _span_and_repeats(q: conveyor.Queue) -> tuple[float, int]:
    """(last finish - first start) in seconds, and how many jobs ran more than once."""
    first = last = None
    repeats = 0
    after = 0
    while page := q.jobs(queue=QUEUE, limit=5000, after=after):
        for job in page:
            if job.started_at and (first is None or job.started_at < first):
                first = job.started_at
            if job.finished_at and (last is None or job.finished_at > last):
                last = job.finished_at
            repeats += job.attempts != 1
        after = page[-1].id
    if first is None or last is None:
        raise VerificationFailed("worker drain: no job started or finished")
    return max((last - first).total_seconds(), 1e-3), repeats


def start_latency(backend: str, workdir: Path, pg_url: str, rounds: int) -> list[Figure]:
    label = f"conveyor worker, 1 process x {CONCURRENCIES[0]} threads"
    with _database(backend, workdir, pg_url) as url, conveyor.connect(url) as q:
        proc = _spawn(url, burst=False)
        try:
            _wait_ready(q)
            time.sleep(1.0)  # let it settle into its idle poll
            idle_rss = _rss_mb(proc.pid)
            took = []
            for i in range(rounds):
                job = q.enqueue("bench.noop", {"i": i}, queue=QUEUE)
                done = q.wait(job.id, timeout=10)
                if done.status != conveyor.Status.COMPLETED or done.started_at is None:
                    raise VerificationFailed(f"enqueue to start: job {job.id} is {done.status}")
                took.append((done.started_at - job.created_at).total_seconds())
                time.sleep(0.2)  # idle again before the next one
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    lat = Latency.of(took)
    return [Figure("enqueue to start (idle worker)", backend, label, "p50 ms", lat.p50),
            Figure("enqueue to start (idle worker)", backend, label, "p99 ms", lat.p99),
            Figure("idle memory (VmRSS)", backend, label, "MB", idle_rss)]  # fmt: skip


def _wait_ready(q: conveyor.Queue) -> None:
    """A first job proves the worker is up (its start-up is not what we measure)."""
    job = q.enqueue("bench.noop", {"i": -1}, queue=QUEUE)
    done = q.wait(job.id, timeout=60)
    if not done.is_final:
        raise RuntimeError("the worker did not start within 60 s")


def figures(backend: str, workdir: Path, pg_url: str, scale: Scale) -> list[Figure]:
    processes, threads = recommended(backend)
    out = drain(backend, workdir, pg_url, scale.worker_jobs, processes, threads,
                label=RECOMMENDED)  # fmt: skip
    for concurrency in CONCURRENCIES:
        for processes in (1, 4):  # the recommended deployment is measured above
            out += drain(backend, workdir, pg_url, scale.worker_jobs, processes, concurrency)
    out += start_latency(backend, workdir, pg_url, scale.start_latency_rounds)
    return out
