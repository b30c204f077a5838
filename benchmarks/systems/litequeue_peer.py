"""litequeue on SQLite, WAL; it sets synchronous=NORMAL itself, so the benchmark sets it
back to FULL. Enqueue one is ``put()``. Bulk: ``put()`` in a loop inside one
``transaction()``, its way of batching, 1,000 per transaction. Its drain (``pop()`` /
``done()`` in worker processes) is in ``benchmarks.drains``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Timed, sqlite_dir, time_calls

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

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        with sqlite_dir(str(self.workdir)) as folder:
            q = self._queue(folder)
            lat: Timed = time_calls(lambda i: q.put(json.dumps({"i": i})), n, warmup)
            q.close()
        return lat

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
