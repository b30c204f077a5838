"""A download bot's FIFO queue, as the contract its bot was written against:
enqueue → id, peek at the next job, take it (only one worker wins), completed with the
output path, failed with a message, up to three retries, and statistics with the oldest
queued time — on conveyor, with the bot's latency limits measured.

In the original contract ``Dequeue`` and ``MarkInProgress`` were two calls, the second
guarded by ``WHERE status = 'Queued'``. Here ``take()`` is one claim statement: it picks
the oldest queued job and marks it in progress atomically, so there is no window in
which two workers can both see the same job as theirs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import conveyor

QUEUE = "downloads"
RETRIES = 3


@dataclass(frozen=True)
class QueueStats:
    queued: int
    in_progress: int
    completed: int
    failed: int
    oldest_queued_created_at: datetime | None


@dataclass(frozen=True)
class DownloadJob:
    id: int
    claim_id: str
    message_id: int
    url: str
    retry_count: int


class DownloadQueue:
    def __init__(self, q: conveyor.Queue) -> None:
        self.q = q

    def enqueue(self, message_id: int, url: str) -> int:
        if message_id <= 0:
            raise conveyor.InvalidArgument(f"message_id: expected > 0, got {message_id}")
        payload = {"message_id": message_id, "url": url}
        # 1 run + 3 retries; the same URL posted twice is allowed (no key).
        return self.q.enqueue("download", payload, queue=QUEUE, max_attempts=1 + RETRIES).id

    def peek(self) -> conveyor.Job | None:
        """The next queued job, FIFO, left queued."""
        jobs = self.q.jobs(queue=QUEUE, status="pending", limit=1)
        return jobs[0] if jobs else None

    def take(self, worker: str = "bot") -> DownloadJob | None:
        """The next queued job, now in progress for this worker alone."""
        claim = self.q.claim(QUEUE, lease=600, worker=worker, count_remaining=False)
        if not claim.jobs:
            return None
        job = claim.jobs[0]
        return DownloadJob(
            job.id, claim.id, job.payload["message_id"], job.payload["url"], job.attempts - 1
        )

    def mark_completed(self, job: DownloadJob, output_path: str) -> None:
        if not output_path:
            raise conveyor.InvalidArgument("output_path: expected a path, got an empty string")
        self.q.complete(job.id, job.claim_id, result={"output_path": output_path})

    def mark_failed(self, job: DownloadJob, message: str) -> bool:
        """Record the failure; True when the job was re-queued for another try."""
        if not message:
            raise conveyor.InvalidArgument("message: expected an error message")
        after = self.q.fail(job.id, job.claim_id, message, delay=0)
        return after.status == conveyor.Status.PENDING

    def stats(self) -> QueueStats:
        s = self.q.stats(QUEUE)
        return QueueStats(s.pending, s.running, s.completed, s.failed, s.oldest_pending_at)


def download(url: str, out: Path) -> str:
    """The stand-in for yt-dlp: 'broken' URLs always fail, others write a file."""
    if "broken" in url:
        raise OSError("HTTP Error 403: Forbidden")
    path = out / f"{abs(hash(url)) % 10**8}.mp4"
    path.write_bytes(b"\x00" * 16)
    return str(path)
