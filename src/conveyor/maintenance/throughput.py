"""Throughput history: per-minute rows older than a day are summed into hourly rows,
kept for a month, so the console charts a day or a week without growing the table
(or scanning jobs). Every worker does it now and then; a roll-up is idempotent and
concurrent ones share the work."""

from __future__ import annotations

import logging

from conveyor.queue import Queue

log = logging.getLogger("conveyor.worker")

# How often a worker rolls throughput up (the work is a few rows per queue and minute).
ROLL_UP_EVERY = 600.0


class ThroughputRollUp:
    name = "throughput"

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def run_once(self) -> int:
        """One pass; returns how many hourly rows were written."""
        written = self.queue.roll_up_throughput()
        if written:
            log.debug("rolled throughput up into %d hourly row(s)", written)
        return written
