"""What conveyor tells about queues, workers and schedules, beside the jobs themselves:
flow-control settings, the worker registry, periodic schedules and throughput."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conveyor import validation as check
from conveyor.errors import InvalidArgument
from conveyor.job import Job
from conveyor.retry import seconds


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``limit`` job starts in any window of ``per`` (a sliding window)."""

    limit: int
    per: float

    def __init__(self, limit: int, per: timedelta | float = 1.0) -> None:
        object.__setattr__(self, "limit", check.integer(limit, "rate limit", low=1))
        object.__setattr__(self, "per", seconds(per, "rate period", allow_zero=False))

    @classmethod
    def parse(cls, value: Any, what: str = "rate") -> Rate:
        """A ``Rate``, or text ``"10/1s"``, ``"100/m"`` (count per period)."""
        if isinstance(value, Rate):
            return value
        if isinstance(value, str) and "/" in value:
            count, _, period = value.partition("/")
            units = {"s": 1.0, "m": 60.0, "h": 3600.0}
            period = period.strip() or "s"
            unit = period[-1] if period[-1] in units else "s"
            number = period[:-1] if period[-1] in units else period
            try:
                return cls(int(count), float(number or 1) * units[unit])
            except (ValueError, InvalidArgument):
                pass
        raise InvalidArgument(f"{what}: expected a Rate or text such as '10/1s', got {value!r}")

    def __str__(self) -> str:
        return f"{self.limit}/{self.per:g}s"


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """A queue's flow control. ``max_running``: jobs of the queue running at once, on
    all workers together. ``group_max_running``: the same for each group of the queue.
    ``rate``/``group_rate``: starts per window, for the queue and for each group."""

    queue: str
    paused: bool = False
    max_running: int | None = None
    group_max_running: int | None = None
    rate: Rate | None = None
    group_rate: Rate | None = None
    updated_at: datetime | None = None

    @property
    def controlled(self) -> bool:
        return self.paused or any(
            v is not None
            for v in (self.max_running, self.group_max_running, self.rate, self.group_rate)
        )


@dataclass(frozen=True, slots=True)
class BusyJob:
    """A job a worker's task is running: its function was called at ``started_at`` (a
    job claimed ahead, waiting for a free slot, is not busy yet)."""

    id: int
    started_at: datetime


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker as it registered itself; ``last_seen_at`` moves with its heartbeats."""

    name: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    version: str
    started_at: datetime
    last_seen_at: datetime
    expires_at: datetime
    running: int
    busy: tuple[BusyJob, ...] = ()  # as of last_seen_at


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A periodic schedule: the last slot that was enqueued and the next one due."""

    name: str
    task: str
    queue: str
    spec: str
    last_slot: datetime | None
    next_slot: datetime | None
    updated_at: datetime

    @property
    def last_run(self) -> datetime | None:
        """The slot last enqueued; None while the schedule has never run (its stored
        ``last_slot`` is then the moment it was first declared)."""
        from conveyor.schedule import last_run

        return last_run(self.spec, self.last_slot)


@dataclass(frozen=True, slots=True)
class TaskTimings:
    """One task over a window of recently finished jobs: how many finished (``runs``),
    how many of them failed, and the median and 95th percentile of the completed runs'
    run time (``finished_at - started_at`` of their last attempt, in seconds; None
    without a completed run)."""

    task: str
    runs: int
    failures: int
    p50_seconds: float | None
    p95_seconds: float | None


@dataclass(frozen=True, slots=True)
class PayloadMatches:
    """Jobs whose payload field has the value sought, newest first, and where to go on:
    ``next_before`` (search again with ``before`` = it), or None once every job was
    walked."""

    jobs: tuple[Job, ...]
    next_before: int | None


@dataclass(frozen=True, slots=True)
class Throughput:
    """Jobs that completed and failed in one minute (``minute`` is its start)."""

    minute: datetime
    completed: int
    failed: int


@dataclass(frozen=True, slots=True)
class ThroughputHour:
    """Jobs that completed and failed in one hour (``hour`` is its start)."""

    hour: datetime
    completed: int
    failed: int


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long final jobs of ``status`` are kept after they finished, for one
    ``queue`` and/or one ``task`` (None: any). ``keep_seconds`` None keeps them for
    ever. ``archive``: where each pruned job's record goes before the job is deleted
    (``"task:NAME"``: a job of that task, in the pruned jobs' queue, carrying their
    records; ``"file:PATH"``: a JSON line each in that file, on the pruning worker's
    machine). ``retire_keys``: the keys of the jobs pruned under it stay taken, as if
    their jobs were still there. The most specific policy of a job wins: queue and
    task, then task, then queue, then the status's default."""

    status: str
    queue: str | None = None
    task: str | None = None
    keep_seconds: float | None = None
    archive: str | None = None
    retire_keys: bool = False
    updated_at: datetime | None = None

    @property
    def keep(self) -> timedelta | None:
        """How long jobs are kept, or None: for ever."""
        return None if self.keep_seconds is None else timedelta(seconds=self.keep_seconds)

    @property
    def rank(self) -> int:
        """How specific it is: 3 queue and task, 2 task, 1 queue, 0 the default."""
        return (2 if self.task is not None else 0) + (1 if self.queue is not None else 0)


@dataclass(frozen=True, slots=True)
class ExpiredJob:
    """A final job its retention policy lets go, with that policy and the archive its
    record goes to first (the policy's, else the pruner's)."""

    job: Job
    policy: RetentionPolicy
    archive: str | None = None
