"""``Worker``: claims jobs, runs their tasks, writes their endings, keeps their leases.

Threads, each with one job: the claim loop (the caller's thread), one thread per running
sync task plus one event loop for async tasks, the completer (batched endings), the
heartbeater (leases and timeouts), the maintainer (rescuer, pruner, notifications) and
a wake-up relay. The worker uses only the queue's public operations, so a remote queue
with the same methods can stand in for a database one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from conveyor import validation as check
from conveyor.errors import ConfigurationError, DatabaseError
from conveyor.job import Job
from conveyor.maintenance import Dispatcher, Maintainer, Pruner, Rescuer, Retention, Scheduler
from conveyor.queue import Duration, Queue
from conveyor.retry import seconds
from conveyor.worker import attempts, execution, outcome
from conveyor.worker.completer import Completer, Flushed
from conveyor.worker.context import Context
from conveyor.worker.executor import Executor
from conveyor.worker.heartbeater import Heartbeater
from conveyor.worker.outcome import Outcome, one_line
from conveyor.worker.presence import Presence
from conveyor.worker.registry import Held, Registry
from conveyor.worker.signals import StopSignals
from conveyor.worker.stats import WorkerStats
from conveyor.worker.wakeup import Wakeup

if TYPE_CHECKING:
    from conveyor.app import App

log = logging.getLogger("conveyor.worker")

DEFAULT_LEASE = 30.0
DEFAULT_GRACE = 30.0
_SQLITE_MAX_POLL = 0.2  # a worker that hears of no other process's commits polls this often
_LISTEN_MAX_POLL = 1.0  # when it does hear of them, polling only catches jobs that fall due


class Worker:
    """Runs the tasks of ``app`` from ``queues`` (default: every queue its tasks use).

    ``concurrency``: tasks running at once. ``lease``: seconds a claim lasts without a
    heartbeat (renewed every ``lease / 3``). ``burst``: return once no job is claimable
    and none is running. ``grace``: on stop, how long running tasks may still finish
    before their jobs are released to ``pending``. ``retention``: prune final jobs (off
    by default). ``install_signals``: SIGTERM/SIGINT stop the worker (main thread only).
    """

    def __init__(
        self,
        app: App,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int = 10,
        lease: Duration = DEFAULT_LEASE,
        burst: bool = False,
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
        self.lease = _positive(lease, "lease")
        self.burst = burst
        self.grace = seconds(grace, "grace")
        self.poll_interval = (
            None if poll_interval is None else _positive(poll_interval, "poll_interval")
        )
        self.heartbeat_interval = _positive(heartbeat_interval or self.lease / 3, "heartbeat")
        self.rescue_interval = _positive(rescue_interval or max(0.1, self.lease / 4), "rescue")
        self.retention = retention
        if retention is not None:
            retention.ages()  # a bad duration is refused now, not in a background thread
        self.prune_interval = _positive(prune_interval, "prune_interval")
        self.name = name
        self.install_signals = install_signals
        self.stats = WorkerStats()
        self._stopping = threading.Event()
        self._registry = Registry()
        self._rotation = 0
        self._accepting = True  # endings still go to the completer (until shutdown)

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
            "worker %s: queues %s, concurrency %d, lease %gs, on %s%s",
            self.name,
            ",".join(self.queues),
            self.concurrency,
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
        if self.poll_interval is not None:
            max_poll = self.poll_interval
        else:
            hears = getattr(getattr(q, "backend", None), "hears_other_processes", False)
            max_poll = _LISTEN_MAX_POLL if hears else _SQLITE_MAX_POLL
        self._wakeup = Wakeup(q, min_poll=min(0.025, max_poll), max_poll=max_poll)
        self._executor = Executor(self._on_returned, max_threads=self.concurrency)
        self._completer = Completer(q, self._on_flushed, on_db_error=self._db_error)
        self._heartbeater = Heartbeater(
            q,
            self._registry,
            interval=self.heartbeat_interval,
            on_lost=self._on_lost,
            on_overdue=self._on_overdue,
            on_db_error=self._db_error,
        )
        self._maintainer = Maintainer()
        # A first pass at start; only this worker's queues (others may have other leases).
        self._maintainer.add(Rescuer(q, self.queues), self.rescue_interval)
        if self.retention is not None:
            self._maintainer.add(Pruner(q, self.retention), self.prune_interval)
        if self.app.schedules:  # @app.periodic: every worker helps, none leads
            scheduler = Scheduler(q, self.app.schedules.values())
            self._maintainer.add(scheduler, scheduler.interval)
        self._dispatcher: Dispatcher | None = None
        if self.app.notifier is not None:
            self._dispatcher = Dispatcher(q, self.app.notifier)
            self._maintainer.add(self._dispatcher, 1.0)
        # Last: the first rescue pass comes before anything else (a burst worker needs it).
        self._presence = Presence(
            q, worker=self.name or q.worker_name, queues=self.queues,
            concurrency=self.concurrency, interval=self.heartbeat_interval,
            running=lambda: self._registry.executing,
        )  # fmt: skip
        self._maintainer.add(self._presence, self.heartbeat_interval)
        for part in (self._wakeup, self._completer, self._heartbeater, self._maintainer):
            part.start()

    # -- the claim loop -------------------------------------------------------------
    def _claim_loop(self, q: Queue) -> None:
        failures = 0  # database errors in a row
        while not self._stopping.is_set():
            free = self._free_slots()
            if free <= 0:
                self._wakeup.arm()
                if self._free_slots() <= 0:
                    self._wakeup.sleep(self._stopping, limit=0.5)
                continue
            idle = self._registry.empty()  # before the claim: see the burst check below
            self._wakeup.arm()
            jobs, error = self._claim(q, free)
            if jobs:
                self._start(q, jobs)
                self._wakeup.found_work()
            if error is not None:
                failures += 1
                delay = outcome.retry_delay(failures)
                log.warning("claim failed (%s); retrying in %.2fs", one_line(error), delay)
                self._stopping.wait(delay)
                continue
            failures = 0
            if jobs:
                continue
            if self.burst and idle and not self._dispatch_now():
                return
            self._wakeup.sleep(self._stopping)

    def _dispatch_now(self) -> bool:
        """Burst mode, about to exit: announce finished jobs first, since the
        announcements may be jobs themselves (webhook deliveries). True if any were."""
        if self._dispatcher is None:
            return False
        try:
            return self._dispatcher.run_once() > 0
        except DatabaseError as exc:
            log.warning("cannot announce finished jobs: %s", one_line(exc))
            return False

    def _free_slots(self) -> int:
        # Endings waiting to be written still hold claims: when the database is slow to
        # take them, claiming more would only pile up work that cannot be recorded.
        backlog = max(0, self._completer.outstanding - self.concurrency)
        return self.concurrency - self._registry.executing - backlog

    def _claim(self, q: Queue, free: int) -> tuple[list[Job], DatabaseError | None]:
        """Claim up to ``free`` jobs, visiting the queues from a rotating start."""
        order = self.queues[self._rotation :] + self.queues[: self._rotation]
        self._rotation = (self._rotation + 1) % len(self.queues)
        jobs: list[Job] = []
        for name in order:
            want = free - len(jobs)
            if want <= 0:
                break
            try:
                claim = q.claim(
                    name, limit=want, lease=self.lease, worker=self.name, count_remaining=False
                )
            except DatabaseError as exc:
                self._db_error(exc)
                return jobs, exc  # what was claimed already still runs
            jobs += claim.jobs
        return jobs, None

    def _start(self, q: Queue, jobs: list[Job]) -> None:
        self.stats.add(claimed=len(jobs))
        for job in jobs:
            prepared = execution.prepare(self.app, job)
            ctx = Context(job, q, stopping=self._stopping)
            if isinstance(prepared, Outcome):  # unknown task or a payload that does not fit
                held = self._registry.add(job, ctx, timeout=None, executing=False)
                self._report(held, prepared)
                continue
            held = self._registry.add(job, ctx, timeout=prepared.task.timeout, executing=True)
            log.debug("running job %d (%s), attempt %d", job.id, job.task, job.attempts)
            self._executor.start(held, prepared)

    # -- endings --------------------------------------------------------------------
    def _on_returned(self, held: Held, ending: Outcome | None) -> None:
        if ending is None:
            self._abandon(held)
        elif not self._report(held, ending):
            log.info(
                "job %d: ending discarded (%s)", held.job.id, held.ctx.reason or "already reported"
            )
        self._registry.returned(held)
        self._wakeup.poke()

    def _report(self, held: Held, ending: Outcome) -> bool:
        """Hand an ending to the completer, unless one was already handed in."""
        if not self._registry.claim_report(held):
            return False
        # Shutting down: left unwritten, so its claim is released with the others.
        return self._accepting and self._completer.put(ending)

    def _abandon(self, held: Held) -> None:
        if self._registry.claim_report(held):
            self._registry.written([held.key])

    def _on_flushed(self, flushed: Flushed) -> None:
        refused = flushed.written.refused
        if flushed.uncertain:
            self.stats.add(uncertain=len(refused))
        else:
            self.stats.add(stale_refused=len(refused))
            for o in refused:
                log.warning(
                    "refused stale write: job %d (this worker's claim no longer holds it)",
                    o.job.id,
                )
        self.stats.add(snoozed=len(flushed.written.snoozed))
        attempts.log_endings(flushed.outcomes, flushed.written)
        finals = 0
        for job in flushed.written.jobs:
            if job.status == "completed":
                self.stats.add(completed=1)
            elif job.status == "failed":
                self.stats.add(failed=1)
            else:
                self.stats.add(retried=1)
            finals += job.is_final
        # Endings not written because the database stayed down stay unwritten: shutdown
        # releases their claims instead.
        unwritten = {id(o) for o in flushed.unwritten}
        self._registry.written(
            [(o.job.id, o.claim_id) for o in flushed.outcomes if id(o) not in unwritten]
        )
        if finals and self._dispatcher is not None:
            self._maintainer.poke(Dispatcher.name)
        self._wakeup.poke()

    def _on_lost(self, held: Held, reason: str) -> None:
        self.stats.add(leases_lost=1)
        log.warning("job %d: %s", held.job.id, reason)
        held.ctx.mark_lost(reason)
        if held.cancel is not None:
            held.cancel()

    def _on_overdue(self, held: Held) -> None:
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

    def _db_error(self, exc: DatabaseError) -> None:
        self.stats.add(db_errors=1)

    # -- stopping -------------------------------------------------------------------
    def _shut_down(self, q: Queue) -> None:
        self._stopping.set()
        running = self._registry.executing
        if running:
            log.info("stopping: waiting up to %gs for %d running task(s)", self.grace, running)
            self._registry.wait_until_idle(self.grace)
        self._accepting = False
        self._completer.close(timeout=max(2.0, min(self.grace, 10.0)))
        self._release(q, self._registry.unwritten())
        self._heartbeater.stop()
        self._maintainer.stop()
        self._presence.leave()
        self._executor.close()
        self._wakeup.close()

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
        self._registry.written([h.key for h in leftovers])
        self.stats.add(released=released)
        log.info("released %d unfinished job(s) back to pending", released)


def _positive(value: Duration, name: str) -> float:
    return seconds(value, name, allow_zero=False)


__all__ = ["Worker", "WorkerStats"]
