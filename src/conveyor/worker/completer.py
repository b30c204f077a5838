"""The batched completer: task endings are written many per statement.

Endings queue up while a write is under way, and the next write takes all of them
(up to ``max_batch``): one commit per batch, never one per job when more are ready.
When the database is unreachable the batch is kept and retried with backoff; the leases
may run out meanwhile, and then the guarded write refuses what another worker took over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conveyor.errors import ConveyorError, DatabaseError
from conveyor.queue import Queue
from conveyor.worker import outcome
from conveyor.worker.outcome import Outcome, Written

log = logging.getLogger("conveyor.worker")


@dataclass(frozen=True, slots=True)
class Flushed:
    """One batch, written. ``written.refused``: endings the claim guard turned away.
    ``uncertain``: on a retry after a connection error, a refusal may be our own
    earlier write that committed before the connection died, so it is not counted as
    stale. ``unwritten``: endings given up because the database stayed down while the
    worker closed (their claims are released). An ending the queue refuses as invalid
    is logged and dropped: its lease runs out and the rescuer retries the job."""

    outcomes: Sequence[Outcome]
    written: Written
    uncertain: bool
    unwritten: Sequence[Outcome] = ()


class Completer:
    def __init__(
        self,
        queue: Queue,
        on_flushed: Callable[[Flushed], None],
        *,
        max_batch: int = 500,
        linger: float = 0.002,
        on_db_error: Callable[[DatabaseError], None] | None = None,
    ) -> None:
        self.queue = queue
        self.max_batch = max_batch
        self.linger = linger
        self._on_flushed = on_flushed
        self._on_db_error = on_db_error
        self._inbox: list[Outcome] = []
        self._outstanding = 0  # queued or being written
        self._cond = threading.Condition()
        self._closing = False
        self._give_up_at: float | None = None
        self._thread = threading.Thread(target=self._loop, name="conveyor-completer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, ending: Outcome) -> bool:
        """Queue an ending; False once the completer is closing."""
        with self._cond:
            if self._closing:
                return False
            self._inbox.append(ending)
            self._outstanding += 1
            self._cond.notify_all()
            return True

    @property
    def outstanding(self) -> int:
        return self._outstanding

    def close(self, timeout: float) -> bool:
        """Take no more endings, write those queued (trying for up to ``timeout``
        seconds while the database is down), and stop. True when all were written."""
        with self._cond:
            self._closing = True
            self._give_up_at = time.monotonic() + timeout
            self._cond.notify_all()
        self._thread.join(timeout + 5.0)
        return self._outstanding == 0

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._inbox and not self._closing:
                    self._cond.wait()
                if not self._inbox:
                    return
                # Endings of short tasks arrive a few at a time; waiting a moment for
                # more turns many tiny commits into a few larger ones.
                until = time.monotonic() + self.linger
                while len(self._inbox) < self.max_batch and not self._closing:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch = self._inbox[: self.max_batch]
                del self._inbox[: self.max_batch]
            try:
                # Results, errors and snoozes are separate statements: each retries on
                # its own, so one committed part is never re-sent as if it had failed.
                for part in (
                    [o for o in batch if o.completed],
                    [o for o in batch if o.error is not None],
                    [o for o in batch if o.snooze is not None],
                ):
                    if part:
                        self._on_flushed(self._write(part))
            finally:
                with self._cond:
                    self._outstanding -= len(batch)
                    self._cond.notify_all()

    def _write(self, batch: list[Outcome]) -> Flushed:
        failures = 0
        while True:
            try:
                written = outcome.write(self.queue, batch)
                return Flushed(batch, written, uncertain=failures > 0)
            except DatabaseError as exc:
                if self._on_db_error is not None:
                    self._on_db_error(exc)
                if self._give_up_at is not None and time.monotonic() >= self._give_up_at:
                    log.error("gave up writing %d ending(s): %s", len(batch), outcome.one_line(exc))
                    return Flushed(batch, Written(), uncertain=True, unwritten=batch)
                failures += 1
                delay = outcome.retry_delay(failures)
                log.warning(
                    "cannot write %d ending(s) (%s); retrying in %.2fs",
                    len(batch),
                    outcome.one_line(exc),
                    delay,
                )
                with self._cond:  # a close() cuts the wait short
                    self._cond.wait(delay)
            except ConveyorError:
                if len(batch) == 1:
                    log.exception("cannot write the ending of job %d; dropped", batch[0].job.id)
                    return Flushed(batch, Written(), uncertain=failures > 0)
                # One bad item must not sink the batch: write each alone to find it.
                parts = [self._write([item]) for item in batch]
                merged = Written(
                    [j for p in parts for j in p.written.jobs],
                    [o for p in parts for o in p.written.refused],
                    [i for p in parts for i in p.written.snoozed],
                )
                unwritten = [o for p in parts for o in p.unwritten]
                return Flushed(batch, merged, uncertain=failures > 0, unwritten=unwritten)
