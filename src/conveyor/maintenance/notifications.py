"""The dispatcher: tell the subscribers of finished jobs, through the app's notifier.

It takes final jobs whose subscribers were not told of their latest finish (atomically,
for a lease, so concurrent dispatchers in any process never take the same ones), calls
the notifier, then records them as told. A crash in between means they are offered
again once the lease ends (at least once); ``WebhookNotifier`` makes that second time a
no-op with a dedupe key. Subscribers the notifier failed to tell are offered again after
a back-off (``Redelivery``), not recorded as told.
Jobs finished any way at all are covered: by a worker, ``cancel``, ``recover`` or an
HTTP client."""

from __future__ import annotations

import logging
import threading

from conveyor.errors import DatabaseError
from conveyor.notify import DeliveryFailed, Notifier, Redelivery
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
        # Passes run one at a time, and count what they told: a burst worker about to
        # exit learns from ``told_total`` whether any pass (its own or the maintenance
        # thread's) enqueued work since it last looked.
        self._lock = threading.Lock()
        self.told_total = 0

    def run_once(self) -> int:
        """One pass; returns how many subscribers were told."""
        with self._lock:
            told = self._pass()
            self.told_total += told
        return told

    def _pass(self) -> int:
        redelivery = getattr(self.notifier, "redelivery", None)
        if not isinstance(redelivery, Redelivery):
            redelivery = Redelivery()
        told = 0
        for _ in range(_MAX_BATCHES):
            pending = self.queue.take_notifications(limit=self.batch)
            if not pending:
                break
            done: list[tuple[int, str]] = []
            failed: dict[str, list[tuple[int, str]]] = {}  # error -> deliveries
            for job, subscribers in pending:
                missed: dict[str, str] = {}
                try:
                    self.notifier.notify(job, subscribers)
                except DatabaseError:
                    raise  # nothing recorded; the next pass tries again
                except DeliveryFailed as exc:
                    missed = {s: why for s, why in exc.failed.items() if s in subscribers}
                except Exception as exc:
                    # A broken notifier must not stall every other announcement.
                    log.exception("notifier failed for job %d; offered again later", job.id)
                    missed = dict.fromkeys(subscribers, f"{type(exc).__name__}: {exc}")
                for subscriber in subscribers:
                    if subscriber in missed:
                        failed.setdefault(missed[subscriber], []).append((job.id, subscriber))
                    else:
                        done.append((job.id, subscriber))
            self.queue.mark_notified(done)
            for error, items in failed.items():
                self.queue.retry_notifications(
                    items,
                    error[:4000],
                    base=redelivery.base,
                    cap=redelivery.cap,
                    max_attempts=redelivery.max_attempts,
                )
            told += len(done)
        return told
