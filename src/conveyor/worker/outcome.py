"""``Outcome``: how one run of a task ended, as the completer will write it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conveyor import validation as check
from conveyor.errors import InvalidArgument
from conveyor.job import Job

# Tracebacks can be long; the end is where the cause is.
MAX_ERROR_CHARS = 8000


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of one run: a result, an error to record, or a snooze (``snooze``: the
    delay in seconds before the job runs again, no attempt spent)."""

    job: Job
    result: Any = None
    error: str | None = None
    retryable: bool = False
    delay: float = 0.0
    snooze: float | None = None

    @property
    def completed(self) -> bool:
        return self.error is None and self.snooze is None

    @property
    def claim_id(self) -> str:
        assert self.job.claim_id is not None
        return self.job.claim_id


def succeeded(job: Job, result: Any, *, max_bytes: int) -> Outcome:
    """A returned value, checked now so one bad result cannot spoil a whole batch."""
    try:
        check.encode_json(result, "result", max_bytes=max_bytes)
    except InvalidArgument as exc:
        return failed(job, f"the task returned a value conveyor cannot store: {exc}")
    return Outcome(job, result=result)


def failed(job: Job, error: str, *, retryable: bool = False, delay: float = 0.0) -> Outcome:
    return Outcome(job, error=error[-MAX_ERROR_CHARS:], retryable=retryable, delay=delay)


def snoozed(job: Job, delay: float) -> Outcome:
    return Outcome(job, snooze=delay)
