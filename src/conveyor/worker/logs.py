"""How the worker's log lines are worded, and what it says about each failed attempt
once its ending is written: the task, the job, attempt n of max, what happens next (a
retry at a time, failed for good, or a snooze) and the traceback. The fields ride on the
log record as well (``job_id``, ``task``, ``attempt``, ``max_attempts``, ``next``,
``traceback``) for structured logs. Claim ids never appear: they are secrets of their
holders."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone

from conveyor.job import Job, Status
from conveyor.worker.outcome import Outcome

log = logging.getLogger("conveyor.worker")


def one_line(exc: BaseException) -> str:
    """Drivers put several lines in an error; a log line holds one."""
    return " ".join(str(exc).split())


# An exception's message can be huge; the headline of a log line stays readable.
_HEADLINE_CHARS = 500


def log_endings(outcomes: Sequence[Outcome], statuses: Mapping[int, Status]) -> None:
    """Log the failed and snoozed attempts among ``outcomes`` whose endings were written
    (``statuses``: each written job's new status; a refused ending is logged where it is
    refused)."""
    for ending in outcomes:
        status = statuses.get(ending.job.id)
        if status is None:
            continue
        if ending.error is not None:
            _failed(ending, ending.error, status)
        elif ending.snooze is not None:
            _log(logging.INFO, ending.job, f"snoozed for {ending.snooze:g}s", "snoozed", None)


def _failed(ending: Outcome, error: str, status: Status) -> None:
    if status == Status.FAILED:
        level, next_ = logging.ERROR, "failed for good"
    elif status == Status.PENDING:
        # The write answers statuses only; the delay is the one the worker asked for.
        at = datetime.now(timezone.utc) + timedelta(seconds=ending.delay)
        level, next_ = logging.WARNING, f"retry at {_moment(at)}"
    else:  # cancelled meanwhile, by an admin or a failed dependency
        level, next_ = logging.WARNING, f"now {status}"
    headline, _, trace = error.partition("\n\n")
    summary = " ".join(headline.split())[:_HEADLINE_CHARS]
    _log(level, ending.job, f"failed: {summary}; {next_}", next_, trace or None)


def _log(level: int, job: Job, what: str, next_: str, trace: str | None) -> None:
    headline = f"job {job.id} ({job.task}) attempt {job.attempts}/{job.max_attempts} {what}"
    log.log(
        level,
        "%s%s",
        headline,
        f"\n{trace}" if trace else "",
        extra={
            "headline": headline,
            "job_id": job.id,
            "task": job.task,
            "attempt": job.attempts,
            "max_attempts": job.max_attempts,
            "next": next_,
            "traceback": trace,
        },
    )


def _moment(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
