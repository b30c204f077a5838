"""persist-queue (``SQLiteAckQueue``) on SQLite, WAL with synchronous=FULL.

Its acknowledged queue is the one comparable to a job queue: ``get()`` marks an item
unacked (one commit), ``ack()`` marks it done (a second commit). No batch enqueue."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.harness import sqlite_dir
from conveyor.cli.bench import Latency, verify_once


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

    def enqueue_one(self, n: int) -> Latency:
        with sqlite_dir(str(self.workdir)) as folder:
            q = self._queue(folder)
            took = []
            for i in range(n):
                started = time.perf_counter()
                q.put({"i": i})
                took.append(time.perf_counter() - started)
            q.close()
        return Latency.of(took)

    def bulk(self, n: int) -> float | None:
        return None

    def drain(self, n: int) -> float:
        from persistqueue import Empty

        with sqlite_dir(str(self.workdir)) as folder:
            q = self._queue(folder)
            self._sync(q, "OFF")  # filling is not measured
            for i in range(n):
                q.put({"i": i})
            self._sync(q, "FULL")
            ran: list[int] = []
            acked = 0
            started = time.perf_counter()
            while True:
                try:
                    item = q.get(block=False)
                except Empty:
                    break
                ran.append(item["i"])
                acked += q.ack(item) is not None
            took = time.perf_counter() - started
            q.close()
        verify_once(ran, n, acked, what="persist-queue drain")
        return took
