"""Where the claim loop sleeps when there was nothing to claim, and what wakes it.

The driver's ``generation()`` and ``wait_for_change`` wake the worker as soon as a job
is enqueued: LISTEN/NOTIFY on PostgreSQL, a watch of ``PRAGMA data_version`` on SQLite,
and commits made in the worker's own process at once on both. The poll interval only
covers jobs that become due by time (``run_at``, retry backoff). A queue that hears of
no changes (a remote one) polls adaptively: right after work, often; when idle, backing
off to ``max_poll`` (an empty claim costs a fraction of a millisecond)."""

from __future__ import annotations

import threading
from typing import Any

# The claim loop waits in slices this long so a stop request is seen promptly.
_SLICE = 0.1


def hears_others(queue: Any) -> bool:
    """Whether other processes' commits wake this one (LISTEN/NOTIFY, or SQLite's watch
    of its database file): polling then only catches jobs that fall due. A remote queue
    has no driver, and polls."""
    return bool(getattr(getattr(queue, "driver", None), "hears_other_processes", False))


class Wakeup:
    def __init__(self, queue: Any, *, min_poll: float, max_poll: float) -> None:
        self.min_poll = min(min_poll, max_poll)
        self.max_poll = max_poll
        self._interval = self.min_poll
        self._event = threading.Event()
        self._closed = threading.Event()
        driver = getattr(queue, "driver", None)
        # A remote queue has no driver: it polls.
        self._backend = driver if callable(getattr(driver, "wait_for_change", None)) else None
        self._bridge: threading.Thread | None = None

    def start(self) -> None:
        if self._backend is not None:
            self._bridge = threading.Thread(target=self._relay, name="conveyor-wakeup", daemon=True)
            self._bridge.start()

    def close(self) -> None:
        self._closed.set()
        if self._bridge is not None:
            self._bridge.join(timeout=2.0)

    def arm(self) -> None:
        """Call before looking for work: a change from here on ends the next sleep."""
        self._event.clear()

    def poke(self) -> None:
        """Something this process did may have made work possible (a slot freed)."""
        self._event.set()

    def found_work(self) -> None:
        self._interval = self.min_poll

    def sleep(self, stop: threading.Event, limit: float | None = None) -> None:
        """Sleep until woken, ``stop`` is set, or the poll interval passes (which then
        grows, up to ``max_poll``)."""
        wait = self._interval if limit is None else min(self._interval, limit)
        self._interval = min(self._interval * 2, self.max_poll)
        remaining = wait
        while remaining > 0 and not stop.is_set():
            if self._event.wait(min(_SLICE, remaining)):
                return
            remaining -= _SLICE

    def _relay(self) -> None:
        assert self._backend is not None
        since = self._backend.generation()
        while not self._closed.is_set():
            if self._backend.wait_for_change(since, _SLICE):
                since = self._backend.generation()
                self._event.set()
