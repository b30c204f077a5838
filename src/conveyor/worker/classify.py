"""What a task raised, as an ``Outcome``: ``Snooze`` puts the job back for later without
spending an attempt, ``Terminal`` fails it for good, ``Retry`` retries it (after its own
delay, or the back-off), and any other exception is retryable unless the task lists the
exceptions that are (``retry_on``)."""

from __future__ import annotations

import traceback

from conveyor.control import Retry, Snooze, Terminal
from conveyor.errors import InvalidArgument
from conveyor.job import Job
from conveyor.retry import BackoffPolicy, seconds
from conveyor.worker.outcome import Outcome, failed, snoozed


def from_exception(
    job: Job,
    exc: BaseException,
    *,
    backoff: BackoffPolicy,
    retry_on: tuple[type[BaseException], ...] | None = None,
) -> Outcome:
    if isinstance(exc, Snooze):
        return snoozed(job, exc.delay)
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
