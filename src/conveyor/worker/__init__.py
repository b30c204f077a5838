"""The worker runtime: claim jobs, run their tasks, write their endings in batches,
renew their leases, and shut down without losing any of them. ``runtime.py`` reads top
to bottom as a job's way through it."""

from conveyor.task import Context
from conveyor.worker.runtime import Worker
from conveyor.worker.stats import WorkerStats

__all__ = ["Context", "Worker", "WorkerStats"]
