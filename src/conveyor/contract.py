"""The contract: every operation of a queue, with its signature, written once.

``QueueAPI`` is what the worker, the HTTP service and the command line depend on.
``Queue`` (a database) and ``RemoteQueue`` (a conveyor server) implement it by running
the calls that these methods build: arguments are checked here, on the caller's side,
whichever queue runs them. ``conveyor.aio`` mirrors it with coroutines.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence, Sized
from datetime import datetime
from typing import Any, Self, TypeVar, Unpack

from conveyor import crypto, tracing
from conveyor.errors import JobNotFound
from conveyor.info import (
    ExpiredJob,
    PayloadMatches,
    QueueSettings,
    Rate,
    RetentionPolicy,
    ScheduleInfo,
    TaskTimings,
    Throughput,
    ThroughputHour,
    WorkerInfo,
)
from conveyor.job import Claim, Job, Stats, Status, sum_stats
from conveyor.ops import (
    Call,
    admin,
    claims,
    enqueue,
    flow,
    notifications,
    reading,
    registry,
    reports,
    retention,
)
from conveyor.ops import workflows as runs
from conveyor.ops.defaults import DEFAULT_LEASE, Defaults, Duration
from conveyor.options import EnqueueOptions
from conveyor.retry import BackoffPolicy, seconds
from conveyor.workflow import Workflow, WorkflowRun, WorkflowSummary

T = TypeVar("T")


def _for_reader(job: Job | None) -> Job | None:
    """A job as readers see it: the fields its task redacts hidden (``conveyor.crypto``)."""
    return None if job is None else crypto.redacted(job)


def _count(items: object) -> int:
    """How many items a batch holds, when it says (for the producer span)."""
    return len(items) if isinstance(items, Sized) else 0


class QueueAPI(ABC):
    """A job queue. Implementations run ``Call`` objects (``_run``)."""

    defaults: Defaults

    @abstractmethod
    def _run(self, call: Call[T]) -> T: ...

    def _insert_plain(self, task: Any, payload: Any, options: Mapping[str, Any]) -> Job | None:
        """An enqueue whose options are among ``PLAIN_OPTIONS``, inserted without its
        plan where the queue can (a database queue); None: run the plan."""
        return None

    # -- the defaults, by their familiar names --------------------------------------
    @property
    def max_payload_bytes(self) -> int:
        return self.defaults.max_payload_bytes

    @property
    def default_max_attempts(self) -> int:
        return self.defaults.max_attempts

    @property
    def backoff(self) -> BackoffPolicy:
        return self.defaults.backoff

    @property
    def worker_name(self) -> str:
        return self.defaults.worker_name

    # -- lifecycle ------------------------------------------------------------------
    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        """The database clock, the only clock conveyor trusts."""
        return self._run(reading.now())

    # -- enqueue --------------------------------------------------------------------
    def enqueue(self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]) -> Job:
        """Add a job; with a ``key``, apply the dedupe policy (see ``Dedupe``). The
        options (``conveyor.options.EnqueueOptions``, defaults in brackets): ``queue``
        ["default"], ``key``, ``priority`` [0], ``run_at``, ``max_attempts`` [the
        queue's], ``subscriber``; the dedupe policy ``on_active`` ["return"],
        ``cache_ttl``, ``on_failed`` ["new"], ``on_completed`` ["new"]; ``group``: its
        concurrency group; ``after``: ids of jobs it runs after (once they completed;
        when one fails or is cancelled this job is cancelled, unless
        ``on_dependency_failure="run"``); ``conn``: the caller's open connection, so the
        job commits with their work."""
        call = enqueue.enqueue  # the call reads the producer span's context: built inside it
        if tracing.hooks is None:
            if options.keys() <= enqueue.PLAIN_OPTIONS:
                inserted = self._insert_plain(task, payload, options)
                if inserted is not None:
                    return inserted
            return self._run(call(self.defaults, task, payload, **options))
        with tracing.hooks.sending("send", str(options.get("queue", "default")), 1) as span:
            job = self._run(call(self.defaults, task, payload, **options))
            span.sent([job.id])
            return job

    def enqueue_many(
        self, items: Iterable[Mapping[str, Any]], *, queue: str = "default", conn: Any = None
    ) -> list[Job]:
        """Add many jobs in one transaction. Each item is a dict with the keyword names
        of ``enqueue``; every item is checked before anything is written."""
        call = enqueue.enqueue_many
        if tracing.hooks is None:
            return self._run(call(self.defaults, items, queue=queue, conn=conn))
        with tracing.hooks.sending("publish", str(queue), _count(items)) as span:
            jobs = self._run(call(self.defaults, items, queue=queue, conn=conn))
            span.sent([job.id for job in jobs])
            return jobs

    def enqueue_ids(
        self, items: Iterable[Mapping[str, Any]], *, queue: str = "default", conn: Any = None
    ) -> list[int]:
        """Like ``enqueue_many`` for large loads of jobs without keys, subscribers or
        dependencies: returns only the new ids."""
        call = enqueue.enqueue_ids
        if tracing.hooks is None:
            return self._run(call(self.defaults, items, queue=queue, conn=conn))
        with tracing.hooks.sending("publish", str(queue), _count(items)) as span:
            ids = self._run(call(self.defaults, items, queue=queue, conn=conn))
            span.sent(ids)
            return ids

    # -- claim and report -----------------------------------------------------------
    def claim(
        self,
        queue: str = "default",
        *,
        limit: int = 1,
        lease: Duration = DEFAULT_LEASE,
        worker: str | None = None,
        ack: str | None = None,
        count_remaining: bool = True,
        report: reports.Report | None = None,
    ) -> Claim:
        """Claim up to ``limit`` claimable jobs, by priority then FIFO, under one new
        claim id, within the queue's flow control. ``ack``: a previous claim id whose
        running jobs are completed first, in the same transaction; ``report``: endings
        of earlier runs (a ``Report``) written first, in the same transaction, their
        new statuses in ``Claim.reported``. ``remaining`` counts the jobs still
        claimable (``count_remaining=False`` skips it)."""
        return self._run(
            claims.claim(
                self.defaults, queue, limit=limit, lease=lease, worker=worker, ack=ack,
                count_remaining=count_remaining, report=report,
            )
        )  # fmt: skip

    def claim_job(
        self, job_id: int, *, lease: Duration = DEFAULT_LEASE, worker: str | None = None
    ) -> Claim:
        """Claim one job by id, if it is pending with its dependencies met (else
        ``InvalidTransition``). The caller chose it: the queue's pause and limits do not
        apply."""
        return self._run(claims.claim_job(self.defaults, job_id, lease=lease, worker=worker))

    def complete(self, job_id: int, claim_id: str, result: Any = None) -> Job:
        """Mark a running job completed, storing ``result`` (its ``error`` is cleared;
        ``errors`` keeps the history). Raises ``StaleClaim`` when the claim no longer
        holds the job."""
        return self._run(reports.complete(self.defaults, job_id, claim_id, result))

    def complete_many(self, items: Sequence[tuple[int, str, Any]]) -> list[Job]:
        """Complete ``(job_id, claim_id, result)`` triples in one statement. Returns the
        jobs completed; items whose claim no longer holds the job are left out."""
        if not items:
            return []
        return self._run(reports.complete_many(self.defaults, items))

    def fail(
        self,
        job_id: int,
        claim_id: str,
        error: str,
        *,
        retryable: bool = True,
        delay: Duration | None = None,
    ) -> Job:
        """Report a failed attempt. Retryable with attempts left: back to ``pending``,
        runnable after ``delay`` (default: the backoff policy). Otherwise ``failed``."""
        return self._run(
            reports.fail(self.defaults, job_id, claim_id, error, retryable=retryable, delay=delay)
        )

    def fail_many(self, items: Sequence[tuple[int, str, str, bool, Duration | None]]) -> list[Job]:
        """Fail ``(job_id, claim_id, error, retryable, delay)`` tuples in one statement.
        A ``None`` delay uses the backoff policy for the job's attempt count. Returns the
        jobs changed; items whose claim no longer holds the job are left out."""
        if not items:
            return []
        return self._run(reports.fail_many(self.defaults, items))

    def snooze(self, job_id: int, claim_id: str, delay: Duration) -> Job:
        """Put a running job back to pending for ``delay`` without spending an attempt:
        waiting on something is not a failure."""
        return self._run(reports.snooze(job_id, claim_id, delay))

    def report(
        self,
        *,
        completed: Sequence[tuple[int, str, Any]] = (),
        failed: Sequence[tuple[int, str, str, bool, Duration | None]] = (),
        snoozed: Sequence[tuple[int, str, Duration]] = (),
    ) -> dict[int, Status]:
        """Write the endings of many runs in one transaction: ``completed`` as for
        ``complete_many``, ``failed`` as for ``fail_many``, ``snoozed`` as
        ``(job_id, claim_id, delay)``. Returns the new status of each job written; a job
        left out was refused (its claim no longer holds it)."""
        endings = reports.Report(completed=completed, failed=failed, snoozed=snoozed)
        if not endings:
            return {}
        return self._run(reports.report(self.defaults, endings))

    def heartbeat(self, job_id: int, claim_id: str, *, extend: Duration | None = None) -> Job:
        """Prove the claim is alive: the lease now ends ``extend`` from now (default: the
        claim's lease length)."""
        return self._run(reports.heartbeat(job_id, claim_id, extend=extend))

    def heartbeat_many(
        self, items: Sequence[tuple[int, str]], *, extend: Duration | None = None
    ) -> list[Job]:
        """Renew many leases in one statement; returns the jobs still held."""
        if not items:
            return []
        return self._run(reports.heartbeat_many(items, extend=extend))

    def renew(
        self, items: Sequence[tuple[int, str]], *, extend: Duration | None = None
    ) -> set[int]:
        """Like ``heartbeat_many``, returning only the ids of the jobs still held."""
        if not items:
            return set()
        return self._run(reports.renew(items, extend=extend))

    def progress(
        self,
        job_id: int,
        claim_id: str,
        *,
        total: int | None = None,
        completed: int | None = None,
        failed: int | None = None,
        current: Any = None,
        checkpoint: Any = None,
        detail: Any = None,
    ) -> Job:
        """Record progress as absolute values (a replay changes nothing); ``None`` leaves
        a field as it was. Also renews the lease."""
        return self._run(
            reports.progress(
                self.defaults, job_id, claim_id, total=total, completed=completed,
                failed=failed, current=current, checkpoint=checkpoint, detail=detail,
            )
        )  # fmt: skip

    # -- claims, admin --------------------------------------------------------------
    def ack(self, claim_id: str) -> int:
        """Complete every running job of a claim; returns how many."""
        return self._run(claims.ack(claim_id))

    def release(self, claim_id: str, *, queue: str | Sequence[str] | None = None) -> int:
        """Put a claim's running jobs (of ``queue``, when given) back to pending (an
        admin reset); returns how many."""
        return self._run(claims.release(claim_id, queue=queue))

    def release_job(self, job_id: int) -> Job:
        """Put one running job back to pending, whoever holds it (an admin reset)."""
        return self._run(claims.release_job(job_id))

    def reset_claims(
        self,
        older_than: Duration,
        *,
        queue: str | Sequence[str] | None = None,
        task: str | Sequence[str] | None = None,
    ) -> int:
        """Put back to pending every running job (of ``queue`` and ``task``, each one name
        or several, when given) claimed more than ``older_than`` ago."""
        return self._run(claims.reset_claims(older_than, queue=queue, task=task))

    def recover(
        self,
        *,
        queue: str | Sequence[str] | None = None,
        task: str | Sequence[str] | None = None,
    ) -> int:
        """Running jobs (of ``queue`` and ``task``, when given) whose lease expired go
        back to pending, or to failed when their attempts are spent. Returns how many
        were recovered."""
        return self._run(claims.recover(queue=queue, task=task))

    def retry(self, job_id: int, *, reset_attempts: bool = True) -> Job:
        """A final job (failed, cancelled or completed) back to pending, attempts reset.
        ``reset_attempts=False``: only a failed or cancelled job with attempts left, which
        keeps the attempts it spent (else ``InvalidTransition``)."""
        return self._run(admin.retry(job_id, reset_attempts=reset_attempts))

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending or running job. A running task's later reports are refused."""
        return self._run(admin.cancel(job_id))

    def run_now(self, job_id: int) -> Job:
        """A pending job due now: a scheduled job, or one waiting out its retry back-off,
        stops waiting (its dependencies still hold it). Else ``InvalidTransition``."""
        return self._run(admin.run_now(job_id))

    def run_now_all(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        kind: str | None = None,
        limit: int = 1000,
    ) -> list[int]:
        """At most ``limit`` (1 to 1000) pending jobs not yet due, soonest first, due
        now; ``kind``: "scheduled" (never tried), "retrying" (an attempt failed) or None
        (both). Returns their ids: repeat while it returns ``limit`` of them."""
        return self._run(admin.run_now_all(queue=queue, task=task, kind=kind, limit=limit))

    def delete_job(self, job_id: int) -> None:
        """Delete a final job (completed, failed or cancelled) with its subscribers and
        dependency edges; an active one is refused (``InvalidTransition``): cancel it
        first."""
        self._run(admin.delete_job(job_id))

    def complete_by_key(
        self,
        key: str,
        *,
        queue: str = "default",
        result: Any = None,
        include_failed: bool = False,
        conn: Any = None,
    ) -> int:
        """The work was done elsewhere: complete the active job(s) with this key, and
        with ``include_failed`` a failed one too (reconciliation). ``conn``: the caller's
        open connection, so the jobs complete with their work (as for ``enqueue``)."""
        return self._run(
            admin.complete_by_key(
                self.defaults, key, queue=queue, result=result, include_failed=include_failed,
                conn=conn,
            )
        )  # fmt: skip

    def cancel_by_key(self, key: str, *, queue: str = "default") -> int:
        """Cancel every active (pending or running) job with this key; returns how many.
        A running job's worker is fenced out: its later writes are refused."""
        return self._run(admin.cancel_by_key(key, queue=queue))

    def fail_by_key(self, key: str, error: str, *, queue: str = "default") -> int:
        """Fail every active (pending or running) job with this key for good, whatever
        attempts remain: ``error``, ``error_kind`` terminal, one more entry in its
        ``errors``. A running job's worker is fenced out. Returns how many."""
        return self._run(admin.fail_by_key(key, error, queue=queue))

    def prune(self, *, older_than: Duration, statuses: Iterable[str] = ("completed",)) -> int:
        """Delete final jobs that finished more than ``older_than`` ago, in batches of a
        thousand a status, each its own short transaction (claims and endings go on
        between them). Returns how many were deleted."""
        return self._in_batches(admin.prune(older_than=older_than, statuses=statuses))

    # -- retention ------------------------------------------------------------------------
    def set_retention(
        self,
        status: str,
        keep: Duration | None,
        *,
        queue: str | None = None,
        task: str | None = None,
        archive: str | None = None,
        retire_keys: bool = False,
    ) -> RetentionPolicy:
        """Keep final jobs of ``status`` (completed, failed or cancelled) for ``keep``
        after they finished (``None``: for ever), for ``queue`` and/or ``task`` (None:
        any); replaces the policy for the same three. A job's most specific policy
        wins: queue and task, then task, then queue, then the status's default.
        ``archive``: ``"task:NAME"`` or ``"file:PATH"``, where each pruned job's record
        goes before the job is deleted; ``retire_keys``: the keys of the jobs it prunes
        stay taken, a later enqueue answered as if the job were still there. Workers
        apply the policies (``conveyor.maintenance.Pruner``)."""
        return self._run(
            retention.set_retention(
                status, keep, queue=queue, task=task, archive=archive, retire_keys=retire_keys
            )
        )

    def retention_policies(self) -> list[RetentionPolicy]:
        """Every retention policy, by status, queue and task."""
        return self._run(retention.retention_policies())

    def clear_retention(
        self, *, status: str | None = None, queue: str | None = None, task: str | None = None
    ) -> int:
        """Delete the policy for ``status``, ``queue`` and ``task`` (None: the one for
        any), or for every status of them when ``status`` is None; returns how many."""
        return self._run(retention.clear_retention(status=status, queue=queue, task=task))

    def expired_jobs(
        self, *, limit: int = 500, archive: str | None = None, after: int | None = None
    ) -> list[ExpiredJob]:
        """At most ``limit`` (up to 1,000) final jobs that their retention policy lets go
        now, whole, by id (above ``after``: the last id of the previous batch), each with
        its policy and its archive (the policy's, else ``archive``). Read only:
        ``prune_expired`` deletes them."""
        return self._run(retention.expired_jobs(limit=limit, archive=archive, after=after))

    def prune_expired(self, ids: Iterable[int], *, archive: str | None = None) -> int:
        """Delete those of ``ids`` (up to 1,000) that their policy still lets go, in one
        transaction: keys retired and, for an archive task, its jobs enqueued in the
        same transaction. A file archive is the caller's to write first. Returns how
        many jobs were deleted."""
        return self._run(retention.prune_expired(self.defaults, ids, archive=archive))

    # -- flow control -------------------------------------------------------------------
    def pause(self, queue: str) -> QueueSettings:
        """Stop every worker claiming from ``queue`` (at their next claim); running
        jobs finish. Kept in the database until ``resume``."""
        return self._run(flow.pause(queue))

    def resume(self, queue: str) -> QueueSettings:
        return self._run(flow.resume(queue))

    def set_limits(
        self,
        queue: str,
        *,
        max_running: int | None = None,
        group_max_running: int | None = None,
        rate: Rate | str | None = None,
        group_rate: Rate | str | None = None,
    ) -> QueueSettings:
        """Replace the queue's limits (``None`` removes one): jobs running at once on all
        workers together, the same per group, and starts per window (``Rate(10,
        per=timedelta(seconds=1))`` or ``"10/1s"``) for the queue and per group."""
        return self._run(
            flow.set_limits(
                queue, max_running=max_running, group_max_running=group_max_running,
                rate=rate, group_rate=group_rate,
            )
        )  # fmt: skip

    def queue_settings(self, queue: str | None = None) -> dict[str, QueueSettings]:
        """The flow control of every queue that has some (or of ``queue``)."""
        return self._run(flow.queue_settings(queue))

    # -- reading --------------------------------------------------------------------
    def get(self, job_id: int) -> Job | None:
        """The job, or ``None``. A running job whose lease expired is recovered first."""
        return _for_reader(self._run(reading.get(job_id)))

    def latest(self, key: str, *, queue: str = "default", task: str | None = None) -> Job | None:
        """The newest job with this key (and task), whatever its state."""
        return _for_reader(self._run(reading.latest(key, queue=queue, task=task)))

    def jobs(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        key: str | None = None,
        task: str | None = None,
        limit: int = 100,
        after: int | None = None,
        newest_first: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> list[Job]:
        """Jobs in id order, ``limit`` at a time; page with ``after`` = the last id seen.
        ``newest_first``: descending order, where ``after`` means ids below it."""
        found = self._run(
            reading.jobs(
                queue=queue, status=status, key=key, task=task, limit=limit, after=after,
                newest_first=newest_first, created_after=created_after,
                created_before=created_before,
            )
        )  # fmt: skip
        return [crypto.redacted(job) for job in found]

    def deferred(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        kind: str | None = None,
        limit: int = 100,
    ) -> list[Job]:
        """Pending jobs not yet due, soonest first (at most ``limit``, up to 500):
        ``kind`` "scheduled" (never tried), "retrying" (an attempt failed, waiting out its
        back-off) or None (both)."""
        return self._run(reading.deferred(queue=queue, task=task, kind=kind, limit=limit))

    def task_timings(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        hours: int = 24,
        sample: int = 10_000,
    ) -> list[TaskTimings]:
        """Per task, over the ``sample`` (up to 100,000) jobs that finished last within
        the last ``hours``: runs, failures, and the p50 and p95 run time of the completed
        ones, computed by the database."""
        return self._run(reading.task_timings(queue=queue, task=task, hours=hours, sample=sample))

    def search_payload(
        self,
        field: str,
        value: str,
        *,
        queue: str | None = None,
        status: str | None = None,
        task: str | None = None,
        before: int | None = None,
        limit: int = 50,
        scan: int = 10_000,
    ) -> PayloadMatches:
        """Jobs whose payload's top-level ``field`` reads ``value`` (as text), newest
        first, among the ``scan`` (up to 100,000) newest jobs below id ``before`` that
        match the other filters: a bounded walk whatever the table holds. Go on with
        ``before=result.next_before`` until it is None."""
        return self._run(
            reading.search_payload(
                field=field, value=value, queue=queue, status=status, task=task,
                before=before, limit=limit, scan=scan,
            )
        )  # fmt: skip

    def dependents(self, job_id: int) -> list[int]:
        """The ids of the jobs that run after this one."""
        return self._run(reading.dependents(job_id))

    def stats(self, queue: str | None = None) -> Stats:
        """Counts per status (of one queue, or all), and the oldest pending job's age."""
        per_queue = self.queue_stats(queue)
        if queue is not None:
            return per_queue.get(queue, Stats())
        return sum_stats(per_queue.values())

    def queue_stats(self, queue: str | None = None) -> dict[str, Stats]:
        """``{queue: Stats}`` for every queue with jobs (or just ``queue``); ``stats()``
        gives the total."""
        per_queue, fold = self._run(reading.queue_stats(queue))
        if fold:  # counts kept as deltas piled up: fold them so reads stay cheap
            self.fold_counts()
        return per_queue

    def task_stats(self, queue: str | None = None) -> dict[str, Stats]:
        """``{task: Stats}``: counts per status for every task with jobs (of ``queue``,
        when given), from counts kept per queue, status and task as ``stats()``'s are:
        a few rows, whatever number of jobs the table holds."""
        return self._run(reading.task_stats(queue))

    def fold_counts(self) -> int:
        """Move the job counts' pending changes into the counts (PostgreSQL keeps them
        apart so concurrent writers never wait on a shared counter; workers fold them
        as part of their upkeep). Returns how many changes were folded."""
        # A batch per transaction (MySQL): short ones, in one lock order.
        return self._in_batches(reading.fold_counts())

    def _in_batches(self, call: Call[tuple[int, bool]]) -> int:
        """Runs ``call``, one batch per transaction, until it says it is done or a batch
        changes nothing (rows another transaction holds stay); the total changed."""
        total = 0
        while True:
            done, more = self._run(call)
            total += done
            if not (more and done):
                return total

    def throughput(self, *, queue: str | None = None, minutes: int = 60) -> list[Throughput]:
        """Jobs completed and failed per minute over the last ``minutes``."""
        return self._run(reading.throughput(queue=queue, minutes=minutes))

    def throughput_hours(
        self, *, queue: str | None = None, hours: int = 24
    ) -> list[ThroughputHour]:
        """Jobs completed and failed per hour over the last ``hours`` (up to 31 days):
        from hourly roll-ups and the last day's minutes."""
        return self._run(reading.throughput_hours(queue=queue, hours=hours))

    def roll_up_throughput(
        self,
        *,
        keep_minutes: Duration = reading.KEEP_MINUTES,
        keep_hours: Duration = reading.KEEP_HOURS,
    ) -> int:
        """Per-minute throughput older than ``keep_minutes`` (a day) is summed into
        hourly rows, kept for ``keep_hours`` (31 days); workers do it as part of their
        upkeep. Returns how many hourly rows were written."""
        return self._run(
            reading.roll_up_throughput(keep_minutes=keep_minutes, keep_hours=keep_hours)
        )

    def subscribers(self, job_id: int) -> list[str]:
        return self._run(reading.subscribers(job_id))

    # -- workers and schedules ------------------------------------------------------------
    def worker_seen(
        self,
        name: str,
        *,
        host: str,
        pid: int,
        queues: Sequence[str],
        concurrency: int,
        version: str,
        running: int,
        ttl: Duration,
        busy: Sequence[tuple[int, datetime]] | None = None,
    ) -> None:
        """Register a worker or refresh its entry; it counts as alive for ``ttl``.
        ``busy``: the jobs its tasks are running now, each ``(job id, started at)`` (a
        job claimed ahead and still waiting for a slot is not one of them); None keeps
        what the entry said."""
        self._run(
            registry.worker_seen(
                name=name, host=host, pid=pid, queues=queues, concurrency=concurrency,
                version=version, running=running, ttl=ttl, busy=busy,
            )
        )  # fmt: skip

    def worker_stopped(self, name: str) -> None:
        """Remove a worker's entry (a clean stop)."""
        self._run(registry.worker_stopped(name))

    def workers(self) -> list[WorkerInfo]:
        """Every registered worker whose entry has not expired, idle ones too."""
        return self._run(registry.workers())

    def forget_workers(self, older_than: Duration) -> int:
        """Delete entries of workers presumed dead for longer than ``older_than``."""
        return self._run(registry.forget_workers(older_than))

    def save_schedule(
        self,
        name: str,
        *,
        task: str,
        queue: str,
        spec: str,
        first_slot: datetime | None,
        next_slot: datetime | None,
    ) -> ScheduleInfo:
        """Declare a periodic schedule (a new one is owed no slot before ``first_slot``)."""
        return self._run(
            registry.save_schedule(
                name=name, task=task, queue=queue, spec=spec, first_slot=first_slot,
                next_slot=next_slot,
            )
        )  # fmt: skip

    def run_schedule_slot(
        self,
        name: str,
        *,
        slot: datetime,
        next_slot: datetime | None,
        task: str,
        payload: Any = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int | None = None,
    ) -> Job | None:
        """Enqueue the schedule's job for ``slot`` unless it was taken already: however
        many workers call this, each slot is enqueued once. Returns the job, or None."""

        def call() -> Call[Job | None]:  # built inside the producer span, as enqueue's
            return registry.run_schedule_slot(
                self.defaults, name=name, slot=slot, next_slot=next_slot, task=task,
                payload=payload, queue=queue, priority=priority, max_attempts=max_attempts,
            )  # fmt: skip

        if tracing.hooks is None:
            return self._run(call())
        with tracing.hooks.scheduling(str(name), str(queue), slot) as span:
            job = self._run(call())
            span.sent([] if job is None else [job.id])
            return job

    def schedules(self) -> list[ScheduleInfo]:
        """Every periodic schedule, with its last and next slot."""
        return self._run(registry.schedules())

    # -- workflows ------------------------------------------------------------------------
    def enqueue_workflow(self, workflow: Workflow) -> WorkflowRun:
        """Enqueue every step of ``workflow`` in one transaction (all or nothing); each
        step is a job that runs once the steps it names completed. Returns the run:
        its id and each step's job by step name."""
        call = runs.enqueue_workflow  # the steps read the producer span's context
        if tracing.hooks is None:
            return self._run(call(self.defaults, workflow))
        wf = runs.as_workflow(workflow)
        queues = sorted({str(s.options.get("queue", "default")) for s in wf})
        with tracing.hooks.sending_workflow(wf.label, queues, len(wf)) as span:
            run = self._run(call(self.defaults, wf))
            span.sent(run.id)
            return run

    def workflow(self, workflow_id: int) -> WorkflowRun:
        """A run: its status, its steps' counts by status and its steps' jobs (else
        ``WorkflowNotFound``)."""
        return self._run(runs.workflow(workflow_id))

    def workflows(
        self,
        *,
        limit: int = 100,
        after: int | None = None,
        newest_first: bool = False,
        status: str | None = None,
        label: str | None = None,
    ) -> list[WorkflowSummary]:
        """Runs in id order, ``limit`` at a time, with their status and counts; page with
        ``after`` = the last id seen (``newest_first``: descending, below ``after``).
        ``status``: only runs in that status (``running``, ``completed``, ``failed``,
        ``cancelled``); ``label``: only runs with that label."""
        return self._run(
            runs.workflows(
                limit=limit, after=after, newest_first=newest_first, status=status, label=label
            )
        )

    def cancel_workflow(self, workflow_id: int) -> WorkflowRun:
        """Cancel every step of the run that is not final yet; returns the run."""
        return self._run(runs.cancel_workflow(workflow_id))

    def retry_workflow(self, workflow_id: int) -> WorkflowRun:
        """Retry the run's failed steps and the steps after them that already ended
        (cancelled because of the failure, or run anyway): pending again, attempts
        reset, each running once its parents completed. Returns the run."""
        return self._run(runs.retry_workflow(workflow_id))

    def parents(self, job_id: int) -> list[Job]:
        """The jobs this one runs after (its dependencies), whole, in id order."""
        return self._run(runs.parents(job_id))

    # -- notifications ------------------------------------------------------------------
    def take_notifications(
        self, *, limit: int = 100, lease: Duration = 60.0
    ) -> list[tuple[Job, list[str]]]:
        """Take up to ``limit`` subscribers of final jobs who were not yet told of the
        job's latest finish, with their jobs. They are this caller's for ``lease``: call
        ``mark_notified`` once they are told (or ``retry_notifications``); if neither
        comes (a crash), they are offered again when the lease ends."""
        return self._run(notifications.take_notifications(limit=limit, lease=lease))

    def mark_notified(self, items: Sequence[tuple[int, str]]) -> int:
        """Record that subscribers were told: ``(job_id, subscriber)`` pairs."""
        return self._run(notifications.mark_notified(items))

    def retry_notifications(
        self,
        items: Sequence[tuple[int, str]],
        error: str,
        *,
        base: Duration = 5.0,
        cap: Duration = 3600.0,
        max_attempts: int = 10,
    ) -> int:
        """Deliveries that failed: offered again after a back-off doubling from ``base``
        (capped at ``cap``); after ``max_attempts`` they count as told, the error kept."""
        return self._run(
            notifications.retry_notifications(
                items, error, base=base, cap=cap, max_attempts=max_attempts
            )
        )

    # -- waiting --------------------------------------------------------------------
    def generation(self) -> int:
        """A counter that grows whenever this process learns of a change. Read it before
        looking at the state you wait on, then pass it to ``wait_for_change``. A queue
        that hears of no changes keeps it at 0 (waiters then poll)."""
        return 0

    def wait_for_change(self, since: int, timeout: float) -> bool:
        """Block until ``generation()`` passes ``since`` or ``timeout`` seconds pass;
        True when a change was seen (a timeout means: look again)."""
        time.sleep(max(0.0, timeout))
        return False

    def wait(self, job_id: int, timeout: Duration | None = None, *, poll: float = 0.5) -> Job:
        """Block until the job is final, or ``timeout`` passes; returns the job as it is
        then (check ``job.is_final``). Woken by LISTEN/NOTIFY on PostgreSQL and by a
        watch for commits on SQLite (any process's); otherwise it looks again every ``poll``
        seconds. A remote queue long-polls its server instead."""
        limit = None if timeout is None else seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            job = self._watch(job_id, left, poll)
            if job is not None:
                return job

    def _watch(self, job_id: int, left: float | None, poll: float) -> Job | None:
        """One step of ``wait``: the job if it is final or no time is ``left``; else
        ``None`` once a change was heard or ``poll`` seconds passed (look again)."""
        since = self.generation()
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(f"job {job_id} does not exist")
        if job.is_final or left == 0:
            return job
        self.wait_for_change(since, poll if left is None else min(poll, left))
        return None
