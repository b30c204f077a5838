"""How the worker's log lines are worded."""

from __future__ import annotations

import logging

log = logging.getLogger("conveyor.worker")


def one_line(exc: BaseException) -> str:
    """Drivers put several lines in an error; a log line holds one."""
    return " ".join(str(exc).split())
