"""Idempotency records: the answers the HTTP server keeps for requests that carried an
``Idempotency-Key`` are deleted once their retention is over, a small batch per
statement (short locks), so that the table holds about a retention's worth of keys."""

from __future__ import annotations

import logging

from conveyor.ops.idempotency import PRUNE_BATCH
from conveyor.queue import Queue

log = logging.getLogger("conveyor.maintenance")

# How often the server deletes expired records; batches per pass, at most.
PRUNE_KEYS_EVERY = 60.0
MAX_BATCHES = 100


class IdempotencyPruner:
    name = "idempotency"

    def __init__(self, queue: Queue, *, batch: int = PRUNE_BATCH) -> None:
        self.queue = queue
        self.batch = batch

    def run_once(self) -> int:
        """One pass: batches of at most ``batch`` expired records, each its own
        transaction, until one comes back short; returns how many were deleted."""
        removed = 0
        for _ in range(MAX_BATCHES):
            deleted = self.queue.prune_idempotency_keys(self.batch)
            removed += deleted
            if deleted < self.batch:
                break
        if removed:
            log.debug("deleted %d expired idempotency record(s)", removed)
        return removed
