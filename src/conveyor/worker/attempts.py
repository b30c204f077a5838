"""What the worker says about each failed attempt, once its ending is written: the task,
the job, attempt n of max, what happens next (a retry at a time, failed for good, or a
snooze) and the traceback. The fields ride on the log record as well (``job_id``,
``task``, ``attempt``, ``max_attempts``, ``next``, ``traceback``) for structured logs.
Claim ids never appear: they are secrets of their holders."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from conveyor.job import Job
from conveyor.worker.outcome import Outcome, Written

log = logging.getLogger("conveyor.worker")

# An exception's message can be huge; the headline of a log line stays readable.
_HEADLINE_CHARS = 500


def log_endings(outcomes: Sequence[Outcome], written: Written) -> None:
    """Log the failed and snoozed attempts among ``outcomes`` that ``written`` stored
    (a refused ending is logged where it is refused)."""
    stored = {job.id: job for job in written.jobs}
    snoozed = set(written.snoozed)
    for ending in outcomes:
        job = ending.job
        if ending.error is not None and job.id in stored:
            _failed(ending, ending.error, stored[job.id])
        elif ending.snooze is not None and job.id in snoozed:
            _log(logging.INFO, job, f"snoozed for {ending.snooze:g}s", "snoozed", None)


def _failed(ending: Outcome, error: str, now: Job) -> None:
    if now.status == "failed":
        level, next_ = logging.ERROR, "failed for good"
    elif now.status == "pending":
        level, next_ = logging.WARNING, f"retry at {_moment(now.run_at)}"
    else:  # cancelled meanwhile, by an admin or a failed dependency
        level, next_ = logging.WARNING, f"now {now.status}"
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
