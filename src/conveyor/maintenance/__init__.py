"""Upkeep that workers run in the background, as small services with ``run_once()``:
the rescuer (expired leases), the pruner (retention per status), the notification
dispatcher (subscribers of finished jobs) and the scheduler (periodic jobs). Each pass
is one guarded statement or a few, so any number of workers may run them at once."""

from conveyor.maintenance.notifications import Dispatcher
from conveyor.maintenance.pruner import Pruner, Retention
from conveyor.maintenance.rescuer import Rescuer
from conveyor.maintenance.scheduler import Scheduler
from conveyor.maintenance.service import Maintainer, Service

__all__ = ["Dispatcher", "Maintainer", "Pruner", "Rescuer", "Retention", "Scheduler", "Service"]
