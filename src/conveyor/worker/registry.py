"""The jobs a worker holds a claim on, from the claim until both their function has
returned and their ending is written. Shared by the claim loop, the executor, the
heartbeater and the completer, under one lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from conveyor.job import Job
from conveyor.worker.context import Context

Key = tuple[int, str]  # (job id, claim id): a job may come back to this worker re-claimed


@dataclass(eq=False, slots=True)
class Held:
    job: Job
    ctx: Context
    deadline: float | None = None  # time.monotonic() past which the run is overdue
    executing: bool = True  # the task function has not returned
    reported: bool = False  # an ending was handed to the completer (or given up)
    written: bool = False  # that ending was written, refused, or abandoned
    cancel: Callable[[], object] | None = field(default=None, repr=False)  # async runs

    @property
    def key(self) -> Key:
        assert self.job.claim_id is not None
        return (self.job.id, self.job.claim_id)


class Registry:
    def __init__(self) -> None:
        self._held: dict[Key, Held] = {}
        self._executing = 0
        self._cond = threading.Condition()

    def add(self, job: Job, ctx: Context, *, timeout: float | None, executing: bool) -> Held:
        deadline = None if timeout is None else time.monotonic() + timeout
        held = Held(job, ctx, deadline, executing=executing)
        with self._cond:
            self._held[held.key] = held
            self._executing += executing
        return held

    def claim_report(self, held: Held) -> bool:
        """True for the first caller only: exactly one ending per run is written."""
        with self._cond:
            if held.reported:
                return False
            held.reported = True
            return True

    def returned(self, held: Held) -> None:
        """The task function returned (or raised)."""
        with self._cond:
            if held.executing:
                held.executing = False
                self._executing -= 1
            self._forget_if_done(held)
            self._cond.notify_all()

    def written(self, keys: list[Key]) -> None:
        with self._cond:
            for key in keys:
                held = self._held.get(key)
                if held is not None:
                    held.written = True
                    self._forget_if_done(held)
            self._cond.notify_all()

    def _forget_if_done(self, held: Held) -> None:
        if held.written and not held.executing:
            self._held.pop(held.key, None)

    # -- views ----------------------------------------------------------------------
    @property
    def executing(self) -> int:
        return self._executing

    def empty(self) -> bool:
        with self._cond:
            return not self._held

    def unwritten(self) -> list[Held]:
        """Jobs whose lease this worker still needs (no ending written yet)."""
        with self._cond:
            return [h for h in self._held.values() if not h.written]

    def overdue(self, now: float) -> list[Held]:
        with self._cond:
            return [
                h
                for h in self._held.values()
                if not h.reported and h.deadline is not None and h.deadline <= now
            ]

    def wait_until_idle(self, timeout: float) -> bool:
        """Wait until no task function is executing; False when ``timeout`` ran out."""
        with self._cond:
            return self._cond.wait_for(lambda: self._executing == 0, timeout)
