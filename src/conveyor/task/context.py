"""``Context``: what a running task knows about its job, and how it reports back.

A task is told when its claim is gone (the lease was lost, the job was cancelled, or it
overran its timeout): ``ctx.cancelled`` turns true, ``ctx.lost`` is set, and every later
``progress``/``heartbeat`` raises ``StaleClaim``. Whatever it returns after that is not
recorded, because the job's writes are fenced by the claim id."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from conveyor.errors import InvalidTransition, JobNotFound, StaleClaim
from conveyor.job import Job

if TYPE_CHECKING:
    from conveyor.queue import Queue


class Context:
    """Handed to every task as its first argument."""

    def __init__(self, job: Job, queue: Queue, *, stopping: threading.Event | None = None) -> None:
        self._job = job
        self.queue = queue
        self.lost = threading.Event()
        self._reason: str | None = None
        self._stopping = stopping if stopping is not None else threading.Event()

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
    def cancelled(self) -> bool:
        """True once the claim is gone; the task should stop, its result is discarded."""
        return self.lost.is_set()

    @property
    def reason(self) -> str | None:
        """Why the claim is gone, once it is."""
        return self._reason

    @property
    def stopping(self) -> bool:
        """True while the worker shuts down: finish soon, or checkpoint and stop."""
        return self._stopping.is_set()

    def raise_if_cancelled(self) -> None:
        if self.lost.is_set():
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
