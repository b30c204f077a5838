"""The download bot's budget, measured: enqueue < 10 ms, dequeue < 5 ms, < 10 MB of
memory for queue management, with 100+ jobs queued.

``examples.download_queue.DownloadQueue`` is timed call by call, in this process against
SQLite and PostgreSQL, and through ``conveyor serve`` (the same class given the server's
http:// URL). Figures, not assertions:

    python benchmarks/download_queue.py                  # 1,000 jobs, every target
    python benchmarks/download_queue.py --jobs 200 --targets sqlite,serve --json

Per target: latency percentiles of ``enqueue``, ``dequeue`` (the oldest queued job, with
every job still queued), and the worker loop's ``dequeue``, ``mark_in_progress`` and
``mark_completed`` while the queue drains; memory as the growth of this process's
resident set from just before the queue is opened to the end of the workload (the
interpreter and the imports come before), and for ``serve`` the server's growth too.
SQLite runs at conveyor's default durability (WAL, ``synchronous=FULL``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.download_queue import DownloadQueue  # noqa: E402

PG_URL = os.environ.get("CONVEYOR_BENCH_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
BUDGET_MS = {"enqueue": 10.0, "dequeue": 5.0}
BUDGET_MB = 10.0


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size now (Linux), in MB."""
    with open(f"/proc/{pid}/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)

    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": at(0.95),
        "p99_ms": at(0.99),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


def timed(call: Callable[[], Any], into: list[float]) -> Any:
    started = time.perf_counter()
    result = call()
    into.append(time.perf_counter() - started)
    return result


def seed_history(url: str, finished: int) -> None:
    """``finished`` completed downloads already in the queue, as weeks of use leave them
    (``DownloadQueue`` prunes them by age: this is the history it keeps)."""
    import conveyor
    from examples.download_queue.queue import QUEUE, TASK

    with conveyor.connect(url) as q:
        left = finished
        while left > 0:
            n = min(left, 1000)
            items = [{"task": TASK, "payload": {"message_id": i + 1, "url": "https://v.example/old"}}
                     for i in range(n)]  # fmt: skip
            q.enqueue_ids(items, queue=QUEUE)
            claim = q.claim(QUEUE, limit=n, count_remaining=False)
            q.ack(claim.id)
            left -= n


def workload(url: str, jobs: int) -> dict[str, Any]:
    """Open a DownloadQueue on ``url`` and run the bot's calls, timing each."""
    before = rss_mb()
    with DownloadQueue(url) as queue:
        enqueue: list[float] = []
        for n in range(1, jobs + 1):
            timed(partial(queue.enqueue, n, f"https://video.example/watch?v={n}"), enqueue)
        peek: list[float] = []
        for _ in range(jobs):
            timed(queue.dequeue, peek)
        drain: dict[str, list[float]] = {"dequeue": [], "mark_in_progress": [],
                                         "mark_completed": []}  # fmt: skip
        while (job := timed(queue.dequeue, drain["dequeue"])) is not None:
            taken = timed(partial(queue.mark_in_progress, job.job_id), drain["mark_in_progress"])
            assert taken, job
            path = f"/dl/{job.message_id}.mp4"
            timed(partial(queue.mark_completed, job.job_id, path), drain["mark_completed"])
        stats = queue.get_stats()
        assert stats.completed_count >= jobs, stats
        assert stats.queued_count == 0, stats
    return {
        "enqueue": percentiles(enqueue),
        "dequeue": percentiles(peek),
        "while_draining": {name: percentiles(s) for name, s in drain.items()},
        "rss_growth_mb": round(rss_mb() - before, 2),
    }


@contextmanager
def sqlite_url() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="dq-bench-")
    try:
        yield f"sqlite:///{folder}/bot.db"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def postgres_url(base: str) -> Iterator[str]:
    import psycopg

    schema = f"dq_bench_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}schema={schema}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def served(db_url: str) -> Iterator[tuple[str, int]]:
    """``conveyor serve`` on a free loopback port; yields its URL and pid."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_TOKENS")}
    server = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "serve", "--db", db_url, "--port", str(port),
         "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                why = server.stderr.read().decode() if server.stderr else ""
                raise RuntimeError(f"conveyor serve did not start: {why}")
            time.sleep(0.05)
        yield url, server.pid
    finally:
        server.terminate()
        server.wait(20)


def run(target: str, jobs: int, pg: str, history: int = 0) -> dict[str, Any]:
    if target == "sqlite":
        with sqlite_url() as url:
            seed_history(url, history)
            return workload(url, jobs)
    if target == "postgresql":
        with postgres_url(pg) as url:
            seed_history(url, history)
            return workload(url, jobs)
    with sqlite_url() as db, served(db) as (url, pid):
        seed_history(db, history)
        server_before = rss_mb(pid)
        result = workload(url, jobs)
        result["http_floor"] = http_floor(url, jobs)
        result["server_rss_growth_mb"] = round(rss_mb(pid) - server_before, 2)
        result["server_rss_mb"] = round(rss_mb(pid), 1)
        return result


def http_floor(url: str, requests: int) -> dict[str, float]:
    """What one HTTP round trip to the server costs at all (``GET /healthz``, kept alive)."""
    import httpx

    samples: list[float] = []
    with httpx.Client(base_url=url) as http:
        for _ in range(requests):
            timed(partial(http.get, "/healthz"), samples)
    return percentiles(samples)


def verdict(result: dict[str, Any]) -> str:
    checks = [
        f"enqueue p99 {result['enqueue']['p99_ms']:.2f} ms"
        + (" ok" if result["enqueue"]["p99_ms"] < BUDGET_MS["enqueue"] else " OVER 10 ms"),
        f"dequeue p99 {result['dequeue']['p99_ms']:.2f} ms"
        + (" ok" if result["dequeue"]["p99_ms"] < BUDGET_MS["dequeue"] else " OVER 5 ms"),
        f"memory +{result['rss_growth_mb']:.1f} MB"
        + (" ok" if result["rss_growth_mb"] < BUDGET_MB else " OVER 10 MB"),
    ]
    return ", ".join(checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per target (default 1000)")
    parser.add_argument(
        "--targets",
        default="sqlite,postgresql,serve",
        help="any of sqlite, postgresql, serve (SQLite behind the server)",
    )
    parser.add_argument(
        "--history", type=int, default=0,
        help="completed jobs already in the queue before the run (default 0)",
    )  # fmt: skip
    parser.add_argument("--pg", default=PG_URL, help="PostgreSQL URL (a schema is made per run)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")  # fmt: skip
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = set(targets) - {"sqlite", "postgresql", "serve"}
    if unknown or args.jobs < 1:
        parser.error(f"unknown target(s) {', '.join(sorted(unknown))}" if unknown else "--jobs")
    if args.history < 0:
        parser.error("--history: expected 0 or more")
    results: dict[str, Any] = {
        "jobs": args.jobs,
        "history": args.history,
        "python": sys.version.split()[0],
    }
    for target in targets:
        results[target] = run(target, args.jobs, args.pg, args.history)
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"DownloadQueue, {args.jobs} jobs per target, {args.history} finished before "
          "(budget: enqueue < 10 ms, dequeue < 5 ms, memory < 10 MB)")  # fmt: skip
    header = f"{'target':<11} {'call':<28} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    print(header)
    for target in targets:
        r = results[target]
        rows = [("enqueue", r["enqueue"]), ("dequeue (all queued)", r["dequeue"])]
        rows += [(f"drain: {name}", figures) for name, figures in r["while_draining"].items()]
        if "http_floor" in r:
            rows.append(("(GET /healthz round trip)", r["http_floor"]))
        for name, f in rows:
            print(f"{target:<11} {name:<28} {f['p50_ms']:>8.3f} {f['p95_ms']:>8.3f} "
                  f"{f['p99_ms']:>8.3f} {f['max_ms']:>8.3f}")  # fmt: skip
        memory = f"{target:<11} memory: this process +{r['rss_growth_mb']:.1f} MB"
        if "server_rss_growth_mb" in r:
            memory += (f", the server +{r['server_rss_growth_mb']:.1f} MB"
                       f" (RSS {r['server_rss_mb']:.0f} MB)")  # fmt: skip
        print(memory)
        print(f"{target:<11} {verdict(r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
