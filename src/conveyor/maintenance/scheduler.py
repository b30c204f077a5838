"""The scheduler: enqueues the slots of an app's periodic schedules (``@app.periodic``).

Every worker runs one; none leads. A pass reads the database clock, works out which
slots are due (``conveyor.schedule``) and asks the database to run each of them with
``run_schedule_slot``: one transaction that moves the schedule's last slot forward,
guarded by the slot it expects, and inserts the job. However many workers on however
many machines try the same slot, one of them enqueues it; a worker killed between two
lines leaves either both writes or neither.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from conveyor import validation as check
from conveyor.contract import QueueAPI
from conveyor.errors import ConfigurationError
from conveyor.schedule import Periodic

log = logging.getLogger("conveyor.scheduler")


class Scheduler:
    name = "scheduler"
    interval = 1.0  # seconds between passes: slots are enqueued about this soon

    def __init__(self, queue: QueueAPI, schedules: Iterable[Periodic]) -> None:
        self.queue = queue
        self.schedules = {p.name: p for p in schedules}
        if not self.schedules:
            raise ConfigurationError("scheduler: no periodic schedule to run")
        self._last: dict[str, datetime | None] = {}  # the last slot known taken
        self._skipped: dict[str, datetime] = {}  # the latest missed slot reported
        self._declared = False

    def run_once(self, now: datetime | None = None) -> int:
        """One pass at ``now`` (default: the database clock); returns how many jobs
        this pass enqueued. The first pass declares the schedules."""
        moment = self.queue.now() if now is None else check.timestamp(now, "now")
        assert moment is not None
        if not self._declared:
            for periodic in self.schedules.values():
                self._declare(periodic, moment)
            self._declared = True
        # What this worker last saw is enough to tell that nothing is due, which is
        # most passes: only then is the database asked where each schedule stands.
        if not any(self._owed(p, self._last.get(p.name), moment) for p in self.schedules.values()):
            return 0
        stored = {s.name: s for s in self.queue.schedules()}
        enqueued = 0
        for periodic in self.schedules.values():
            info = stored.get(periodic.name)
            if info is None:  # deleted behind our back: declare it again
                self._declare(periodic, moment)
                continue
            enqueued += self._run(periodic, info.last_slot, moment)
        return enqueued

    def _owed(self, periodic: Periodic, last: datetime | None, now: datetime) -> bool:
        due = periodic.due(last, now)
        return bool(due.run) or (
            due.missed is not None and due.missed != self._skipped.get(periodic.name)
        )

    def _run(self, periodic: Periodic, last: datetime | None, now: datetime) -> int:
        name = periodic.name
        self._last[name] = last
        due = periodic.due(last, now)
        enqueued = 0
        for slot in due.run:
            job = self.queue.run_schedule_slot(
                name, slot=slot, next_slot=periodic.timing.next_after(slot),
                task=periodic.task, payload=periodic.payload, queue=periodic.queue,
                priority=periodic.priority, max_attempts=periodic.max_attempts,
            )  # fmt: skip
            # Taken by this worker or another: the stored last slot is this one or later.
            self._last[name] = slot
            if job is not None:
                enqueued += 1
                late = " (missed, run once)" if slot == due.missed else ""
                log.log(
                    logging.INFO if late else logging.DEBUG,
                    "schedule %s: enqueued job %d for %s%s",
                    name,
                    job.id,
                    slot,
                    late,
                )
        if due.missed is not None and due.missed != self._skipped.get(name):
            self._skipped[name] = due.missed
            if not due.run:
                log.info("schedule %s: skipped slots up to %s (missed)", name, due.missed)
                # Only to show the next run where the skipped slot's time was.
                self._declare(periodic, now)
        return enqueued

    def _declare(self, periodic: Periodic, now: datetime) -> None:
        info = self.queue.save_schedule(
            periodic.name, task=periodic.task, queue=periodic.queue, spec=periodic.spec,
            first_slot=now, next_slot=periodic.timing.next_after(now),
        )  # fmt: skip
        self._last[periodic.name] = info.last_slot
