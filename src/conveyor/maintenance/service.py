"""Running maintenance services on their intervals, in one background thread."""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Protocol

from conveyor.errors import ConveyorError

log = logging.getLogger("conveyor.maintenance")


class Service(Protocol):
    name: str

    def run_once(self) -> int: ...


def behind(service: Service) -> bool:
    """Whether a service's last pass stopped with work left (a pruner at its batch
    limit): its next pass then comes at once, not an interval later."""
    return bool(getattr(service, "behind", False))


class Maintainer:
    """Runs each service every ``interval`` seconds (spread by ±10% so many workers do
    not run in lockstep). ``poke(name)`` asks for an early pass, at most one per
    ``min_gap`` seconds, as does a pass that stopped with work left (``behind``). A failed
    pass is logged and tried again at the next interval."""

    def __init__(self, *, min_gap: float = 0.05) -> None:
        self._services: list[tuple[Service, float]] = []
        self._due: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._min_gap = min_gap
        self._running: str | None = None
        self._poked_while_running = False
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def add(self, service: Service, interval: float, *, run_first: bool = True) -> None:
        self._services.append((service, interval))
        self._due[service.name] = time.monotonic() + (0.0 if run_first else interval)

    def start(self) -> None:
        if self._services:
            self._thread = threading.Thread(
                target=self._loop, name="conveyor-maintenance", daemon=True
            )
            self._thread.start()

    def poke(self, name: str) -> None:
        with self._cond:
            if name == self._running:
                self._poked_while_running = True  # a pass already under way may miss it
            elif name in self._due:
                earliest = self._last.get(name, 0.0) + self._min_gap
                self._due[name] = min(self._due[name], earliest)
                self._cond.notify()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    wait = min(self._due.values()) - time.monotonic()
                    if wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopped:
                    return
            now = time.monotonic()
            for service, interval in self._services:
                if self._due[service.name] > now:
                    continue
                with self._cond:
                    self._running, self._poked_while_running = service.name, False
                self._run(service)
                with self._cond:
                    self._running = None
                    done = self._last[service.name] = time.monotonic()
                    soon = self._poked_while_running or behind(service)
                    again = self._min_gap if soon else interval
                    self._due[service.name] = done + again * random.uniform(0.9, 1.1)

    @staticmethod
    def _run(service: Service) -> None:
        try:
            service.run_once()
        except ConveyorError as exc:
            log.warning(
                "%s pass failed: %s; trying again later", service.name, " ".join(str(exc).split())
            )
        except Exception:
            log.exception("%s pass failed; trying again later", service.name)
