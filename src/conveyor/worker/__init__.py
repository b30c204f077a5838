"""The worker runtime: claim jobs, run their tasks, write their endings in batches,
renew their leases, and shut down without losing any of them."""

from conveyor.worker.context import Context
from conveyor.worker.runtime import Worker
from conveyor.worker.stats import WorkerStats

__all__ = ["Context", "Worker", "WorkerStats"]
