"""The completer: task endings are written many at a time, in one transaction.

Endings queue up while a write is under way, and the next write takes all of them (up to
``max_batch``): one ``report`` call (one statement per kind of ending: results,
failures, snoozes) per batch, never one per job when more are ready. The answer is each
written job's new status, not the job itself: nothing here reads more. The claim guard
silently leaves out jobs the claim no longer holds: those are *refused*. When the
database is unreachable the batch is kept and retried with backoff; the leases may run
out meanwhile, and then the guarded write refuses what another worker took over."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from conveyor.contract import QueueAPI
from conveyor.errors import ConveyorError, DatabaseError
from conveyor.job import Status
from conveyor.ops.reports import Report
from conveyor.worker.logs import log, one_line
from conveyor.worker.outcome import Outcome
from conveyor.worker.timing import db_retry_delay


def as_report(outcomes: Sequence[Outcome]) -> Report:
    """Endings as a ``Report``. One batch holds one ending per job: a job is claimed
    again only after its earlier ending was written, so ids identify the outcomes."""
    return Report(
        completed=[(o.job.id, o.claim_id, o.result) for o in outcomes if o.completed],
        failed=[
            (o.job.id, o.claim_id, o.error, o.retryable, o.delay)
            for o in outcomes
            if o.error is not None
        ],
        snoozed=[(o.job.id, o.claim_id, o.snooze) for o in outcomes if o.snooze is not None],
    )


def write(queue: QueueAPI, outcomes: Sequence[Outcome]) -> dict[int, Status]:
    """Write endings in one transaction; returns the new status of each job written (a
    job left out was refused)."""
    endings = as_report(outcomes)
    return queue.report(completed=endings.completed, failed=endings.failed, snoozed=endings.snoozed)


@dataclass(frozen=True, slots=True)
class Flushed:
    """One batch, written. ``statuses``: the new status of each job written; the others
    were refused by the claim guard. ``uncertain``: on a retry after a connection error,
    a refusal may be our own earlier write that committed before the connection died, so
    it is not counted as stale. ``unwritten``: endings given up because the database
    stayed down while the worker closed (their claims are released). An ending the queue
    refuses as invalid is logged and dropped: its lease runs out and the rescuer retries
    the job."""

    outcomes: Sequence[Outcome]
    statuses: dict[int, Status]
    uncertain: bool
    unwritten: Sequence[Outcome] = ()

    @property
    def refused(self) -> list[Outcome]:
        unwritten = {id(o) for o in self.unwritten}
        return [
            o for o in self.outcomes if o.job.id not in self.statuses and id(o) not in unwritten
        ]


class Completer:
    def __init__(
        self,
        queue: QueueAPI,
        on_flushed: Callable[[Flushed], None],
        *,
        max_batch: int = 1000,
        linger: float = 0.002,
        hold: float = 0.0,
        claim_soon: Callable[[], bool] | None = None,
        on_db_error: Callable[[DatabaseError], None] | None = None,
    ) -> None:
        self.queue = queue
        self.max_batch = max_batch
        self.linger = linger
        self.hold = hold
        self._claim_soon = claim_soon
        self._on_flushed = on_flushed
        self._on_db_error = on_db_error
        self._inbox: list[Outcome] = []
        self._outstanding = 0  # queued or being written (here, or with a claim)
        self._doubtful: set[int] = set()  # endings whose earlier write may have committed
        self._given_back = False  # a claim could not write the queued endings: no holding
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
            if len(self._inbox) == 1 or len(self._inbox) >= self.max_batch:
                self._cond.notify()  # the writer waits for a first ending, or a full batch
            return True

    @property
    def outstanding(self) -> int:
        return self._outstanding

    @property
    def writing(self) -> int:
        """Endings being written on their own (taken from the queue, not yet written)."""
        return self._outstanding - len(self._inbox)

    # -- endings written with a claim ---------------------------------------------------
    # The claim loop takes the endings waiting here and writes them in the transaction
    # of its next claim (one commit per batch instead of two); it then hands the result
    # back (``finish``) or, when that claim failed, the endings themselves (``give_back``).
    def take(self) -> list[Outcome]:
        with self._cond:
            if self._closing:
                return []
            batch = self._inbox[: self.max_batch]
            del self._inbox[: self.max_batch]
            if batch:
                self._cond.notify_all()  # a writer holding them for this claim: done
            return batch

    def finish(self, batch: list[Outcome], statuses: dict[int, Status]) -> None:
        uncertain = self._doubted(batch)
        try:
            self._on_flushed(Flushed(batch, statuses, uncertain=uncertain))
        finally:
            with self._cond:
                self._outstanding -= len(batch)
                self._cond.notify_all()

    def give_back(self, batch: list[Outcome], *, doubtful: bool) -> None:
        """Endings a claim could not write: written here instead. ``doubtful``: the claim
        failed on the connection, so it may have committed them."""
        with self._cond:
            if doubtful:
                self._doubtful.update(id(o) for o in batch)
            self._inbox[:0] = batch
            self._given_back = True
            self._cond.notify()

    def _doubted(self, batch: list[Outcome]) -> bool:
        with self._cond:
            if not self._doubtful:
                return False
            found = [id(o) for o in batch if id(o) in self._doubtful]
            self._doubtful.difference_update(found)
            return bool(found)

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
                self._hold_for_claim()
                batch = self._inbox[: self.max_batch]
                del self._inbox[: self.max_batch]
                self._given_back = False
            if not batch:  # a claim took them meanwhile
                continue
            try:
                self._on_flushed(self._write(batch))
            finally:
                with self._cond:
                    self._outstanding -= len(batch)
                    self._cond.notify_all()

    def _hold_for_claim(self) -> None:
        """While the claim loop is about to claim, leave the endings for it: they ride in
        the claim's transaction (one commit for both) instead of a commit of their own.
        Held for at most ``hold`` seconds, and only while ``claim_soon`` says a claim is
        coming; never for endings a claim gave back (it could not write them: written
        here, one by one if need be, they are found out). Called with the lock held."""
        if self._claim_soon is None or self.hold <= 0 or self._given_back:
            return
        until = time.monotonic() + self.hold
        while self._inbox and len(self._inbox) < self.max_batch and not self._closing:
            left = until - time.monotonic()
            if left <= 0 or not self._claim_soon():
                return
            self._cond.wait(min(left, 0.01))

    def _write(self, batch: list[Outcome]) -> Flushed:
        failures = 0
        while True:
            try:
                statuses = write(self.queue, batch)
                return Flushed(batch, statuses, uncertain=self._doubted(batch) or failures > 0)
            except DatabaseError as exc:
                if self._on_db_error is not None:
                    self._on_db_error(exc)
                if self._give_up_at is not None and time.monotonic() >= self._give_up_at:
                    log.error("gave up writing %d ending(s): %s", len(batch), one_line(exc))
                    return Flushed(batch, {}, uncertain=True, unwritten=batch)
                failures += 1
                delay = db_retry_delay(failures)
                log.warning(
                    "cannot write %d ending(s) (%s); retrying in %.2fs",
                    len(batch),
                    one_line(exc),
                    delay,
                )
                with self._cond:  # a close() cuts the wait short
                    self._cond.wait(delay)
            except ConveyorError:
                if len(batch) == 1:
                    log.exception("cannot write the ending of job %d; dropped", batch[0].job.id)
                    return Flushed(batch, {}, uncertain=failures > 0)
                # One bad item must not sink the batch: write each alone to find it.
                parts = [self._write([item]) for item in batch]
                statuses = {k: v for p in parts for k, v in p.statuses.items()}
                unwritten = [o for p in parts for o in p.unwritten]
                return Flushed(batch, statuses, uncertain=failures > 0, unwritten=unwritten)
