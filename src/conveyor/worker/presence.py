"""A worker's entry in the worker registry: written when it starts, refreshed on the
heartbeat interval (idle or not), deleted on a clean stop. An entry not refreshed for
``ttl`` counts as expired (the worker died) and is no longer listed; a running worker
deletes entries expired for over a ``ttl`` when it starts and every minute after. Runs
as one of the worker's maintenance services, so a slow or failing write never holds up
a job."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib import metadata

from conveyor.errors import ConveyorError
from conveyor.ops.registry import MAX_BUSY
from conveyor.queue import Queue

log = logging.getLogger("conveyor.worker")

# Heartbeat intervals an entry outlives its last refresh: a pass or two may be late.
TTL_BEATS = 3
# How often a worker deletes entries that expired more than one TTL ago.
FORGET_EVERY = 60.0


class Presence:
    """``running``: how many jobs the worker is running now, and ``busy``: which, with
    when each started (both read on each refresh; jobs claimed ahead and waiting for a
    slot are in neither)."""

    name = "presence"

    def __init__(
        self,
        queue: Queue,
        *,
        worker: str,
        queues: Sequence[str],
        concurrency: int,
        interval: float,
        running: Callable[[], int],
        busy: Callable[[], list[tuple[int, datetime]]] | None = None,
    ) -> None:
        self.queue = queue
        self.worker = worker
        self.queues = list(queues)
        self.concurrency = concurrency
        self.interval = interval
        self.ttl = interval * TTL_BEATS
        self.version = _version()
        self._running = running
        self._busy = busy
        self._forgot_at = float("-inf")
        self._host = socket.gethostname()

    def run_once(self) -> int:
        """Register or refresh the entry; now and then delete expired ones. Returns
        how many expired entries were deleted."""
        self.queue.worker_seen(
            self.worker,
            host=self._host,
            pid=os.getpid(),
            queues=self.queues,
            concurrency=self.concurrency,
            version=self.version,
            running=self._running(),
            ttl=self.ttl,
            busy=None if self._busy is None else self._busy()[:MAX_BUSY],
        )
        now = time.monotonic()
        if now - self._forgot_at < FORGET_EVERY:
            return 0
        self._forgot_at = now
        forgotten = self.queue.forget_workers(self.ttl)
        if forgotten:
            log.info("forgot %d worker(s) that stopped without signing off", forgotten)
        return forgotten

    def leave(self) -> None:
        """Delete the entry (a clean stop). A failure leaves it to expire."""
        try:
            self.queue.worker_stopped(self.worker)
        except ConveyorError as exc:
            log.warning("cannot remove this worker from the registry (%s); it will expire", exc)


def _version() -> str:
    try:
        return metadata.version("conveyor")
    except metadata.PackageNotFoundError:  # run from a source tree
        return "unknown"
