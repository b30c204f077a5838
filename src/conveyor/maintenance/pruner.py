"""The pruner: delete final jobs once they are older than the retention for their
status. Retention is opt-in: a worker deletes nothing unless it is given one."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from conveyor.job import Status
from conveyor.queue import Duration, Queue
from conveyor.retry import seconds

log = logging.getLogger("conveyor.pruner")


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
