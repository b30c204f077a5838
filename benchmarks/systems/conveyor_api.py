"""conveyor through its ``Queue`` API: the workloads of ``conveyor bench``, each on a
fresh database (a new SQLite file, or a new PostgreSQL or MariaDB database)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import conveyor
from benchmarks.harness import Timed, server_database, sqlite_dir, time_calls
from conveyor.cli import bench as workloads


class ConveyorAPI:
    name = "conveyor"

    def __init__(self, backend: str, workdir: Path, server_url: str) -> None:
        """``server_url``: the PostgreSQL or MariaDB server (a database of its own each
        time); unused on SQLite."""
        self.backend = backend
        self.workdir = workdir
        self.server_url = server_url

    @contextlib.contextmanager
    def queue(self) -> Iterator[conveyor.Queue]:
        """A migrated queue on an empty database of its own."""
        if self.backend == "sqlite":
            with (
                sqlite_dir(str(self.workdir)) as folder,
                conveyor.connect(f"sqlite:///{folder / 'conveyor.db'}") as q,
            ):
                yield q
            return
        with server_database(self.backend, self.server_url) as url, conveyor.connect(url) as q:
            yield q

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        with self.queue() as q:
            return time_calls(lambda i: q.enqueue(workloads.NOOP_TASK, {"i": i}), n, warmup)

    def bulk(self, n: int) -> float:
        with self.queue() as q:
            return workloads.enqueue_bulk(q, n)

    def drain(self, n: int) -> float:
        with self.queue() as q:
            workloads.enqueue_bulk(q, n)
            return workloads.drain(q, n)


class ConveyorAcked(ConveyorAPI):
    """The same queue drained with ``claim(ack=previous)``: one transaction per batch."""

    name = "conveyor (claim with ack)"

    def drain(self, n: int) -> float:
        with self.queue() as q:
            workloads.enqueue_bulk(q, n)
            return workloads.drain_acked(q, n)


class ConveyorIds(ConveyorAPI):
    """Bulk enqueue through ``enqueue_ids``: the same transactions, only ids back."""

    name = "conveyor (enqueue_ids)"

    def bulk(self, n: int) -> float:
        with self.queue() as q:
            return workloads.enqueue_bulk(q, n, ids=True)
