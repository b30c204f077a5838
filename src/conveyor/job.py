"""The values conveyor hands out: jobs, claims, progress and statistics."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


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


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    queue: str
    task: str
    payload: Any
    key: str | None
    status: Status
    priority: int
    run_at: datetime
    attempts: int
    max_attempts: int
    claim_id: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    heartbeat_at: datetime | None
    worker: str | None
    progress: Progress
    result: Any
    error: str | None
    error_kind: ErrorKind | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    # The concurrency group, the jobs this one runs after, and how many of those are
    # not yet satisfied (claimable only at 0).
    group: str | None = None
    depends_on: tuple[int, ...] = ()
    waiting_for: int = 0
    # One entry per failed attempt, oldest first (the latest 20); ``error`` is the last
    # one's text, cleared when the job completes.
    errors: tuple[AttemptError, ...] = ()
    # True when enqueue returned an existing job for the key instead of creating one.
    deduplicated: bool = field(default=False, compare=False)

    @property
    def is_final(self) -> bool:
        return self.status.is_final

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: times as ISO 8601 strings."""
        return {name: _plain(getattr(self, name)) for name in self.__dataclass_fields__}


def _plain(value: Any) -> Any:
    """A value of a job as JSON holds it."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, (Progress, AttemptError)):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Claim:
    """Jobs claimed together under one claim id. ``remaining`` counts the jobs of the
    queue that are claimable now (``None`` when the claim was made without counting)."""

    id: str
    queue: str
    jobs: list[Job]
    remaining: int | None = None
    acked: int = 0

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
    # Pending jobs whose run_at is still in the future (scheduled or backing off).
    scheduled: int = 0
    # Running jobs whose lease has expired (their worker is presumed dead).
    expired: int = 0

    @property
    def total(self) -> int:
        return self.pending + self.running + self.completed + self.failed + self.cancelled

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if self.oldest_pending_at is not None:
            out["oldest_pending_at"] = self.oldest_pending_at.isoformat()
        out["total"] = self.total
        return out


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
