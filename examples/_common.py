"""What the examples' command lines share: a summary printed as text or one JSON line,
and a job's error as users see it."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any


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
