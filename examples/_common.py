"""What the examples' command lines share: a summary printed as text or one JSON line,
a job's error as users see it, and the retention a queue declares."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import timedelta
from typing import Any

import conveyor


def report(summary: dict[str, Any], as_json: bool) -> None:
    summary = {
        k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
        for k, v in summary.items()
    }
    if as_json:
        print(json.dumps(summary, default=str))
        return
    for key, value in summary.items():
        print(f"{key:>24}: {value}")


def first_line(error: str | None) -> str | None:
    """A job's error as users see it: its first line (a traceback stays in the job)."""
    return None if error is None else error.split("\n", 1)[0]


# What a worker writes before an exception's message: its class name.
_CLASS_PREFIX = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*: ")


def user_message(error: str | None) -> str | None:
    """A job's error as users see it: the first line, without the exception's class name
    a worker records before the message (``Terminal: no audio`` → ``no audio``)."""
    line = first_line(error)
    return None if line is None else _CLASS_PREFIX.sub("", line, count=1)


def declare_retention(
    q: conveyor.QueueAPI, queue: str, keep: dict[str, timedelta | None], *, retire_keys: bool
) -> None:
    """The queue's retention policies, per final status, unless it has some already
    (an operator's change, made with ``conveyor retention set``, is kept across
    restarts). Workers prune what they let go."""
    have = {(p.status, p.queue) for p in q.retention_policies() if p.task is None}
    for status, kept in keep.items():
        if (status, queue) not in have:
            q.set_retention(status, kept, queue=queue, retire_keys=retire_keys)
