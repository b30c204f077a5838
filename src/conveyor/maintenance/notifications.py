"""The dispatcher: tell the subscribers of finished jobs, through the app's notifier.

It takes final jobs whose subscribers were not told of their latest finish (atomically,
for a lease, so concurrent dispatchers in any process never take the same ones), calls
the notifier, then records them as told. A crash in between means they are offered
again once the lease ends (at least once); ``WebhookNotifier`` makes that second time a
no-op with a dedupe key.
Jobs finished any way at all are covered: by a worker, ``cancel``, ``recover`` or an
HTTP client."""

from __future__ import annotations

import logging

from conveyor.errors import DatabaseError
from conveyor.notify import Notifier
from conveyor.queue import Queue

log = logging.getLogger("conveyor.notify")

# Passes stop after this many batches, so a notifier that cannot keep up (or a row that
# will not stay marked) never pins the maintenance thread.
_MAX_BATCHES = 10


class Dispatcher:
    name = "notifications"

    def __init__(self, queue: Queue, notifier: Notifier, *, batch: int = 100) -> None:
        self.queue = queue
        self.notifier = notifier
        self.batch = batch

    def run_once(self) -> int:
        """One pass; returns how many subscribers were told."""
        told = 0
        for _ in range(_MAX_BATCHES):
            pending = self.queue.take_notifications(limit=self.batch)
            if not pending:
                break
            done: list[tuple[int, str]] = []
            for job, subscribers in pending:
                try:
                    self.notifier.notify(job, subscribers)
                except DatabaseError:
                    raise  # nothing recorded; the next pass tries again
                except Exception:
                    # A broken notifier must not stall every other announcement.
                    log.exception("notifier failed for job %d; not retried", job.id)
                done += [(job.id, s) for s in subscribers]
            self.queue.mark_notified(done)
            told += len(done)
        return told
