"""``Worker``: claims jobs, runs their tasks, writes their endings, keeps their leases.

A job's way through the worker, in the order of this file:

1. ``_claim_loop`` claims jobs in batches: enough to fill every free slot plus
   ``prefetch`` more, so the next jobs are at hand when a slot frees;
2. ``_accept`` holds each one (``HeldJobs``: the heartbeater renews its lease from now
   on) and queues it in the task pool;
3. the pool (``TaskPool``) calls its task function when a slot is free, and hands how it
   ended to ``_ended``;
4. ``_ended`` gives that ending to the completer, which writes endings in batches and
   hands each written batch to ``_written``;
5. ``_written`` counts them and lets the jobs go.

Beside that path: the heartbeater renews every held lease and reports lost claims
(``_lost``) and overrun timeouts (``_overdue``); ``_shut_down`` releases jobs still
waiting for a slot at once, lets running tasks finish within the grace period, and
releases the rest. Durations live in ``timing.py``.

Threads: the claim loop (the caller's thread), the task pool's threads and event loop,
the completer, the heartbeater, the maintainer (rescuer, pruner, scheduler,
notifications) and a wake-up relay. The worker uses only the queue's public operations,
so a remote queue with the same methods can stand in for a database one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from conveyor import validation as check
from conveyor.errors import ConfigurationError, ConveyorError, DatabaseError
from conveyor.job import Claim, Job, Status
from conveyor.maintenance import (
    ROLL_UP_EVERY,
    Dispatcher,
    Maintainer,
    Pruner,
    Rescuer,
    Retention,
    RetentionPruner,
    Scheduler,
    ThroughputRollUp,
)
from conveyor.queue import Duration, Queue
from conveyor.task import Context
from conveyor.worker import invoke, logs, outcome
from conveyor.worker.completer import Completer, Flushed, as_report
from conveyor.worker.heartbeater import Heartbeater
from conveyor.worker.held import Held, HeldJobs
from conveyor.worker.logs import log, one_line
from conveyor.worker.outcome import Outcome
from conveyor.worker.pool import Run, TaskPool
from conveyor.worker.presence import Presence
from conveyor.worker.signals import StopSignals
from conveyor.worker.stats import WorkerStats
from conveyor.worker.timing import (
    DEFAULT_GRACE,
    DEFAULT_LEASE,
    ENDINGS_HOLD,
    FLOW_REFRESH,
    MIN_POLL,
    PACE_WINDOW,
    Pace,
    Timing,
    db_retry_delay,
    positive,
)
from conveyor.worker.wakeup import Wakeup, hears_others

if TYPE_CHECKING:
    from conveyor.worker.host import WorkerApp

MAX_PREFETCH = 10_000
MAX_AUTO_PREFETCH = 1_000  # the default prefetch's bound
# A burst worker is a batch job: when its database (or server) keeps failing for this
# long, it gives up instead of retrying forever as a long-running worker does.
DEFAULT_BURST_GIVE_UP = 30.0


class Worker:
    """Runs the tasks of ``app`` from ``queues`` (default: every queue its tasks use).

    ``concurrency``: tasks running at once. ``prefetch``: jobs claimed ahead of a free
    slot, so the next ones are at hand when a slot frees (0: claim only for free slots).
    By default the worker claims ahead ``concurrency`` jobs, or as many as it finishes in
    about 0.1 s at its current pace when that is more (at most ``MAX_AUTO_PREFETCH``):
    short tasks are claimed in large batches, long ones are not hoarded. Their leases
    are renewed while they wait, and a stop releases them at once. ``lease``:
    seconds a claim lasts without a heartbeat (renewed every ``lease / 3``). ``burst``:
    return once no job is claimable and none is held; a burst worker whose claims keep
    failing (a database or server that does not answer) for ``burst_give_up`` seconds
    stops and raises ``DatabaseError``. ``grace``: on stop, how long
    running tasks may still finish before their jobs are released to ``pending``.
    ``retention``: prune final jobs (off by default). ``install_signals``:
    SIGTERM/SIGINT stop the worker (main thread only).
    """

    def __init__(
        self,
        app: WorkerApp,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int = 10,
        prefetch: int | None = None,
        lease: Duration = DEFAULT_LEASE,
        burst: bool = False,
        burst_give_up: Duration = DEFAULT_BURST_GIVE_UP,
        grace: Duration = DEFAULT_GRACE,
        poll_interval: Duration | None = None,
        heartbeat_interval: Duration | None = None,
        rescue_interval: Duration | None = None,
        retention: Retention | None = None,
        prune_interval: Duration = 60.0,
        name: str | None = None,
        install_signals: bool = True,
    ) -> None:
        self.app = app
        self.queues = list(queues) if queues else app.queues
        if not self.queues:
            raise ConfigurationError("worker: no queues to work on (register a task first)")
        for name_ in self.queues:
            check.name(name_, "queue")
        self.concurrency = check.integer(concurrency, "concurrency", low=1, high=10_000)
        self.prefetch: int | None = None  # adapted to the pace (see ``_ahead``)
        if prefetch is not None:
            self.prefetch = check.integer(prefetch, "prefetch", low=0, high=MAX_PREFETCH)
        self._pace = Pace()
        self._last_ahead = self.concurrency if self.prefetch is None else self.prefetch
        self.timing = Timing.of(
            lease=lease,
            grace=grace,
            poll=poll_interval,
            heartbeat=heartbeat_interval,
            rescue=rescue_interval,
        )
        self.burst = burst
        self.burst_give_up = positive(burst_give_up, "burst_give_up")
        self.retention = retention
        if retention is not None:
            retention.ages()  # a bad duration is refused now, not in a background thread
        self.prune_interval = positive(prune_interval, "prune_interval")
        self.name = name
        self.install_signals = install_signals
        self.stats = WorkerStats()
        self._stopping = threading.Event()
        self._held = HeldJobs()
        self._rotation = 0
        self._controlled: set[str] = set()  # queues under flow control: none claimed ahead
        self._flow_read_at = -FLOW_REFRESH
        self._accepting = True  # endings still go to the completer (until shutdown)
        self._more_work = False  # the last claim filled its room: the queues hold more

    @property
    def lease(self) -> float:
        return self.timing.lease

    @property
    def grace(self) -> float:
        return self.timing.grace

    # -- control --------------------------------------------------------------------
    def stop(self) -> None:
        """Ask for a graceful stop (from any thread)."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run(self) -> WorkerStats:
        q = self.app.queue
        self.name = self.name or q.worker_name
        self._start_services(q)
        signals = StopSignals(self._stopping)
        installed = self.install_signals and signals.install()
        log.info(
            "worker %s: queues %s, concurrency %d, prefetch %s, lease %gs, on %s%s",
            self.name,
            ",".join(self.queues),
            self.concurrency,
            "auto" if self.prefetch is None else self.prefetch,
            self.lease,
            getattr(q, "url", type(q).__name__),
            " (burst)" if self.burst else "",
        )
        try:
            self._claim_loop(q)
        finally:
            try:
                self._shut_down(q)
            finally:
                if installed:
                    signals.restore()
        log.info("worker %s stopped: %s", self.name, self.stats.summary())
        return self.stats

    # -- starting -------------------------------------------------------------------
    def _start_services(self, q: Queue) -> None:
        t = self.timing
        max_poll = t.max_poll(hears_others(q))
        self._wakeup = Wakeup(q, min_poll=min(MIN_POLL, max_poll), max_poll=max_poll)
        self._pool = TaskPool(self._ended, slots=self.concurrency)
        self._completer = Completer(
            q, self._written, hold=ENDINGS_HOLD, claim_soon=self._claim_soon,
            on_db_error=self._db_error,
        )  # fmt: skip
        self._heartbeater = Heartbeater(
            q,
            self._held,
            interval=t.heartbeat,
            on_lost=self._lost,
            on_overdue=self._overdue,
            on_db_error=self._db_error,
        )
        self._maintainer = Maintainer()
        # A first pass at start; only this worker's queues (others may have other leases).
        self._maintainer.add(Rescuer(q, self.queues), t.rescue)
        if self.retention is not None:
            self._maintainer.add(Pruner(q, self.retention), self.prune_interval)
        # The stored retention policies (none: nothing to do but one read per interval),
        # on a thread of their own: a long pass through a backlog, batch after batch,
        # never delays the rescuer or this worker's presence.
        self._pruning = Maintainer()
        self._stop_pruning = threading.Event()
        self._pruning.add(RetentionPruner(q, stopping=self._stop_pruning), self.prune_interval)
        self._maintainer.add(ThroughputRollUp(q), ROLL_UP_EVERY)
        if self.app.schedules:  # @app.periodic: every worker helps, none leads
            scheduler = Scheduler(q, self.app.schedules.values())
            self._maintainer.add(scheduler, scheduler.interval)
        self._dispatcher: Dispatcher | None = None
        self._told_seen = 0
        if self.app.notifier is not None:
            self._dispatcher = Dispatcher(q, self.app.notifier)
            self._maintainer.add(self._dispatcher, 1.0)
        # Last: the first rescue pass comes before anything else (a burst worker needs it).
        self._presence = Presence(
            q, worker=self.name or q.worker_name, queues=self.queues,
            concurrency=self.concurrency, interval=t.heartbeat,
            running=lambda: max(0, self._held.in_hand - self._pool.waiting),
            busy=self._held.running,
        )  # fmt: skip
        self._maintainer.add(self._presence, t.heartbeat)
        for part in (
            self._wakeup,
            self._completer,
            self._heartbeater,
            self._maintainer,
            self._pruning,
        ):
            part.start()

    # -- 1. the claim loop ----------------------------------------------------------
    def _claim_loop(self, q: Queue) -> None:
        failures = 0  # database errors in a row
        failing_since = 0.0
        while not self._stopping.is_set():
            room = self._room()
            if room <= 0:
                self._wakeup.arm()
                if self._room() <= 0:
                    self._wakeup.sleep(self._stopping, limit=0.5)
                continue
            idle = self._held.empty()  # before the claim: see the burst check below
            self._wakeup.arm()
            jobs, error = self._claim(q, room)
            self._more_work = error is None and len(jobs) >= room
            if jobs:
                self._accept(q, jobs)
                self._wakeup.found_work()
            if error is not None:
                failures += 1
                now = time.monotonic()
                failing_since = now if failures == 1 else failing_since
                if self.burst and now - failing_since >= self.burst_give_up:
                    raise DatabaseError(
                        f"burst worker: giving up after {now - failing_since:.0f}s of failed "
                        f"claims: {one_line(error)}"
                    )
                delay = db_retry_delay(failures)
                log.warning("claim failed (%s); retrying in %.2fs", one_line(error), delay)
                self._stopping.wait(delay)
                continue
            failures = 0
            if jobs:
                continue
            if self.burst and idle and not self._dispatch_now():
                return
            self._wakeup.sleep(self._stopping)

    def _room(self) -> int:
        """How many jobs to claim now; 0 while enough are waiting for a slot.

        Claims come in batches: while more than half the prefetch still waits, the next
        claim can wait too. Endings being written on their own still hold claims: when
        the database is slow to take them, claiming more would only pile up work that
        cannot be recorded. (Endings waiting in the completer's queue do not: the claim
        writes them.)"""
        ahead = self._ahead()
        if self._pool.waiting > ahead // 2:
            return 0
        backlog = max(0, self._completer.writing - self.concurrency)
        return self.concurrency + ahead - self._held.in_hand - backlog

    def _claim_soon(self) -> bool:
        """Whether the claim loop will claim within about ``ENDINGS_HOLD`` (asked by the
        completer, which then leaves the waiting endings to ride with that claim): the
        queues held more at the last claim, and the jobs waiting for a slot will soon
        fall to the low-water mark at the pace tasks end (a slower worker, whose next
        claim is far off, writes its endings at once)."""
        if self._stopping.is_set() or not self._more_work:
            return False
        above = self._pool.waiting - self._low_water
        return above <= 0 or above <= self._pace.rate * ENDINGS_HOLD

    @property
    def _low_water(self) -> int:
        # Read by task threads: the last figure the claim loop worked out will do.
        return self._last_ahead // 2

    def _ahead(self) -> int:
        """How many jobs to hold beyond the running ones."""
        if self.prefetch is None:
            pace = self._pace.per_second(self._held.returned_total)
            ahead = min(MAX_AUTO_PREFETCH, max(self.concurrency, int(pace * PACE_WINDOW)))
        else:
            ahead = self.prefetch
        self._last_ahead = ahead
        return ahead

    def _claim(self, q: Queue, room: int) -> tuple[list[Job], DatabaseError | None]:
        """Claim up to ``room`` jobs, visiting the queues from a rotating start. A queue
        under flow control counts claimed jobs as running: from it, claim only for free
        slots, or jobs waiting here would hold places that idle workers could use."""
        self._read_flow_control(q)
        order = self.queues[self._rotation :] + self.queues[: self._rotation]
        self._rotation = (self._rotation + 1) % len(self.queues)
        free = self.concurrency - self._held.in_hand
        jobs: list[Job] = []
        # Endings waiting to be written go with the first claim: one transaction for both.
        endings = self._completer.take()
        for name in order:
            want = room - len(jobs)
            if name in self._controlled:
                want = min(want, free - len(jobs))
            if want <= 0:
                continue
            taken, endings = endings, []
            try:
                claim = self._claim_with(q, name, want, taken)
            except DatabaseError as exc:
                self._db_error(exc)
                return jobs, exc  # what was claimed already still runs
            jobs += claim.jobs
        if endings:  # no queue had room: written on their own
            self._completer.give_back(endings, doubtful=False)
        return jobs, None

    def _claim_with(self, q: Queue, name: str, want: int, endings: list[Outcome]) -> Claim:
        """A claim that also writes ``endings``; whatever happens, they are handed back
        to the completer exactly once: as written, or to write on its own."""
        if endings:
            try:
                claim = q.claim(
                    name, limit=want, lease=self.lease, worker=self.name, count_remaining=False,
                    report=as_report(endings),
                )  # fmt: skip
            except DatabaseError:
                self._completer.give_back(endings, doubtful=True)
                raise
            except ConveyorError:
                # An ending the queue refuses must not stop claims: the completer writes
                # them on their own, one by one if need be, and finds it.
                self._completer.give_back(endings, doubtful=False)
            else:
                self._completer.finish(endings, claim.reported)
                return claim
        return q.claim(name, limit=want, lease=self.lease, worker=self.name, count_remaining=False)

    def _read_flow_control(self, q: Queue) -> None:
        now = time.monotonic()
        if now - self._flow_read_at < FLOW_REFRESH:
            return
        self._flow_read_at = now
        try:
            settings = q.queue_settings()
        except ConveyorError as exc:  # keep the last answer; the claim itself will tell
            if isinstance(exc, DatabaseError):
                self._db_error(exc)
            return
        self._controlled = {name for name, s in settings.items() if s.controlled}

    # -- 2. held, and queued to run -------------------------------------------------
    def _accept(self, q: Queue, jobs: list[Job]) -> None:
        self.stats.add(claimed=len(jobs))
        runs = []
        stopping = self._stopping
        for held in self._held.add([Context(job, q, stopping=stopping) for job in jobs]):
            prepared = invoke.prepare(self.app, held.job)
            if isinstance(prepared, Outcome):  # unknown task, or a payload that does not fit
                self._ended(held, prepared)
            else:
                runs.append(Run(held, prepared))
        self._pool.submit(runs)  # 3. the pool runs them as slots free

    # -- 4. how it ended, to the completer ------------------------------------------
    def _ended(self, held: Held, ending: Outcome | None) -> None:
        """A run ended (``None``: it never ran or was cancelled: the claim was gone)."""
        if ending is None:
            if self._held.claim_report(held):  # nothing to write
                self._held.written([held.key])
        elif not self._report(held, ending):
            log.info(
                "job %d: ending discarded (%s)", held.job.id, held.ctx.reason or "already reported"
            )
        self._held.returned(held)
        if self._pool.waiting <= self._low_water:
            self._wakeup.poke()  # room to claim more

    def _report(self, held: Held, ending: Outcome) -> bool:
        """Hand an ending to the completer, unless one was already handed in."""
        if not self._held.claim_report(held):
            return False
        # Shutting down: left unwritten, so its claim is released with the others.
        return self._accepting and self._completer.put(ending)

    # -- 5. written -----------------------------------------------------------------
    def _written(self, flushed: Flushed) -> None:
        refused = flushed.refused
        if flushed.uncertain:
            self.stats.add(uncertain=len(refused))
        else:
            self.stats.add(stale_refused=len(refused))
            cancelled = self._cancelled([o.job.id for o in refused])
            for o in refused:
                if o.job.id in cancelled:  # a deliberate cancel: its ending is not owed
                    log.info("job %d was cancelled while it ran; its ending is dropped", o.job.id)
                    continue
                log.warning(
                    "refused stale write: job %d (this worker's claim no longer holds it)",
                    o.job.id,
                )
        counts = {"completed": 0, "failed": 0, "retried": 0, "snoozed": 0}
        for o in flushed.outcomes:
            status = flushed.statuses.get(o.job.id)
            if status is None:
                continue
            if status == Status.COMPLETED:
                counts["completed"] += 1
            elif status == Status.FAILED:
                counts["failed"] += 1
            else:
                counts["snoozed" if o.snooze is not None else "retried"] += 1
        self.stats.add(**counts)
        logs.log_endings(flushed.outcomes, flushed.statuses)
        # Endings not written because the database stayed down stay unwritten: shutdown
        # releases their claims instead.
        unwritten = {id(o) for o in flushed.unwritten}
        self._held.written(
            [(o.job.id, o.claim_id) for o in flushed.outcomes if id(o) not in unwritten]
        )
        if (counts["completed"] or counts["failed"]) and self._dispatcher is not None:
            self._maintainer.poke(Dispatcher.name)
        self._wakeup.poke()

    # -- beside the path: lost claims, timeouts, database errors ---------------------
    def _lost(self, lost: list[Held]) -> None:
        self.stats.add(leases_lost=len(lost))
        # Claim ids are secrets of their holders: never in a reason or a log line.
        reason = "claim lost: the lease expired, the job was cancelled, or its claim reset"
        cancelled = self._cancelled([held.job.id for held in lost])
        for held in lost:
            if held.job.id in cancelled:  # asked for: no cause for alarm
                log.info("job %d: cancelled while it ran; stopping it", held.job.id)
            else:
                log.warning("job %d: %s", held.job.id, reason)
            held.ctx.mark_lost(reason)
            if held.cancel is not None:
                held.cancel()

    def _cancelled(self, job_ids: list[int]) -> set[int]:
        """Which of ``job_ids`` were cancelled: their refused endings and lost claims
        are what a cancel means, not a fault (a lookup that fails says none were)."""
        found: set[int] = set()
        for job_id in job_ids:
            try:
                job = self.app.queue.get(job_id)
            except ConveyorError:
                return found
            if job is not None and job.status == Status.CANCELLED:
                found.add(job_id)
        return found

    def _overdue(self, held: Held) -> None:
        task = self.app.get_task(held.job.task)
        limit = task.timeout if task and task.timeout else 0.0
        reason = f"timed out after {limit:g}s"
        ending = outcome.failed(held.job, f"Timeout: {reason}", retryable=True, delay=0.0)
        if not self._report(held, ending):
            return
        self.stats.add(timeouts=1)
        log.warning("job %d (%s) %s; failing the attempt", held.job.id, held.job.task, reason)
        held.ctx.mark_lost(reason)
        if held.cancel is not None:
            held.cancel()

    def _dispatch_now(self) -> bool:
        """Burst mode, about to exit: announce finished jobs first, since the
        announcements may be jobs themselves (webhook deliveries). True if any were."""
        if self._dispatcher is None:
            return False
        try:
            self._dispatcher.run_once()
        except DatabaseError as exc:
            log.warning("cannot announce finished jobs: %s", one_line(exc))
            return False
        # Passes of the maintenance thread count too: one may have told (and enqueued a
        # delivery) just before ours found nothing left to tell.
        seen, self._told_seen = self._told_seen, self._dispatcher.told_total
        return self._told_seen > seen

    def _db_error(self, exc: DatabaseError) -> None:
        self.stats.add(db_errors=1)

    # -- stopping -------------------------------------------------------------------
    def _shut_down(self, q: Queue) -> None:
        self._stopping.set()
        self._release_waiting(q, self._pool.take_waiting())
        running = self._held.in_hand
        if running:
            log.info("stopping: waiting up to %gs for %d running task(s)", self.grace, running)
            self._held.wait_until_returned(self.grace)
        self._accepting = False
        self._completer.close(timeout=self.timing.closing)
        self._release(q, self._held.unwritten())
        self._heartbeater.stop()
        self._maintainer.stop()
        self._stop_pruning.set()
        self._pruning.stop()
        self._presence.leave()
        self._pool.close()
        self._wakeup.close()

    def _release_waiting(self, q: Queue, waiting: list[Held]) -> None:
        """Jobs claimed ahead that never started go back to ``pending`` at once, their
        attempt not spent: written as a snooze of no delay, guarded by each job's claim
        (a claim may also hold jobs still running)."""
        if not waiting:
            return
        for held in waiting:
            held.ctx.mark_lost("the worker shut down; the job was released")
            self._held.claim_report(held)
        released = 0
        try:
            released = len(q.report(snoozed=[(h.job.id, h.key[1], 0.0) for h in waiting]))
        except DatabaseError as exc:
            log.error("cannot release %d waiting job(s) (%s)", len(waiting), one_line(exc))
            self._db_error(exc)
            for held in waiting:  # unwritten: released with the others, or their leases end
                self._held.returned(held)
            return
        for held in waiting:
            self._held.returned(held)
        self._held.written([h.key for h in waiting])
        self.stats.add(released=released)
        log.info("released %d job(s) claimed ahead back to pending", released)

    def _release(self, q: Queue, leftovers: list[Held]) -> None:
        """Give jobs still running (or not recorded) back to ``pending`` right away,
        so another worker need not wait for their leases to run out."""
        if not leftovers:
            return
        for held in leftovers:
            held.ctx.mark_lost("the worker shut down; the job was released")
            if held.cancel is not None:
                held.cancel()
        released = 0
        for claim_id in dict.fromkeys(h.job.claim_id for h in leftovers if h.job.claim_id):
            deadline = time.monotonic() + 5.0
            while True:
                try:
                    released += q.release(claim_id)
                    break
                except DatabaseError as exc:
                    if time.monotonic() >= deadline:
                        log.error(
                            "cannot release a claim (%s); its lease will expire", one_line(exc)
                        )
                        break
                    time.sleep(0.2)
        self._held.written([h.key for h in leftovers])
        self.stats.add(released=released)
        log.info("released %d unfinished job(s) back to pending", released)


__all__ = ["Worker", "WorkerStats"]
