"""Upkeep that workers run in the background, as small services with ``run_once()``:
the rescuer (expired leases), the pruners (the retention policies, in small batches;
the retention per status a worker is given), the notification dispatcher (subscribers
of finished jobs), the scheduler (periodic jobs), the throughput roll-up (minutes into
hours) and, in the HTTP server, the deletion of expired idempotency records. Each pass
is one guarded statement or a few, so any number of workers may run them at once."""

from conveyor.maintenance.idempotency import PRUNE_KEYS_EVERY, IdempotencyPruner
from conveyor.maintenance.notifications import Dispatcher
from conveyor.maintenance.pruner import Pruner, Retention, RetentionPruner
from conveyor.maintenance.rescuer import Rescuer
from conveyor.maintenance.scheduler import Scheduler
from conveyor.maintenance.service import Maintainer, Service
from conveyor.maintenance.throughput import ROLL_UP_EVERY, ThroughputRollUp

__all__ = [
    "PRUNE_KEYS_EVERY",
    "ROLL_UP_EVERY",
    "Dispatcher",
    "IdempotencyPruner",
    "Maintainer",
    "Pruner",
    "Rescuer",
    "Retention",
    "RetentionPruner",
    "Scheduler",
    "Service",
    "ThroughputRollUp",
]
