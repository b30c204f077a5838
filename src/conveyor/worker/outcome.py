"""How a run of a task ends, and how many endings are written at once.

A task's return value becomes the job's result; ``Retry`` and ``Terminal`` say what to
do explicitly; ``Snooze`` puts the job back for later without spending an attempt; any
other exception is retryable unless the task lists the exceptions that are
(``retry_on``). Endings are written with ``complete_many``/``fail_many``/``report``,
whose claim guard silently leaves out jobs the claim no longer holds: those are
*refused*."""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conveyor import validation as check
from conveyor.errors import InvalidArgument, Retry, Snooze, Terminal
from conveyor.job import Job
from conveyor.queue import Queue
from conveyor.retry import BackoffPolicy, seconds

# Tracebacks can be long; the end is where the cause is.
MAX_ERROR_CHARS = 8000


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of one run: a result, an error to record, or a snooze (``snooze``: the
    delay in seconds before the job runs again)."""

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


@dataclass(slots=True)
class Written:
    """What one batch write changed: the jobs as now stored, and the refused outcomes."""

    jobs: list[Job] = field(default_factory=list)
    refused: list[Outcome] = field(default_factory=list)
    snoozed: list[int] = field(default_factory=list)  # ids of the jobs put back for later


def succeeded(job: Job, result: Any, *, max_bytes: int) -> Outcome:
    """A returned value, checked now so one bad result cannot spoil a whole batch."""
    try:
        check.encode_json(result, "result", max_bytes=max_bytes)
    except InvalidArgument as exc:
        return failed(job, f"the task returned a value conveyor cannot store: {exc}")
    return Outcome(job, result=result)


def failed(job: Job, error: str, *, retryable: bool = False, delay: float = 0.0) -> Outcome:
    return Outcome(job, error=error[-MAX_ERROR_CHARS:], retryable=retryable, delay=delay)


def from_exception(
    job: Job,
    exc: BaseException,
    *,
    backoff: BackoffPolicy,
    retry_on: tuple[type[BaseException], ...] | None = None,
) -> Outcome:
    """Classify what a task raised."""
    if isinstance(exc, Snooze):
        return Outcome(job, snooze=exc.delay)
    if isinstance(exc, Terminal):
        return failed(job, _describe(exc, with_traceback=False))
    if isinstance(exc, Retry):
        delay = _requested_delay(exc)
        if delay is None:
            delay = backoff.delay(job.attempts)
        return failed(job, _describe(exc, with_traceback=False), retryable=True, delay=delay)
    retryable = retry_on is None or isinstance(exc, retry_on)
    delay = backoff.delay(job.attempts) if retryable else 0.0
    return failed(job, _describe(exc, with_traceback=True), retryable=retryable, delay=delay)


def _requested_delay(exc: Retry) -> float | None:
    if exc.delay is None:
        return None
    try:
        return seconds(exc.delay, "Retry(delay=)")
    except InvalidArgument:
        return None


def _describe(exc: BaseException, *, with_traceback: bool) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if with_traceback and exc.__traceback__ is not None:
        text += "\n\n" + "".join(traceback.format_exception(exc)).rstrip()
    return text


def retry_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` database errors in a row. The first retries
    come quickly: after a connection is cut, each dead pooled connection costs one
    failed attempt before the pool opens fresh ones."""
    return min(0.05 * 2.0 ** max(0, failures - 2), 2.0)


def one_line(exc: BaseException) -> str:
    """Drivers put several lines in an error; a log line holds one."""
    return " ".join(str(exc).split())


def write(queue: Queue, outcomes: Sequence[Outcome]) -> Written:
    """Write endings in (at most) three statements: results, errors and snoozes."""
    done = [o for o in outcomes if o.completed]
    bad = [o for o in outcomes if o.error is not None]
    later = [o for o in outcomes if o.snooze is not None]
    jobs: list[Job] = []
    if done:
        jobs += queue.complete_many([(o.job.id, o.claim_id, o.result) for o in done])
    if bad:
        jobs += queue.fail_many(
            [(o.job.id, o.claim_id, o.error or "", o.retryable, o.delay) for o in bad]
        )
    snoozed: list[int] = []
    if later:
        snoozed = list(
            queue.report(snoozed=[(o.job.id, o.claim_id, o.snooze or 0.0) for o in later])
        )
    # One batch holds one ending per job: a job is claimed again only after its
    # earlier ending was written, so ids identify the outcomes.
    changed = {j.id for j in jobs}.union(snoozed)
    return Written(jobs, [o for o in outcomes if o.job.id not in changed], snoozed)
