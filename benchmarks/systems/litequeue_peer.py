"""litequeue on SQLite, WAL; it sets synchronous=NORMAL itself, so the benchmark sets it
back to FULL. ``pop()`` locks a message (one commit), ``done()`` marks it (another).
Bulk: ``put()`` in a loop inside one ``transaction()``, its way of batching."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import sqlite_dir
from conveyor.cli.bench import Latency, verify_once

CHUNK = 1000


class LiteQueuePeer:
    name = "litequeue"
    backend = "sqlite"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def _queue(self, folder: Path) -> Any:
        from litequeue import LiteQueue  # type: ignore[import-untyped]

        q = LiteQueue(str(folder / "lq.db"))
        q.conn.execute("PRAGMA synchronous = FULL")
        return q

    def enqueue_one(self, n: int) -> Latency:
        with sqlite_dir(str(self.workdir)) as folder:
            q = self._queue(folder)
            took = []
            for i in range(n):
                started = time.perf_counter()
                q.put(json.dumps({"i": i}))
                took.append(time.perf_counter() - started)
            q.close()
        return Latency.of(took)

    @staticmethod
    def _fill(q: Any, n: int) -> float:
        started = time.perf_counter()
        for start in range(0, n, CHUNK):
            with q.transaction(mode="IMMEDIATE"):
                for i in range(start, min(n, start + CHUNK)):
                    q.put(json.dumps({"i": i}))
        return time.perf_counter() - started

    def bulk(self, n: int) -> float | None:
        with sqlite_dir(str(self.workdir)) as folder:
            q = self._queue(folder)
            took = self._fill(q, n)
            q.close()
        return took

    def drain(self, n: int) -> float:
        with sqlite_dir(str(self.workdir)) as folder:
            q = self._queue(folder)
            self._fill(q, n)
            ran: list[int] = []
            done = 0
            started = time.perf_counter()
            while (message := q.pop()) is not None:
                ran.append(json.loads(message.data)["i"])
                q.done(message.message_id)
                done += 1
            took = time.perf_counter() - started
            q.close()
        verify_once(ran, n, done, what="litequeue drain")
        return took
