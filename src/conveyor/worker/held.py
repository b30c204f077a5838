"""The jobs a worker holds a claim on, from their claim until their function has
returned (or was never started) and their ending is written: waiting for a slot
(prefetched), running, or waiting for their ending to be written. The heartbeater
renews the leases of all of them. Shared by the claim loop, the task pool, the
heartbeater and the completer, under one lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from conveyor.job import Job
from conveyor.task import Context

Key = tuple[int, str]  # (job id, claim id): a job may come back to this worker re-claimed


@dataclass(eq=False, slots=True)
class Held:
    job: Job
    ctx: Context
    deadline: float | None = None  # time.monotonic() past which the run is overdue
    started: bool = False  # its task function was called
    started_at: datetime | None = None  # when (wall clock), for the worker registry
    returned: bool = False  # its function returned, or it will never be called
    reported: bool = False  # an ending was handed to the completer (or given up)
    written: bool = False  # that ending was written, refused, or abandoned
    cancel: Callable[[], object] | None = field(default=None, repr=False)  # async runs

    @property
    def key(self) -> Key:
        assert self.job.claim_id is not None
        return (self.job.id, self.job.claim_id)


class HeldJobs:
    def __init__(self) -> None:
        self._held: dict[Key, Held] = {}
        self._in_hand = 0  # held jobs whose function has not returned (waiting or running)
        self.returned_total = 0  # functions returned since the start (the worker's pace)
        self._cond = threading.Condition()

    def add(self, contexts: list[Context]) -> list[Held]:
        """Hold the jobs of a claim, each with its context (one lock for the batch)."""
        added = [Held(ctx.job, ctx) for ctx in contexts]
        with self._cond:
            held = self._held
            for h in added:
                held[h.key] = h
            self._in_hand += len(added)
        return added

    def claim_report(self, held: Held) -> bool:
        """True for the first caller only: exactly one ending per run is written."""
        with self._cond:
            if held.reported:
                return False
            held.reported = True
            return True

    def returned(self, held: Held) -> None:
        """The task function returned or raised (or will never be called)."""
        with self._cond:
            if not held.returned:
                held.returned = True
                self._in_hand -= 1
                self.returned_total += 1
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
        if held.written and held.returned:
            self._held.pop(held.key, None)

    # -- views ----------------------------------------------------------------------
    @property
    def in_hand(self) -> int:
        """Jobs claimed whose function has not returned: running or waiting to start."""
        return self._in_hand

    def running(self) -> list[tuple[int, datetime]]:
        """``(job id, started at)`` of the held jobs whose function runs now, in start
        order (a prefetched job waiting for a slot is not one of them)."""
        with self._cond:
            found = [
                (h.job.id, h.started_at)
                for h in self._held.values()
                if h.started and not h.returned and h.started_at is not None
            ]
        return sorted(found, key=lambda item: item[1])

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

    def wait_until_returned(self, timeout: float) -> bool:
        """Wait until no function is running or waiting; False when ``timeout`` ran out."""
        with self._cond:
            return self._cond.wait_for(lambda: self._in_hand == 0, timeout)
