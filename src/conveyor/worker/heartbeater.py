"""The heartbeater: renews the leases of every job the worker holds, in one statement,
on its own thread, however long the tasks run; and ends runs that overrun their timeout.

A job missing from ``heartbeat_many``'s answer is no longer ours (its lease ran out and
it was recovered or re-claimed, or it was cancelled, or an admin reset its claim): its
task is told through the context, and whatever it writes later is refused."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from conveyor.errors import DatabaseError
from conveyor.job import Status
from conveyor.queue import Queue
from conveyor.worker.outcome import one_line
from conveyor.worker.registry import Held, Registry

log = logging.getLogger("conveyor.worker")


class Heartbeater:
    def __init__(
        self,
        queue: Queue,
        registry: Registry,
        *,
        interval: float,
        on_lost: Callable[[Held, str], None],
        on_overdue: Callable[[Held], None],
        on_db_error: Callable[[DatabaseError], None] | None = None,
    ) -> None:
        self.queue = queue
        self.registry = registry
        self.interval = interval
        self._on_lost = on_lost
        self._on_overdue = on_overdue
        self._on_db_error = on_db_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="conveyor-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        # Timeouts are checked often, leases renewed every ``interval``.
        tick = min(0.1, self.interval / 2)
        next_beat = time.monotonic() + self.interval
        while not self._stop.wait(tick):
            self.check_timeouts()
            if time.monotonic() >= next_beat:
                self.renew_once()
                next_beat = time.monotonic() + self.interval

    def check_timeouts(self) -> None:
        for held in self.registry.overdue(time.monotonic()):
            self._on_overdue(held)

    def renew_once(self) -> int:
        """One renewal pass; returns how many held jobs turned out to be lost."""
        held = self.registry.unwritten()
        if not held:
            return 0
        try:
            alive = self.queue.heartbeat_many([h.key for h in held])
        except DatabaseError as exc:
            if self._on_db_error is not None:
                self._on_db_error(exc)
            log.warning("cannot renew %d lease(s): %s", len(held), one_line(exc))
            return 0
        renewed = {(j.id, j.claim_id) for j in alive}
        # Runs that already handed in an ending need no telling; the completer's
        # guarded write decides what becomes of that ending.
        lost = [h for h in held if h.key not in renewed and not h.reported]
        for h in lost:
            self._on_lost(h, self._why(h))
        return len(lost)

    def _why(self, held: Held) -> str:
        try:
            job = self.queue.get(held.job.id)
        except DatabaseError:
            job = None
        # Claim ids are secrets of their holders: never in a reason or a log line.
        if job is None:
            return "claim lost: the job is gone"
        if job.status == Status.CANCELLED:
            return "claim lost: the job was cancelled"
        if job.claim_id and job.claim_id != held.job.claim_id:
            return "claim lost: the job was claimed again by another worker"
        return f"claim lost: the job is {job.status} (lease expired or claim reset)"
