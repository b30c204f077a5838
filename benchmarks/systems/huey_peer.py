"""huey (``SqliteHuey``) on SQLite, WAL with ``fsync=True`` (synchronous=FULL).

Enqueue one calls the task, as huey's users do. huey has no batch enqueue, so bulk is
reported as not available. Its drain (``huey_consumer``) is in ``benchmarks.drains``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness import Timed, sqlite_dir, time_calls


class HueyPeer:
    name = "huey"
    backend = "sqlite"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def _huey(self, folder: Path) -> tuple[Any, Any]:
        from huey import SqliteHuey  # type: ignore[import-untyped]

        huey = SqliteHuey(name="bench", filename=str(folder / "huey.db"), fsync=True,
                          journal_mode="wal")  # fmt: skip

        @huey.task()  # type: ignore[untyped-decorator]
        def noop(i: int) -> None:
            pass

        return huey, noop

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        with sqlite_dir(str(self.workdir)) as folder:
            huey, noop = self._huey(folder)
            lat: Timed = time_calls(noop, n, warmup)
            huey.storage.close()
        return lat

    def bulk(self, n: int) -> float | None:
        return None
