"""SIGTERM and SIGINT: the first asks for a graceful stop, the second exits at once.

The handler only sets an event the main thread never waits on while holding its lock
(the claim loop polls it), because a handler that takes a lock the interrupted code
holds would deadlock."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._previous: dict[int, Any] = {}
        self.received: int | None = None

    def install(self) -> bool:
        """Install the handlers; False (and nothing done) off the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return True

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            # Unbuffered and lock-free: logging could deadlock inside a handler.
            os.write(2, b"conveyor: second signal, exiting now; leases will expire\n")
            os._exit(128 + signum)
        self.received = signum
        self._stop.set()
