"""What a burst worker leaves behind: jobs that were not claimable yet when it stopped,
because their retry backs off or they are scheduled for later."""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.cli.durations import describe_duration
from conveyor.contract import QueueAPI
from conveyor.job import Status

# Pending jobs looked at per queue; past it, the counts say "at least".
LOOKED_AT = 1000


def still_waiting(queue: QueueAPI, queues: Iterable[str]) -> str | None:
    """``"3 retryable job(s) wait for their back-off (next in 12s); …"``, or None when
    no pending job of ``queues`` waits for its time to come."""
    now = queue.now()
    retrying = scheduled = 0
    due = None
    capped = False
    for name in queues:
        pending = queue.jobs(queue=name, status=Status.PENDING, limit=LOOKED_AT)
        capped = capped or len(pending) == LOOKED_AT
        for job in pending:
            if job.run_at <= now:
                continue  # due, but held back: paused, rate-limited, or waiting for another
            if job.attempts > 0:
                retrying += 1
            else:
                scheduled += 1
            due = job.run_at if due is None else min(due, job.run_at)
    if due is None:
        return None
    at_least = "at least " if capped else ""
    parts = []
    if retrying:
        parts.append(f"{at_least}{retrying} retryable job(s) wait for their back-off")
    if scheduled:
        parts.append(f"{at_least}{scheduled} job(s) are scheduled for later")
    wait = describe_duration((due - now).total_seconds())
    return f"{'; '.join(parts)} (the next is due in {wait}): run again then, or without --burst"
