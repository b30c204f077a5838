"""The pruners: delete final jobs once they are older than their retention.

``RetentionPruner`` applies the retention policies stored in the database
(``Queue.set_retention``), a small batch per transaction with a pause between, so that
claims keep their latency while a large backlog is pruned; every worker runs it. Before
a job is deleted its record goes to its archive, if it has one: an archive task's jobs
are enqueued in the transaction that deletes the records they carry; a file receives
the records, flushed to disk, before the transaction that deletes them, so a crash in
between writes them again at the next pass (at least once, never deleted unarchived).

``Pruner`` is the older per-status retention a worker is given (``--retain``)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from conveyor import validation as check
from conveyor.contract import QueueAPI
from conveyor.info import ExpiredJob
from conveyor.job import Status
from conveyor.ops.retention import archive_target, record
from conveyor.queue import Duration, Queue
from conveyor.retry import seconds

log = logging.getLogger("conveyor.pruner")

DEFAULT_BATCH = 500
DEFAULT_PAUSE = 0.05
DEFAULT_MAX_BATCHES = 200


@dataclass(frozen=True, slots=True)
class Retention:
    """How long to keep final jobs, per status, after they finished; ``None`` keeps
    them forever. Durations as ``timedelta`` or seconds."""

    completed: Duration | None = timedelta(days=7)
    failed: Duration | None = timedelta(days=30)
    cancelled: Duration | None = timedelta(days=7)

    def ages(self) -> dict[Status, float]:
        """``{status: seconds}`` for the statuses that are pruned."""
        wanted = {
            Status.COMPLETED: self.completed,
            Status.FAILED: self.failed,
            Status.CANCELLED: self.cancelled,
        }
        return {
            s: seconds(age, f"retention of {s}") for s, age in wanted.items() if age is not None
        }


class Pruner:
    name = "pruner"

    def __init__(self, queue: Queue, retention: Retention) -> None:
        self.queue = queue
        self.ages = retention.ages()  # checked now, not at the first pass

    def run_once(self) -> int:
        """One pass; returns how many jobs were deleted. Deleting is idempotent, so
        passes by several workers at once only share the work."""
        removed = 0
        for status, age in self.ages.items():
            removed += self.queue.prune(older_than=age, statuses=(status,))
        if removed:
            log.info("pruned %d final job(s)", removed)
        return removed


def append_records(path: str, expired: Sequence[ExpiredJob]) -> None:
    """Each job's record as one JSON line at the end of ``path``, on disk (fsync) when
    this returns."""
    lines = "".join(
        json.dumps(record(e.job), ensure_ascii=False, separators=(",", ":")) + "\n" for e in expired
    )
    with open(path, "a", encoding="utf-8") as out:
        out.write(lines)
        out.flush()
        os.fsync(out.fileno())


class RetentionPruner:
    """Applies the stored retention policies: ``batch`` jobs (at most 1,000) per
    transaction, ``pause`` seconds between batches, at most ``max_batches`` per pass (a
    pass that stops there with jobs left is followed by the next at once). ``archive``
    (``"task:NAME"`` or ``"file:PATH"``) receives the records of jobs whose policy names
    no archive of its own. ``stopping``: an event that ends a pass between batches."""

    name = "retention"

    def __init__(
        self,
        queue: QueueAPI,
        *,
        batch: int = DEFAULT_BATCH,
        pause: Duration = DEFAULT_PAUSE,
        max_batches: int = DEFAULT_MAX_BATCHES,
        archive: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        stopping: threading.Event | None = None,
    ) -> None:
        self.queue = queue
        self.batch = check.integer(batch, "batch", low=1, high=1000)
        self.pause = seconds(pause, "pause")
        self.max_batches = check.integer(max_batches, "max_batches", low=1, high=1_000_000)
        self.archive = archive_target(archive)
        self._sleep = sleep
        self._stopping = stopping
        self.behind = False  # the last pass stopped at max_batches with jobs left

    def run_once(self) -> int:
        """One pass: batches until none is left (or ``max_batches``); returns how many
        jobs were deleted. Passes by several workers at once share the work: a job is
        deleted once, and its record may reach a file archive more than once."""
        removed = 0
        after: int | None = None  # the pass walks on by id, past the rows it deleted
        self.behind = False
        for n in range(self.max_batches):
            if n:
                if self._stopping is None:
                    self._sleep(self.pause)
                elif self._stopping.wait(self.pause):
                    break  # the worker stops: the next pass, anyone's, goes on
            expired = self.queue.expired_jobs(limit=self.batch, archive=self.archive, after=after)
            if not expired:
                break
            after = expired[-1].job.id
            files: dict[str, list[ExpiredJob]] = {}
            for e in expired:
                if e.archive is not None and e.archive.startswith("file:"):
                    files.setdefault(e.archive[5:], []).append(e)
            for path, records in files.items():
                append_records(path, records)
            gone = self.queue.prune_expired([e.job.id for e in expired], archive=self.archive)
            removed += gone
            if len(expired) < self.batch:
                break
        else:  # the batch limit, with more to prune: the next pass follows at once
            self.behind = removed > 0
        if removed:
            log.info("pruned %d final job(s) under the retention policies", removed)
        return removed
