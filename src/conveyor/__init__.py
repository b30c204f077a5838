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
from conveyor.config import database_url, open_backend, parse_url
from conveyor.contract import QueueAPI
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    Retry,
    Snooze,
    StaleClaim,
    Terminal,
)
from conveyor.info import QueueSettings, Rate, ScheduleInfo, Throughput, WorkerInfo
from conveyor.job import AttemptError, Claim, ErrorKind, Job, Progress, Stats, Status
from conveyor.queue import Dedupe, Queue
from conveyor.retry import Backoff, Fixed
from conveyor.task import Context

if TYPE_CHECKING:
    from conveyor.worker import Worker, WorkerStats

__version__ = "0.1.0"


def connect(
    url: str | None = None,
    *,
    migrate: bool = True,
    schema: str | None = None,
    **options: Any,
) -> Queue:
    """Open the queue at ``url`` (default: ``$CONVEYOR_DATABASE_URL``, else
    ``sqlite:///conveyor.db``) and bring its schema up to date.

    Keyword options: ``schema`` (PostgreSQL), ``max_payload_bytes``, ``default_max_attempts``,
    ``backoff``, ``worker_name``."""
    queue_keys = {"default_max_attempts", "backoff", "worker_name"}
    queue_options = {k: options.pop(k) for k in list(options) if k in queue_keys}
    settings = parse_url(database_url(url), schema=schema, **options)
    backend = open_backend(settings)
    try:
        queue = Queue(backend, **settings.queue_options, **queue_options)
        if migrate:
            backend.migrate()
    except BaseException:
        backend.close()
        raise
    return queue


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
    "Retry",
    "ScheduleInfo",
    "Snooze",
    "StaleClaim",
    "Stats",
    "Status",
    "Task",
    "Terminal",
    "Throughput",
    "Worker",
    "WorkerInfo",
    "WorkerStats",
    "connect",
]
