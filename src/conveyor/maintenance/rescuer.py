"""The rescuer: running jobs whose lease expired go back to pending (or to failed when
their attempts are spent). A worker that dies stops renewing its leases, so its jobs
come back within one lease plus one rescue interval."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from conveyor.queue import Queue

log = logging.getLogger("conveyor.rescuer")


class Rescuer:
    """``queues``: the only queues it recovers (a worker's own); ``None``: every queue."""

    name = "rescuer"

    def __init__(self, queue: Queue, queues: Sequence[str] | None = None) -> None:
        self.queue = queue
        self.queues = list(queues) if queues is not None else None

    def run_once(self) -> int:
        """One pass; returns how many jobs were recovered. ``recover()`` is a single
        statement guarded by ``lease_expires_at < now``, so concurrent passes by many
        workers each recover different jobs, never one twice."""
        count = self.queue.recover(queue=self.queues)
        if count:
            log.warning("recovered %d job(s) whose lease expired", count)
        return count
