"""persist-queue (``SQLiteAckQueue``) on SQLite, WAL with synchronous=FULL.

Its acknowledged queue is the one comparable to a job queue. Enqueue one is ``put()``;
no batch enqueue. Its drain (``get()`` / ``ack()``) is in ``benchmarks.drains``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness import Timed, sqlite_dir, time_calls


class PersistQueuePeer:
    name = "persist-queue"
    backend = "sqlite"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def _queue(self, folder: Path) -> Any:
        from persistqueue import SQLiteAckQueue

        q = SQLiteAckQueue(str(folder / "pq"), auto_commit=True, multithreading=True)
        self._sync(q, "FULL")
        return q

    @staticmethod
    def _sync(q: Any, level: str) -> None:
        for conn in {id(q._putter): q._putter, id(q._getter): q._getter}.values():
            conn.execute(f"PRAGMA synchronous = {level}")

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        with sqlite_dir(str(self.workdir)) as folder:
            q = self._queue(folder)
            lat: Timed = time_calls(lambda i: q.put({"i": i}), n, warmup)
            q.close()
        return lat

    def bulk(self, n: int) -> float | None:
        return None
