"""conveyor: a durable job queue in the SQL database you already run.

import conveyor
q = conveyor.connect("sqlite:///conveyor.db")
job = q.enqueue("emails.send", {"to": "ada@example.com"})
claim = q.claim(limit=10)
for job in claim.jobs:
    q.complete(job.id, claim.id, result={"sent": True})
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from conveyor.app import App, Task
from conveyor.contract import QueueAPI
from conveyor.control import Retry, Snooze, Terminal
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DatabaseUnavailable,
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    StaleClaim,
    StorageFull,
    StorageReadOnly,
    TooManySubscribers,
    TransactionConflict,
    WorkflowNotFound,
)
from conveyor.info import QueueSettings, Rate, ScheduleInfo, Throughput, WorkerInfo
from conveyor.job import AttemptError, Claim, ErrorKind, Job, Progress, Stats, Status
from conveyor.ops.reports import Report
from conveyor.queue import Dedupe, Queue, connect
from conveyor.retry import Backoff, Fixed
from conveyor.task import Context
from conveyor.workflow import (
    Step,
    StepSpec,
    Workflow,
    WorkflowRun,
    WorkflowStatus,
    WorkflowSummary,
    chain,
    group,
    step,
)

if TYPE_CHECKING:
    from conveyor.worker import Worker, WorkerStats

__version__ = "0.1.0"


# The worker runtime (threads, the maintenance services) loads on first use of these
# names: an app that only enqueues never pays for it.
_RUNTIME = {"Worker": "conveyor.worker", "WorkerStats": "conveyor.worker"}


def __getattr__(name: str) -> Any:
    if name in _RUNTIME:
        return getattr(importlib.import_module(_RUNTIME[name]), name)
    raise AttributeError(f"module 'conveyor' has no attribute {name!r}")


__all__ = [
    "App",
    "AttemptError",
    "Backoff",
    "Claim",
    "ConfigurationError",
    "Context",
    "ConveyorError",
    "DatabaseError",
    "DatabaseUnavailable",
    "Dedupe",
    "DuplicateJob",
    "ErrorKind",
    "Fixed",
    "InvalidArgument",
    "InvalidTransition",
    "Job",
    "JobNotFound",
    "Progress",
    "Queue",
    "QueueAPI",
    "QueueSettings",
    "Rate",
    "Report",
    "Retry",
    "ScheduleInfo",
    "Snooze",
    "StaleClaim",
    "Stats",
    "Status",
    "Step",
    "StepSpec",
    "StorageFull",
    "StorageReadOnly",
    "Task",
    "Terminal",
    "Throughput",
    "TooManySubscribers",
    "TransactionConflict",
    "Worker",
    "WorkerInfo",
    "WorkerStats",
    "Workflow",
    "WorkflowNotFound",
    "WorkflowRun",
    "WorkflowStatus",
    "WorkflowSummary",
    "chain",
    "connect",
    "group",
    "step",
]
