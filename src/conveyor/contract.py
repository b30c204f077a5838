"""The contract: every operation of a queue, with its signature, written once.

``QueueAPI`` is what the worker, the HTTP service and the command line depend on.
``Queue`` (a database) and ``RemoteQueue`` (a conveyor server) implement it by running
the calls that these methods build: arguments are checked here, on the caller's side,
whichever queue runs them. ``conveyor.aio`` mirrors it with coroutines.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Self, TypeVar

from conveyor.errors import JobNotFound
from conveyor.job import Claim, Job, Stats, sum_stats
from conveyor.ops import Call, admin, claims, enqueue, notifications, reading, reports
from conveyor.ops.defaults import DEFAULT_LEASE, Defaults, Duration
from conveyor.ops.enqueue import OnActive, OnFailed
from conveyor.retry import BackoffPolicy, seconds

T = TypeVar("T")


class QueueAPI(ABC):
    """A job queue. Implementations run ``Call`` objects (``_run``)."""

    defaults: Defaults

    @abstractmethod
    def _run(self, call: Call[T]) -> T: ...

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
    def enqueue(
        self,
        task: str,
        payload: Any = None,
        *,
        queue: str = "default",
        key: str | None = None,
        priority: int = 0,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        subscriber: str | None = None,
        conn: Any = None,
        on_active: OnActive = "return",
        cache_ttl: Duration | None = None,
        on_failed: OnFailed = "new",
    ) -> Job:
        """Add a job; with a ``key``, apply the dedupe policy (see ``Dedupe``).
        ``conn``: the caller's open connection, so the job commits with their work."""
        return self._run(
            enqueue.enqueue(
                self.defaults,
                task,
                payload,
                queue=queue,
                key=key,
                priority=priority,
                run_at=run_at,
                max_attempts=max_attempts,
                subscriber=subscriber,
                conn=conn,
                on_active=on_active,
                cache_ttl=cache_ttl,
                on_failed=on_failed,
            )
        )

    def enqueue_many(
        self, items: Iterable[Mapping[str, Any]], *, queue: str = "default", conn: Any = None
    ) -> list[Job]:
        """Add many jobs in one transaction. Each item is a dict with the keyword names
        of ``enqueue``; every item is checked before anything is written."""
        return self._run(enqueue.enqueue_many(self.defaults, items, queue=queue, conn=conn))

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
    ) -> Claim:
        """Claim up to ``limit`` claimable jobs, by priority then FIFO, under one new
        claim id. ``ack``: a previous claim id whose running jobs are completed first, in
        the same transaction. ``count_remaining=False`` skips counting the backlog."""
        return self._run(
            claims.claim(
                self.defaults,
                queue,
                limit=limit,
                lease=lease,
                worker=worker,
                ack=ack,
                count_remaining=count_remaining,
            )
        )

    def complete(self, job_id: int, claim_id: str, result: Any = None) -> Job:
        """Mark a running job completed, storing ``result``. Raises ``StaleClaim`` when
        the claim no longer holds the job."""
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
                self.defaults,
                job_id,
                claim_id,
                total=total,
                completed=completed,
                failed=failed,
                current=current,
                checkpoint=checkpoint,
                detail=detail,
            )
        )

    # -- claims, admin --------------------------------------------------------------
    def ack(self, claim_id: str) -> int:
        """Complete every running job of a claim; returns how many."""
        return self._run(claims.ack(claim_id))

    def release(self, claim_id: str) -> int:
        """Put a claim's running jobs back to pending (an admin reset); returns how many."""
        return self._run(claims.release(claim_id))

    def reset_claims(self, older_than: Duration) -> int:
        """Put back to pending every running job claimed more than ``older_than`` ago."""
        return self._run(claims.reset_claims(older_than))

    def recover(self) -> int:
        """Running jobs whose lease expired go back to pending, or to failed when their
        attempts are spent. Returns how many jobs were recovered."""
        return self._run(claims.recover())

    def retry(self, job_id: int) -> Job:
        """A final job (failed, cancelled or completed) back to pending, attempts reset."""
        return self._run(admin.retry(job_id))

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending or running job. A running task's later reports are refused."""
        return self._run(admin.cancel(job_id))

    def complete_by_key(self, key: str, *, queue: str = "default", result: Any = None) -> int:
        """The work was done elsewhere: complete the active job(s) with this key."""
        return self._run(admin.complete_by_key(self.defaults, key, queue=queue, result=result))

    def prune(self, *, older_than: Duration, statuses: Iterable[str] = ("completed",)) -> int:
        """Delete final jobs that finished more than ``older_than`` ago."""
        return self._run(admin.prune(older_than=older_than, statuses=statuses))

    # -- reading --------------------------------------------------------------------
    def get(self, job_id: int) -> Job | None:
        return self._run(reading.get(job_id))

    def latest(self, key: str, *, queue: str = "default") -> Job | None:
        """The newest job with this key, whatever its state."""
        return self._run(reading.latest(key, queue=queue))

    def jobs(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        key: str | None = None,
        limit: int = 100,
        after: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        """Jobs in id order, ``limit`` at a time; page with ``after`` = the last id seen.
        ``newest_first``: descending order, where ``after`` means ids below it."""
        return self._run(
            reading.jobs(
                queue=queue,
                status=status,
                key=key,
                limit=limit,
                after=after,
                newest_first=newest_first,
            )
        )

    def stats(self, queue: str | None = None) -> Stats:
        """Counts per status (of one queue, or all), and the oldest pending job's age."""
        per_queue = self.queue_stats(queue)
        if queue is not None:
            return per_queue.get(queue, Stats())
        return sum_stats(per_queue.values())

    def queue_stats(self, queue: str | None = None) -> dict[str, Stats]:
        """``{queue: Stats}`` for every queue with jobs (or just ``queue``); ``stats()``
        gives the total."""
        return self._run(reading.queue_stats(queue))

    def subscribers(self, job_id: int) -> list[str]:
        return self._run(reading.subscribers(job_id))

    # -- notifications ------------------------------------------------------------------
    def take_notifications(
        self, *, limit: int = 100, lease: Duration = 60.0
    ) -> list[tuple[Job, list[str]]]:
        """Take up to ``limit`` subscribers of final jobs who were not yet told of the
        job's latest finish, with their jobs. They are this caller's for ``lease``: call
        ``mark_notified`` once they are told; if it never comes (a crash), they are
        offered again when the lease ends. Two dispatchers never take the same one."""
        return self._run(notifications.take_notifications(limit=limit, lease=lease))

    def mark_notified(self, items: Sequence[tuple[int, str]]) -> int:
        """Record that subscribers were told: ``(job_id, subscriber)`` pairs."""
        return self._run(notifications.mark_notified(items))

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
        then (check ``job.is_final``). Woken by LISTEN/NOTIFY on PostgreSQL and by
        commits of this process on SQLite; otherwise it polls every ``poll`` seconds."""
        limit = None if timeout is None else seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            since = self.generation()
            job = self.get(job_id)
            if job is None:
                raise JobNotFound(f"job {job_id} does not exist")
            if job.is_final:
                return job
            left = poll if deadline is None else min(poll, deadline - time.monotonic())
            if left <= 0:
                return job
            self.wait_for_change(since, left)
