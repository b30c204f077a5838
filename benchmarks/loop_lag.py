"""How late a FastAPI application's event loop runs while it serves concurrent requests
that enqueue jobs (docs/frameworks.md).

The server is the FastAPI example (examples/frameworks/fastapi_app) under uvicorn, in a
process of its own, with a probe task that asks to be woken every 5 ms and records how
late it is woken: the loop's lag, the time during which no request could make progress.
A client sends the concurrent requests over HTTP (httpx): half enqueue a job inside the
request's transaction, half read. With ``--hold S`` another process holds SQLite's write
lock for S seconds meanwhile, so every enqueue has to wait for it. ``--blocking`` sends
the enqueues to a control route that calls the synchronous ``Queue.enqueue`` inside
``async def`` (the mistake ``AsyncQueue`` exists to avoid), to show what a blocked loop
looks like to the probe.

    python -m benchmarks.loop_lag                        # SQLite, 200 requests, lock held 3 s
    python -m benchmarks.loop_lag --blocking             # the control
    python -m benchmarks.loop_lag --db postgresql://…/db --hold 0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

import conveyor
from examples.frameworks.fastapi_app import app as example
from examples.frameworks.fastapi_app.app import SignupIn
from examples.frameworks.fastapi_app.tasks import welcome

ROOT = Path(__file__).resolve().parents[1]
PROBE_INTERVAL = 0.005
# Holds SQLite's write lock from another process: prints "locked", then the wall-clock
# time just before it let go (the lock was still held then).
_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
held_until = time.time()
conn.execute("COMMIT")
print(held_until, flush=True)
"""


# -- the server process -------------------------------------------------------------
def serve(port: int) -> None:
    """The example application, plus a lag probe (``/_probe``) and the blocking control
    route (``/_blocking/signups``); run in the server process."""
    app: FastAPI = example.app
    lags: list[float] = []
    blocking: dict[str, conveyor.Queue] = {}

    async def probe() -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(PROBE_INTERVAL)
            lags.append(loop.time() - start - PROBE_INTERVAL)

    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[None]:
        async with inner(app_):
            blocking["queue"] = conveyor.connect(os.environ["CONVEYOR_DATABASE_URL"])
            task = asyncio.create_task(probe())
            try:
                yield
            finally:
                task.cancel()
                blocking["queue"].close()

    app.router.lifespan_context = lifespan

    @app.post("/_probe/reset")
    async def reset() -> dict[str, int]:
        lags.clear()
        return {"samples": 0}

    @app.get("/_probe")
    async def figures() -> dict[str, float]:
        seen = sorted(lags) or [0.0]
        return {
            "samples": len(lags),
            "p50": seen[len(seen) // 2],
            "p99": seen[min(len(seen) - 1, int(len(seen) * 0.99))],
            "max": seen[-1],
        }

    @app.post("/_blocking/signups", status_code=201)
    async def blocking_signup(body: SignupIn) -> dict[str, int]:
        job = blocking["queue"].enqueue(welcome.name, {"email": body.email})  # blocks the loop
        return {"welcome_job": job.id}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@contextlib.contextmanager
def server(url: str) -> Iterator[str]:
    """The server process on a free port; yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CONVEYOR_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.loop_lag", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/queue/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start within 60 s")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def write_lock(url: str, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the SQLite database's write lock for ``seconds``."""
    path = url.removeprefix("sqlite:///")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, path, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "locked":
            raise RuntimeError("the lock holder did not take the lock")
        yield holder
    finally:
        holder.wait(seconds + 30)


# -- the load -------------------------------------------------------------------------
@dataclass
class Run:
    requests: int
    failed: int
    lag: dict[str, float]
    read_ms: list[float]  # each read's latency
    enqueue_ms: list[float]
    reads_done_at: list[float]  # the wall-clock time each read was answered
    enqueues_done_at: list[float]
    lock_held_until: float | None = None  # the lock was held at least until then

    def summary(self) -> dict[str, Any]:
        def pct(values: list[float], q: float) -> float:
            seen = sorted(values) or [0.0]
            return seen[min(len(seen) - 1, int(len(seen) * q))]

        return {
            "requests": self.requests,
            "failed": self.failed,
            "lag_p50_ms": round(self.lag["p50"] * 1000, 1),
            "lag_p99_ms": round(self.lag["p99"] * 1000, 1),
            "lag_max_ms": round(self.lag["max"] * 1000, 1),
            "probe_samples": int(self.lag["samples"]),
            "read_p50_ms": round(statistics.median(self.read_ms or [0]), 1),
            "read_p99_ms": round(pct(self.read_ms, 0.99), 1),
            "enqueue_p50_ms": round(statistics.median(self.enqueue_ms or [0]), 1),
            "enqueue_max_ms": round(max(self.enqueue_ms or [0]), 1),
        }


async def prepare(base: str) -> str:
    """A signup to read during the load; returns its path."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        first = await client.post("/signups", json={"email": "first@example.com"})
        first.raise_for_status()
        return f"/signups/{first.json()['id']}"


async def load(base: str, reader: str, requests: int, *, blocking: bool = False) -> Run:
    """``requests`` concurrent requests, half enqueueing and half reading ``reader``."""
    limits = httpx.Limits(max_connections=requests, max_keepalive_connections=requests)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as client:
        signup = "/_blocking/signups" if blocking else "/signups"
        await client.post("/_probe/reset")
        read_ms: list[float] = []
        enqueue_ms: list[float] = []
        read_at: list[float] = []
        enqueued_at: list[float] = []

        async def one(i: int) -> bool:
            started = time.perf_counter()
            if i % 2:
                answer = await client.get(reader)
                read_ms.append((time.perf_counter() - started) * 1000)
                read_at.append(time.time())
                return answer.status_code == 200
            answer = await client.post(signup, json={"email": f"user{i}@example.com"})
            enqueue_ms.append((time.perf_counter() - started) * 1000)
            enqueued_at.append(time.time())
            return answer.status_code == 201

        results = await asyncio.gather(*(one(i) for i in range(requests)))
        lag = (await client.get("/_probe")).json()
    return Run(requests, results.count(False), lag, read_ms, enqueue_ms, read_at, enqueued_at)


def measure(url: str, requests: int, *, hold: float, blocking: bool = False) -> Run:
    """One run against a fresh server on ``url``: with ``hold`` (SQLite), while another
    process holds the write lock for that long."""
    with server(url) as base:
        reader = asyncio.run(prepare(base))
        if not (hold and url.startswith("sqlite:///")):
            return asyncio.run(load(base, reader, requests, blocking=blocking))
        with write_lock(url, hold) as holder:
            run = asyncio.run(load(base, reader, requests, blocking=blocking))
        assert holder.stdout is not None
        run.lock_held_until = float(holder.stdout.readline())
        return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.loop_lag")
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("--port", type=int, required=True)
    parser.add_argument("--db", help="database URL (default: a temporary SQLite file)")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--hold", type=float, default=3.0, help="seconds the lock is held")
    parser.add_argument("--blocking", action="store_true", help="the blocking control")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.port)
        return
    with tempfile.TemporaryDirectory(prefix="conveyor-lag-") as folder:
        url = args.db or f"sqlite:///{Path(folder) / 'lag.db'}"
        run = measure(url, args.requests, hold=args.hold, blocking=args.blocking)
    where = "PostgreSQL" if url.startswith("postgres") else "SQLite"
    held = f", write lock held {args.hold:g} s by another process" if args.hold and (
        where == "SQLite") else ""  # fmt: skip
    mode = "sync Queue.enqueue in async def (control)" if args.blocking else "AsyncQueue"
    print(f"{args.requests} concurrent requests on {where}{held}; enqueue via {mode}")
    for key, value in run.summary().items():
        print(f"  {key:>16}: {value}")


if __name__ == "__main__":
    main()
