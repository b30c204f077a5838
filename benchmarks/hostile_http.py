"""What hostile requests cost the HTTP service, in figures.

    python benchmarks/hostile_http.py

1. The JSON depth check on bodies built against it (80 brackets, then an unterminated
   string of escaped quotes), at growing sizes: the check the server runs, and for
   comparison a backtracking string matcher of the kind it replaced (quadratic).
2. A real ``conveyor serve`` on SQLite: how long ``/healthz`` takes to answer while
   hostile 1 MiB bodies are being checked, and while another process holds the
   database's write lock with writes waiting behind it.

Figures only; nothing is asserted.
"""

from __future__ import annotations

import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a script: make `conveyor` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conveyor.web.depth import json_too_deep

# The matcher the depth check used before: correct, but it backtracks over every start
# position of an unterminated string.
_BACKTRACKING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _hostile(size: int) -> bytes:
    return b"[" * 80 + b'"\\' * ((size - 80) // 2)


def _timed(function: object, *args: object) -> float:
    start = time.perf_counter()
    function(*args)  # type: ignore[operator]
    return time.perf_counter() - start


def depth_check() -> None:
    print("depth check on a hostile body (seconds)")
    for size in (4_096, 16_384, 40_000, 262_144, 1_048_576):
        body = _hostile(size)
        now = min(_timed(json_too_deep, body, 72) for _ in range(3))
        line = f"  {size:>9,} bytes: {now:.4f}"
        if size <= 16_384:
            before = _timed(_BACKTRACKING.sub, b"", body)
            line += f"   (backtracking matcher: {before:.3f})"
        print(line)


def _serve(db: Path, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "conveyor", "serve", "--db", f"sqlite:///{db}?timeout=120",
               "--port", str(port), "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("conveyor serve did not start")


def _health_ms(base: str, n: int = 20) -> list[float]:
    out = []
    with httpx.Client(base_url=base, timeout=60) as client:
        for _ in range(n):
            start = time.perf_counter()
            client.get("/healthz")
            out.append((time.perf_counter() - start) * 1000)
            time.sleep(0.02)
    return out


def _describe(name: str, samples: list[float]) -> None:
    samples.sort()
    p90 = samples[int(len(samples) * 0.9) - 1]
    print(f"  {name}: median {statistics.median(samples):.1f} ms, p90 {p90:.1f} ms, "
          f"max {samples[-1]:.1f} ms ({len(samples)} requests)")  # fmt: skip


_HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


def server() -> None:
    with tempfile.TemporaryDirectory() as tmp, socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        db = Path(tmp) / "q.db"
        process = _serve(db, port)
        base = f"http://127.0.0.1:{port}"
        try:
            print("GET /healthz on a real conveyor serve (SQLite)")
            _describe("idle", _health_ms(base))
            stop = threading.Event()

            def attack() -> None:
                body = _hostile(1_048_576)
                headers = {"Content-Type": "application/json"}
                while not stop.is_set():
                    httpx.post(f"{base}/api/jobs", content=body, headers=headers, timeout=60)

            attackers = [threading.Thread(target=attack) for _ in range(4)]
            for thread in attackers:
                thread.start()
            _describe("4 clients sending hostile 1 MiB bodies", _health_ms(base))
            stop.set()
            for thread in attackers:
                thread.join()
            holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(db)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
            assert holder.stdout is not None
            holder.stdout.readline()
            writers = [
                threading.Thread(target=lambda: httpx.post(
                    f"{base}/api/jobs", json={"task": "t"}, timeout=120))
                for _ in range(8)
            ]  # fmt: skip
            for thread in writers:
                thread.start()
            time.sleep(0.3)
            _describe("write lock held elsewhere, 8 writes waiting", _health_ms(base))
            holder.communicate(input=b"", timeout=30)
            for thread in writers:
                thread.join()
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    depth_check()
    server()
