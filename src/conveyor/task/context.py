"""``Context``: what a running task knows about its job, and how it reports back.

A task is told when its claim is gone (the lease was lost, the job was cancelled, or it
overran its timeout): ``ctx.cancelled`` turns true, ``ctx.lost`` is set, and every later
``progress``/``heartbeat`` raises ``StaleClaim``. Whatever it returns after that is not
recorded, because the job's writes are fenced by the claim id."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from conveyor.errors import InvalidTransition, JobNotFound, StaleClaim
from conveyor.job import Job, Status

if TYPE_CHECKING:
    from conveyor.queue import Queue


# Guards the creation of a context's ``lost`` event (see ``Context.lost``).
_MAKING_LOST = threading.Lock()


class Context:
    """Handed to every task as its first argument."""

    def __init__(self, job: Job, queue: Queue, *, stopping: threading.Event | None = None) -> None:
        self._job = job
        self.queue = queue
        self._lost: threading.Event | None = None
        self._reason: str | None = None
        self._stopping = stopping if stopping is not None else threading.Event()
        self._parents: dict[str, Job] | None = None

    # -- what the task reads --------------------------------------------------------
    @property
    def job(self) -> Job:
        """The job as last written by this context (at claim, or the last progress)."""
        return self._job

    @property
    def claim_id(self) -> str:
        assert self._job.claim_id is not None
        return self._job.claim_id

    @property
    def attempt(self) -> int:
        """1 for the first run, 2 for the first retry, …"""
        return self._job.attempts

    @property
    def checkpoint(self) -> Any:
        """The last checkpoint recorded for this job, by this run or an earlier one."""
        return self._job.progress.checkpoint

    @property
    def lost(self) -> threading.Event:
        """Set once the claim is gone: an event a task's threads can wait on. Made on
        first use: a worker makes a context per job, and most jobs never ask."""
        lost = self._lost
        if lost is None:
            with _MAKING_LOST:
                if self._lost is None:
                    self._lost = threading.Event()
                lost = self._lost
        return lost

    @property
    def cancelled(self) -> bool:
        """True once the claim is gone; the task should stop, its result is discarded."""
        lost = self._lost
        return lost is not None and lost.is_set()

    @property
    def reason(self) -> str | None:
        """Why the claim is gone, once it is."""
        return self._reason

    @property
    def stopping(self) -> bool:
        """True while the worker shuts down: finish soon, or checkpoint and stop."""
        return self._stopping.is_set()

    # -- what the steps it runs after left ----------------------------------------------
    def parent_jobs(self) -> dict[str, Job]:
        """The jobs this one runs after, by step name (a job outside a workflow: by its
        id, as text), as they stand now. Read once, on first use."""
        if self._parents is None:
            if not self._job.depends_on:
                self._parents = {}
            else:
                found = self.queue.parents(self._job.id)
                self._parents = {j.step if j.step is not None else str(j.id): j for j in found}
        return dict(self._parents)

    def parent_results(self) -> dict[str, Any]:
        """``{step name: result}`` of the steps this one runs after; a parent that did
        not complete (it failed or was cancelled, and this step runs anyway) appears
        with ``None``: ``parent_statuses`` tells which."""
        return {
            name: job.result if job.status == Status.COMPLETED else None
            for name, job in self.parent_jobs().items()
        }

    def parent_statuses(self) -> dict[str, Status]:
        """``{step name: status}`` of the steps this one runs after."""
        return {name: job.status for name, job in self.parent_jobs().items()}

    def failed_parents(self) -> list[str]:
        """The steps this one runs after that did not complete."""
        return [n for n, s in self.parent_statuses().items() if s != Status.COMPLETED]

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise StaleClaim(self._reason)

    # -- what the task writes -------------------------------------------------------
    def progress(
        self,
        *,
        total: int | None = None,
        completed: int | None = None,
        failed: int | None = None,
        current: Any = None,
        checkpoint: Any = None,
        detail: Any = None,
    ) -> Job:
        """Record progress (absolute values; ``None`` leaves a field alone). It also
        renews the lease. Raises ``StaleClaim`` once the claim is gone."""
        self.raise_if_cancelled()
        try:
            job = self.queue.progress(
                self._job.id,
                self.claim_id,
                total=total,
                completed=completed,
                failed=failed,
                current=current,
                checkpoint=checkpoint,
                detail=detail,
            )
        except (StaleClaim, InvalidTransition, JobNotFound) as exc:
            raise self._refused(exc) from None
        self._job = job
        return job

    def heartbeat(self) -> Job:
        """Renew the lease now (the worker also does it in the background)."""
        self.raise_if_cancelled()
        try:
            job = self.queue.heartbeat(self._job.id, self.claim_id)
        except (StaleClaim, InvalidTransition, JobNotFound) as exc:
            raise self._refused(exc) from None
        self._job = job
        return job

    # -- for the runtime ------------------------------------------------------------
    def mark_lost(self, reason: str) -> None:
        """The claim is gone: tell the task (first reason wins)."""
        if not self.lost.is_set():
            self._reason = reason
            self.lost.set()

    def _refused(self, exc: Exception) -> StaleClaim:
        # A cancelled job keeps its claim id but is no longer running: to the task it
        # is the same news as a lost lease, so it gets the same exception.
        self.mark_lost(str(exc))
        return exc if isinstance(exc, StaleClaim) else StaleClaim(str(exc))

    def __repr__(self) -> str:
        return f"<Context job={self._job.id} task={self._job.task} attempt={self.attempt}>"
