"""The values conveyor hands out: jobs, claims, progress and statistics."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from conveyor import crypto as _crypto
from conveyor.codec import DOC, JSON_NAME, to_json


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATUSES

    @property
    def is_active(self) -> bool:
        return self in ACTIVE_STATUSES


ACTIVE_STATUSES = frozenset({Status.PENDING, Status.RUNNING})
FINAL_STATUSES = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})


class ErrorKind(StrEnum):
    RETRYABLE = "retryable"
    TERMINAL = "terminal"


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a job has got. ``checkpoint`` is the last completed item, kept across
    retries and lease recovery so a re-run can resume after it."""

    total: int | None = None
    completed: int | None = None
    failed: int | None = None
    current: Any = None
    checkpoint: Any = None
    detail: Any = None

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        done = (self.completed or 0) + (self.failed or 0)
        return min(1.0, done / self.total)


@dataclass(frozen=True, slots=True)
class AttemptError:
    """One failed attempt, as the job's error history keeps it."""

    attempt: int
    error: str
    kind: ErrorKind
    at: datetime
    worker: str | None = None


_NO_PROGRESS = Progress()


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A job as the database holds it. Its fields are listed here and nowhere else in
    Python: the JSON form (``conveyor.codec``), the HTTP API's schema and the backends'
    row decoder are derived from them. A field's default is its value on a new job."""

    id: int
    queue: str
    task: str
    payload: Any
    key: str | None = None
    status: Status = Status.PENDING
    priority: int = 0
    run_at: datetime
    attempts: int = 0
    max_attempts: int
    claim_id: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    worker: str | None = None
    progress: Progress = _NO_PROGRESS
    result: Any = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime
    # The concurrency group, the jobs this one runs after, and how many of those are
    # not yet satisfied (claimable only at 0).
    group: str | None = None
    depends_on: tuple[int, ...] = ()
    waiting_for: int = 0
    # One entry per failed attempt, oldest first (the latest 20); ``error`` is the last
    # one's text, cleared when the job completes.
    errors: tuple[AttemptError, ...] = ()
    # The workflow run this job is a step of, and the step's name in it (``None`` for a
    # job enqueued on its own).
    workflow_id: int | None = None
    step: str | None = None
    # The W3C trace context of the code that enqueued it (JSON: traceparent, tracestate),
    # when that code was traced (``conveyor.tracing``).
    trace_context: str | None = None
    # True when enqueue returned an existing job for the key instead of creating one.
    deduplicated: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        # In a process that holds encryption keys, sealed values open as the job is made
        # (``conveyor.crypto``); elsewhere (a server, the console) they stay sealed.
        if _crypto.keyring is not None:
            if _crypto.sealed(self.payload):
                object.__setattr__(self, "payload", _crypto.keyring.open(self.payload))
            if _crypto.sealed(self.result):
                object.__setattr__(self, "result", _crypto.keyring.open(self.result))

    @property
    def is_final(self) -> bool:
        return self.status.is_final

    def to_dict(self) -> dict[str, Any]:
        """The job's JSON form (``conveyor.codec``): times as ISO 8601 strings."""
        result: dict[str, Any] = to_json(self)
        return result


@dataclass(frozen=True, slots=True)
class Claim:
    """Jobs claimed together under one claim id. ``remaining`` counts the jobs of the
    queue that are claimable now (``None`` when the claim was made without counting)."""

    id: str = field(metadata={JSON_NAME: "claim_id"})
    queue: str
    jobs: list[Job]
    remaining: int | None = field(default=None, metadata={DOC: "jobs of the queue claimable now"})
    acked: int = field(default=0, metadata={DOC: "jobs of the acknowledged claim completed first"})
    reported: dict[int, Status] = field(
        default_factory=dict,
        metadata={DOC: "new status of each job whose ending was reported with the claim"},
    )

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs)


@dataclass(frozen=True, slots=True)
class Stats:
    pending: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    oldest_pending_at: datetime | None = None
    scheduled: int = field(default=0, metadata={DOC: "pending jobs whose run_at is in the future"})
    expired: int = field(default=0, metadata={DOC: "running jobs whose lease has expired"})
    # Every job, whatever its status: derived from the counts above.
    total: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        total = self.pending + self.running + self.completed + self.failed + self.cancelled
        object.__setattr__(self, "total", total)

    def to_dict(self) -> dict[str, Any]:
        """The counts' JSON form (``conveyor.codec``)."""
        result: dict[str, Any] = to_json(self)
        return result


def sum_stats(parts: Iterable[Stats]) -> Stats:
    """The counts of several queues added up; the oldest pending job of them all."""
    items = list(parts)
    oldest = [p.oldest_pending_at for p in items if p.oldest_pending_at is not None]
    return Stats(
        pending=sum(p.pending for p in items),
        running=sum(p.running for p in items),
        completed=sum(p.completed for p in items),
        failed=sum(p.failed for p in items),
        cancelled=sum(p.cancelled for p in items),
        oldest_pending_at=min(oldest) if oldest else None,
        scheduled=sum(p.scheduled for p in items),
        expired=sum(p.expired for p in items),
    )
