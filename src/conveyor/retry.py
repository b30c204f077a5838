"""Retry delays. Pure functions of the attempt number, so they are easy to test."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from conveyor.errors import InvalidArgument

# A transaction the database rolled back to break a deadlock (MySQL) runs again, at
# most this many more times, after a short jittered pause: the queue's own transactions
# and a MySQL statement committed on its own alike.
CONFLICT_RETRIES = 5


def conflict_pause(attempt: int) -> float:
    """A short, jittered pause before running a transaction again after a conflict."""
    return random.uniform(0.005, 0.02) * (attempt + 1)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff: ``base * factor ** (attempt - 1)`` seconds, capped at ``cap``,
    spread by up to ``jitter`` (a fraction) either way so failed jobs do not return in
    lockstep. ``Backoff(base=2, jitter=0)`` gives 2, 4, 8, 16 … seconds."""

    base: float = 2.0
    factor: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.base < 0 or self.factor < 1 or self.cap < 0 or not 0 <= self.jitter <= 1:
            raise InvalidArgument(
                "backoff: expected base >= 0, factor >= 1, cap >= 0, 0 <= jitter <= 1"
            )

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1 for the first)."""
        exponent = max(0, attempt - 1)
        raw = self.base * self.factor ** min(exponent, 64)
        delay = min(self.cap, raw)
        if self.jitter:
            delay *= 1 + self.jitter * (2 * rand() - 1)
        return max(0.0, delay)


@dataclass(frozen=True, slots=True)
class Fixed:
    """The same delay after every failed attempt."""

    seconds: float = 0.0

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        return self.seconds


BackoffPolicy = Backoff | Fixed


def seconds(value: timedelta | float | int | None, name: str, *, allow_zero: bool = True) -> float:
    """Accept a duration as ``timedelta`` or a number of seconds; refuse negatives."""
    if value is None:
        raise InvalidArgument(f"{name}: expected a duration, got None")
    if isinstance(value, timedelta):
        result = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        result = float(value)
    else:
        raise InvalidArgument(
            f"{name}: expected a timedelta or a number of seconds, got {type(value).__name__}"
        )
    if result != result or result in (float("inf"), float("-inf")):
        raise InvalidArgument(f"{name}: expected a finite duration, got {result}")
    if result < 0 or (result == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(f"{name}: expected a duration {bound} seconds, got {result}")
    if result > 10 * 365 * 86400:
        raise InvalidArgument(f"{name}: expected at most ten years, got {result} seconds")
    return result
