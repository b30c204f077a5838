"""Every duration the worker keeps, in one place: how long a claim lasts, how often it is
renewed, how long a task may run, how long a stop waits, how often an idle worker looks
for work, and how long it waits after a database error."""

from __future__ import annotations

import time
from dataclasses import dataclass

from conveyor.queue import Duration
from conveyor.retry import seconds

DEFAULT_LEASE = 30.0  # seconds a claim lasts without a heartbeat
DEFAULT_GRACE = 30.0  # seconds running tasks may still finish on stop
SQLITE_MAX_POLL = 0.2  # a worker that hears of no other process's commits polls this often
LISTEN_MAX_POLL = 1.0  # when it does hear of them, polling only catches jobs that fall due
MIN_POLL = 0.025  # right after work, an idle worker looks again this soon
TIMEOUT_CHECK = 0.1  # how often running tasks are checked against their timeout
PACE_WINDOW = 0.1  # by default, jobs are claimed ahead to cover about this long of work
PACE_SAMPLE = 0.05  # the pace is measured over spans at least this long
# A busy worker's endings wait up to this long for the next claim, to be written in its
# transaction rather than in one of their own.
ENDINGS_HOLD = 0.05
FLOW_REFRESH = 2.0  # how often the worker re-reads which queues have flow control


class Pace:
    """Jobs finished per second, smoothed over recent spans; read by the claim loop only."""

    def __init__(self) -> None:
        self._rate = 0.0
        self._count = 0
        self._since = time.monotonic()

    def per_second(self, total: int) -> float:
        """The pace, given ``total``: how many jobs have finished so far."""
        now = time.monotonic()
        span = now - self._since
        if span >= PACE_SAMPLE:
            self._rate = 0.5 * self._rate + 0.5 * (total - self._count) / span
            self._count, self._since = total, now
        return self._rate

    @property
    def rate(self) -> float:
        """The pace as last measured (read from any thread)."""
        return self._rate


@dataclass(frozen=True, slots=True)
class Timing:
    """``lease``: seconds a claim lasts without a heartbeat. ``heartbeat``: seconds
    between renewals of every lease held (default ``lease / 3``). ``rescue``: seconds
    between passes of the rescuer over expired leases (default ``lease / 4``).
    ``grace``: on stop, seconds running tasks may still finish. ``poll``: the longest
    an idle worker sleeps before looking for work (``None``: by database). A task's
    own ``timeout`` runs from when it starts, not from its claim."""

    lease: float = DEFAULT_LEASE
    heartbeat: float = DEFAULT_LEASE / 3
    rescue: float = DEFAULT_LEASE / 4
    grace: float = DEFAULT_GRACE
    poll: float | None = None

    @classmethod
    def of(
        cls,
        *,
        lease: Duration,
        grace: Duration,
        poll: Duration | None,
        heartbeat: Duration | None,
        rescue: Duration | None,
    ) -> Timing:
        lease_s = positive(lease, "lease")
        return cls(
            lease=lease_s,
            heartbeat=positive(heartbeat or lease_s / 3, "heartbeat"),
            rescue=positive(rescue or max(0.1, lease_s / 4), "rescue"),
            grace=seconds(grace, "grace"),
            poll=None if poll is None else positive(poll, "poll_interval"),
        )

    def max_poll(self, hears_others: bool) -> float:
        if self.poll is not None:
            return self.poll
        return LISTEN_MAX_POLL if hears_others else SQLITE_MAX_POLL

    @property
    def closing(self) -> float:
        """How long the endings still queued at stop may take to be written."""
        return max(2.0, min(self.grace, 10.0))


def db_retry_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` database errors in a row. The first retries
    come quickly: after a connection is cut, each dead pooled connection costs one
    failed attempt before the pool opens fresh ones."""
    return min(0.05 * 2.0 ** max(0, failures - 2), 2.0)


def positive(value: Duration, name: str) -> float:
    return seconds(value, name, allow_zero=False)
