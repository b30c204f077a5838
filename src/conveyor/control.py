"""The control exceptions a task raises to say how its job goes on. They are not
errors of the library (``conveyor.errors``): ``Retry`` (retry the job, optionally after a
delay), ``Terminal`` (fail it for good) and ``Snooze`` (run it again later, without
spending an attempt). All three are exported as ``conveyor.Retry`` and so on."""

from __future__ import annotations

from datetime import timedelta

from conveyor.retry import seconds


class Retry(Exception):
    """Raised by a task to be retried, after ``delay`` when given."""

    def __init__(self, message: str = "retry requested", *, delay: timedelta | float | None = None):
        super().__init__(message)
        self.delay = delay


class Terminal(Exception):
    """Raised by a task to fail its job for good: it is never retried."""


class Snooze(Exception):
    """Raised by a task to run its job again after ``delay`` (a ``timedelta`` or seconds),
    without spending an attempt or recording an error: waiting on something (a rate
    limit elsewhere, a file not there yet) is not a failure."""

    def __init__(self, delay: timedelta | float) -> None:
        self.delay = seconds(delay, "Snooze(delay)")
        super().__init__(f"snoozed for {self.delay:g}s")


__all__ = ["Retry", "Snooze", "Terminal"]
