"""A download bot's queue, as the contract its bot was written against (``IDownloadQueue``):
enqueue a URL, peek at the oldest queued job, mark it in progress (of two workers, one
wins), completed with the output path, failed with a message, retried up to three times,
and statistics with the oldest queued time.

It is conveyor underneath, with no queue logic here: a ``DownloadJob`` is a job of the
``downloads`` queue; ``Queued`` is ``pending``, ``InProgress`` is ``running``.
``mark_in_progress`` claims that one job by id (``claim_job``, guarded by its state);
``retry_job`` re-opens a failed job only while it has attempts left, keeping the count
(``retry(reset_attempts=False)``): one run plus three retries.

``DownloadQueue(url)`` takes a database URL (``sqlite:///bot.db``, ``postgresql://…``),
the URL of a conveyor server (``http://host:port``, with ``token=``) or an open queue.
A job marked in progress is held by its claim, which the database keeps: a
``DownloadQueue`` opened on the same database after a restart completes or fails it as
well. If the bot dies holding it, the job is queued again once its lease (``lease``, an
hour by default) runs out: the next ``dequeue`` or ``get_stats`` recovers expired leases
first, so no worker process is needed for that. The ``downloads`` queue's retention
policies (declared when it opens, unless an operator set some) say how long finished jobs
are kept; every ``prune_every`` enqueues, what they let go is deleted, which keeps
``dequeue`` fast."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

import conveyor
from conveyor import InvalidArgument, InvalidTransition, JobNotFound, QueueAPI, StaleClaim
from conveyor.maintenance import RetentionPruner
from examples._common import declare_retention

QUEUE = "downloads"
TASK = "download"
MAX_RETRIES = 3
MAX_URL = 2048
MAX_MESSAGE_ID = 2**63 - 1  # a signed 64-bit integer, as the bot's database stores it
# Completed downloads are kept a day: ``dequeue``'s cost grows with the finished jobs
# kept (README), and a day answers "what did I download today". Failed ones are few and
# kept a week, for ``retry_job`` and for a user asking why a download failed.
RETENTION: dict[str, timedelta | None] = {
    "completed": timedelta(days=1),
    "failed": timedelta(days=7),
    "cancelled": timedelta(days=1),
}
PRUNE_EVERY = 100
# How often ``dequeue`` asks the database to recover expired leases: leases last an hour,
# so a second's delay costs nothing, and a dequeue in between stays one statement.
RECOVER_EVERY = 1.0


class JobAlreadyProcessed(InvalidTransition):
    """``mark_in_progress`` on a job that is completed or failed (the contract's
    "Job already processed")."""


class JobStatus(StrEnum):
    QUEUED = "Queued"
    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"


_STATUS = {
    conveyor.Status.PENDING: JobStatus.QUEUED,
    conveyor.Status.RUNNING: JobStatus.IN_PROGRESS,
    conveyor.Status.COMPLETED: JobStatus.COMPLETED,
    conveyor.Status.FAILED: JobStatus.FAILED,
    conveyor.Status.CANCELLED: JobStatus.FAILED,
}


@dataclass(frozen=True)
class DownloadJob:
    job_id: int
    message_id: int
    url: str
    status: JobStatus
    created_at: datetime
    retry_count: int
    completed_at: datetime | None = None
    output_path: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class QueueStats:
    queued_count: int
    in_progress_count: int
    completed_count: int
    failed_count: int
    oldest_queued_job_created_at: datetime | None


class IDownloadQueue(Protocol):
    def enqueue(self, message_id: int, url: str) -> int: ...
    def dequeue(self) -> DownloadJob | None: ...
    def mark_in_progress(self, job_id: int) -> bool: ...
    def mark_completed(self, job_id: int, output_path: str) -> None: ...
    def mark_failed(self, job_id: int, error_message: str) -> None: ...
    def retry_job(self, job_id: int) -> bool: ...
    def get_stats(self) -> QueueStats: ...


def download_job(job: conveyor.Job) -> DownloadJob:
    status = _STATUS[job.status]
    # Each run after the first is a retry; a queued job has not started its next run yet.
    retries = job.attempts if status == JobStatus.QUEUED else max(0, job.attempts - 1)
    result = job.result if isinstance(job.result, dict) else {}
    return DownloadJob(
        job_id=job.id,
        message_id=job.payload["message_id"],
        url=job.payload["url"],
        status=status,
        created_at=job.created_at,
        retry_count=retries,
        completed_at=job.finished_at if job.is_final else None,
        output_path=result.get("output_path"),
        error_message=job.error,
    )


class DownloadQueue:
    """``IDownloadQueue`` on conveyor."""

    def __init__(
        self,
        url: str | QueueAPI,
        *,
        token: str | None = None,
        queue: str = QUEUE,
        lease: timedelta = timedelta(hours=1),
        retention: Mapping[str, timedelta | None] | None = RETENTION,
        prune_every: int = PRUNE_EVERY,
    ) -> None:
        if isinstance(url, QueueAPI):
            self.q, self._owned = url, False
        elif url.startswith(("http://", "https://")):
            from conveyor.client import RemoteQueue

            self.q, self._owned = RemoteQueue(url, token), True
        else:
            self.q, self._owned = conveyor.connect(url), True
        self.queue = queue
        self.lease = lease
        self.retention = None if retention is None else dict(retention)
        if self.retention is not None:
            declare_retention(self.q, self.queue, self.retention, retire_keys=False)
        self.prune_every = max(1, prune_every)
        self._enqueued = 0
        self._recovered_at: float | None = None
        self._claims: dict[int, str] = {}  # jobs this instance marked in progress
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._owned:
            self.q.close()

    def __enter__(self) -> DownloadQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the contract ---------------------------------------------------------------------
    def enqueue(self, message_id: int, url: str) -> int:
        """A new ``Queued`` job; returns its id. The same URL may be queued twice."""
        if (
            isinstance(message_id, bool)
            or not isinstance(message_id, int)
            or not 0 < message_id <= MAX_MESSAGE_ID
        ):
            raise InvalidArgument(
                f"message_id: expected a positive integer up to 2^63-1, got {message_id!r:.40}"
            )
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidArgument(f"url: expected an http(s) URL, got {url!r:.80}")
        if len(url) > MAX_URL:
            raise InvalidArgument(f"url: expected at most {MAX_URL} characters")
        if any(c <= " " or c == "\x7f" for c in url):
            raise InvalidArgument("url: spaces and control characters are not allowed")
        payload = {"message_id": message_id, "url": url}
        job = self.q.enqueue(TASK, payload, queue=self.queue, max_attempts=1 + MAX_RETRIES)
        with self._lock:
            self._enqueued += 1
            due = self._enqueued % self.prune_every == 0
        if due:
            self.prune()
        return job.id

    def prune(self) -> int:
        """Delete the finished jobs the retention policies let go (a pass of conveyor's
        pruner, as a worker runs); ``enqueue`` calls it every ``prune_every`` jobs. With
        ``retention=None`` it does nothing: the operator's policies and workers decide."""
        if self.retention is None:
            return 0
        return RetentionPruner(self.q, pause=0).run_once()

    def dequeue(self) -> DownloadJob | None:
        """The oldest ``Queued`` job, left queued (``mark_in_progress`` takes it). Jobs
        whose holder's lease ran out are queued again first (checked at most once a
        second by each ``DownloadQueue``)."""
        now = time.monotonic()
        if self._recovered_at is None or now - self._recovered_at >= RECOVER_EVERY:
            self.q.recover(queue=self.queue)
            self._recovered_at = now
        jobs = self.q.jobs(queue=self.queue, status="pending", limit=1)
        if not jobs:
            return None
        job: conveyor.Job | None = jobs[0]
        if job is not None and not isinstance(job.payload, dict):
            job = self.q.get(job.id)  # a list that leaves payloads out: read the one job
        return None if job is None else download_job(job)

    def mark_in_progress(self, job_id: int) -> bool:
        """Take a ``Queued`` job: True for exactly one of any number of callers, False
        when another caller holds it. Raises ``JobAlreadyProcessed`` for a completed or
        failed job, ``JobNotFound`` for an unknown one."""
        self._ours(job_id)
        try:
            claim = self.q.claim_job(job_id, lease=self.lease)
        except InvalidTransition:
            job = self.q.get(job_id)
            if job is not None and job.is_final:
                raise JobAlreadyProcessed(
                    f"Job already processed: download job {job_id} is {_STATUS[job.status]}"
                ) from None
            return False
        with self._lock:
            self._claims[job_id] = claim.id
        return True

    def mark_completed(self, job_id: int, output_path: str) -> None:
        if not isinstance(output_path, str) or not output_path.strip():
            raise InvalidArgument("output_path: expected the downloaded file's path")
        claim = self._claim(job_id)
        try:
            self.q.complete(job_id, claim, result={"output_path": output_path})
        except StaleClaim:
            self._release(job_id)  # the lease ran out and the job went back to the queue
            raise
        self._release(job_id)

    def mark_failed(self, job_id: int, error_message: str) -> None:
        if not isinstance(error_message, str) or not error_message.strip():
            raise InvalidArgument("error_message: expected what went wrong")
        claim = self._claim(job_id)
        try:
            self.q.fail(job_id, claim, error_message, retryable=False)
        except StaleClaim:
            self._release(job_id)
            raise
        self._release(job_id)

    def retry_job(self, job_id: int) -> bool:
        """A ``Failed`` job back to ``Queued`` while it has retries left (three); False
        when they are spent or the job is not failed."""
        self._ours(job_id)
        try:
            self.q.retry(job_id, reset_attempts=False)
        except InvalidTransition:
            return False
        return True

    def get_stats(self) -> QueueStats:
        s = self.q.stats(self.queue)
        if s.expired:  # a holder's lease ran out: its jobs are queued again first
            self.q.recover(queue=self.queue)
            s = self.q.stats(self.queue)
        return QueueStats(
            queued_count=s.pending,
            in_progress_count=s.running,
            completed_count=s.completed,
            failed_count=s.failed + s.cancelled,
            oldest_queued_job_created_at=s.oldest_pending_at,
        )

    def get(self, job_id: int) -> DownloadJob | None:
        job = self.q.get(job_id)
        return None if job is None or job.queue != self.queue else download_job(job)

    # -- helpers --------------------------------------------------------------------------
    def _ours(self, job_id: Any) -> None:
        job = self.q.get(job_id)
        if job is None or job.queue != self.queue:
            raise JobNotFound(f"download job {job_id} does not exist")

    def _claim(self, job_id: int) -> str:
        """The claim holding the job: the one this instance made, else the one the
        database records for it (a ``DownloadQueue`` opened after a restart)."""
        with self._lock:
            claim = self._claims.get(job_id)
        if claim is not None:
            return claim
        job = self.q.get(job_id)
        if job is None or job.queue != self.queue:
            raise JobNotFound(f"download job {job_id} does not exist")
        if job.status != conveyor.Status.RUNNING:
            raise InvalidTransition(f"download job {job_id} is not in progress")
        if job.claim_id is None:  # through a conveyor server, a claim is its holder's
            raise InvalidTransition(f"download job {job_id} is in progress elsewhere")
        return job.claim_id

    def _release(self, job_id: int) -> None:
        with self._lock:
            self._claims.pop(job_id, None)
