"""The rescuer: running jobs whose lease expired go back to pending (or to failed when
their attempts are spent). A worker that dies stops renewing its leases, so its jobs
come back within one lease plus one rescue interval."""

from __future__ import annotations

import logging

from conveyor.queue import Queue

log = logging.getLogger("conveyor.rescuer")


class Rescuer:
    name = "rescuer"

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def run_once(self) -> int:
        """One pass; returns how many jobs were recovered. ``recover()`` is a single
        statement guarded by ``lease_expires_at < now``, so concurrent passes by many
        workers each recover different jobs, never one twice."""
        count = self.queue.recover()
        if count:
            log.warning("recovered %d job(s) whose lease expired", count)
        return count
