"""huey (``SqliteHuey``) on SQLite, WAL with ``fsync=True`` (synchronous=FULL).

Drain runs huey's own consumer step, ``dequeue()`` then ``execute()``, in a loop: what a
huey worker thread does, minus its idle sleeps. Each dequeue deletes the row in its own
commit. huey has no batch enqueue, so bulk is reported as not available."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.harness import sqlite_dir
from conveyor.cli.bench import Latency, verify_once


class HueyPeer:
    name = "huey"
    backend = "sqlite"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def _huey(self, folder: Path) -> tuple[Any, Any, list[int]]:
        from huey import SqliteHuey  # type: ignore[import-untyped]

        huey = SqliteHuey(name="bench", filename=str(folder / "huey.db"), fsync=True,
                          journal_mode="wal")  # fmt: skip
        ran: list[int] = []

        @huey.task()  # type: ignore[untyped-decorator]
        def noop(i: int) -> None:
            ran.append(i)

        return huey, noop, ran

    def enqueue_one(self, n: int) -> Latency:
        with sqlite_dir(str(self.workdir)) as folder:
            _huey, noop, _ = self._huey(folder)
            took = []
            for i in range(n):
                started = time.perf_counter()
                noop(i)
                took.append(time.perf_counter() - started)
        return Latency.of(took)

    def bulk(self, n: int) -> float | None:
        return None

    def drain(self, n: int) -> float:
        with sqlite_dir(str(self.workdir)) as folder:
            huey, noop, ran = self._huey(folder)
            # Filling is not measured: skip the per-job fsync there, restore it after.
            huey.storage.conn.execute("PRAGMA synchronous = OFF")
            for i in range(n):
                noop(i)
            huey.storage.conn.execute("PRAGMA synchronous = FULL")
            started = time.perf_counter()
            while (task := huey.dequeue()) is not None:
                huey.execute(task)
            took = time.perf_counter() - started
            huey.storage.close()
        verify_once(ran, n, len(ran), what="huey drain")
        return took
