"""The heartbeater: renews the lease of every job the worker holds (running, waiting for
a slot, or waiting for its ending to be written) in one statement, on its own thread,
however long the tasks run; and finds runs that overrun their timeout.

A job missing from ``heartbeat_many``'s answer is no longer ours: its lease ran out and it was
rescued or claimed again, or it was cancelled, or an admin reset its claim. That one
answer is all the heartbeater reads: the worker tells the task through its context, and
whatever it writes later is refused."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from conveyor.contract import QueueAPI
from conveyor.errors import DatabaseError
from conveyor.worker.held import Held, HeldJobs
from conveyor.worker.logs import log, one_line
from conveyor.worker.timing import TIMEOUT_CHECK


class Heartbeater:
    def __init__(
        self,
        queue: QueueAPI,
        held: HeldJobs,
        *,
        interval: float,
        on_lost: Callable[[list[Held]], None],
        on_overdue: Callable[[Held], None],
        on_db_error: Callable[[DatabaseError], None] | None = None,
    ) -> None:
        self.queue = queue
        self.held = held
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
        tick = min(TIMEOUT_CHECK, self.interval / 2)
        next_beat = time.monotonic() + self.interval
        while not self._stop.wait(tick):
            for held in self.held.overdue(time.monotonic()):
                self._on_overdue(held)
            if time.monotonic() >= next_beat:
                self.renew_once()
                next_beat = time.monotonic() + self.interval

    def renew_once(self) -> int:
        """One renewal pass; returns how many held jobs turned out to be lost."""
        held = self.held.unwritten()
        if not held:
            return 0
        try:
            # Keys, not ids: this worker may hold a job again under a newer claim.
            alive = {(j.id, j.claim_id) for j in self.queue.heartbeat_many([h.key for h in held])}
        except DatabaseError as exc:
            if self._on_db_error is not None:
                self._on_db_error(exc)
            log.warning("cannot renew %d lease(s): %s", len(held), one_line(exc))
            return 0
        # Runs that already handed in an ending need no telling; the completer's
        # guarded write decides what becomes of that ending.
        lost = [h for h in held if h.key not in alive and not h.reported]
        if lost:
            self._on_lost(lost)
        return len(lost)
