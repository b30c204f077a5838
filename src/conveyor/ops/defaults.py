"""What a queue client assumes when a call leaves something out, and the shared checks
of ids and durations."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from conveyor import validation as check
from conveyor.errors import InvalidArgument
from conveyor.retry import Backoff, BackoffPolicy

Duration = timedelta | float | int

DEFAULT_LEASE = timedelta(minutes=5)
DEFAULT_MAX_ATTEMPTS = 3
MAX_CLAIM = 10_000
MAX_LIST = 10_000
MAX_JOB_ID = 2**63 - 1
# Subscribers one job takes (each is told of its end); the write that adds one is
# guarded by the count, so callers at once cannot pass it.
MAX_SUBSCRIBERS = 1000


@dataclass(frozen=True, slots=True)
class Defaults:
    """``max_payload_bytes``: the largest JSON payload, result or progress detail.
    ``max_attempts``: for jobs enqueued without one. ``backoff``: the delay after a
    retryable failure when the caller names none. ``worker_name``: recorded on claims
    made without one."""

    max_payload_bytes: int = check.DEFAULT_MAX_PAYLOAD_BYTES
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: BackoffPolicy = field(default_factory=Backoff)
    worker_name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")

    def __post_init__(self) -> None:
        check.integer(self.max_attempts, "default_max_attempts", low=1, high=1_000_000)
        check.integer(self.max_payload_bytes, "max_payload_bytes", low=1, high=check.INT32)
        if not callable(getattr(self.backoff, "delay", None)):
            raise InvalidArgument("backoff: expected a policy with a delay(attempt) method")


def job_id(value: Any) -> int:
    return check.integer(value, "job_id", low=1, high=MAX_JOB_ID)


def claim_id(value: Any) -> str:
    text = check.text(value, "claim_id", max_length=200)
    if not text:
        raise InvalidArgument("claim_id: expected a claim id, got an empty string")
    return text


def queue_names(value: Any) -> tuple[str, ...] | None:
    """``None`` (every queue), one queue name, or several."""
    return _names(value, "queue")


def task_names(value: Any) -> tuple[str, ...] | None:
    """``None`` (every task), one task name, or several."""
    return _names(value, "task")


def _names(value: Any, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (check.name(value, what),)
    if isinstance(value, (list, tuple, set, frozenset)) and value:
        return tuple(sorted({check.name(v, what) for v in value}))
    raise InvalidArgument(f"{what}: expected a {what} name or a list of them, got {value!r}")
