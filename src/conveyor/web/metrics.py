"""Prometheus metrics of one server, in a registry of its own (so several apps can
live in one process).

- ``conveyor_jobs{queue,status}``: jobs in the database, read at scrape time.
- ``conveyor_oldest_pending_timestamp_seconds{queue}``: when the oldest pending job
  became runnable (Unix time).
- ``conveyor_database_up``: 1 when the scrape could read the database.
- ``conveyor_jobs_{enqueued,claimed,completed,failed,retried}_total{queue}``: what went
  through *this* server (jobs changed by other processes are not counted). ``failed``
  counts final failures, ``retried`` failures sent back to pending.
- ``conveyor_claim_latency_seconds{queue}``: from the moment a job became runnable
  (``run_at``) to its claim.
- ``conveyor_end_to_end_latency_seconds{queue,status}``: from enqueue to the final
  state, for jobs finished through this server.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conveyor.errors import DatabaseError
from conveyor.job import Claim, Job, Status
from conveyor.queue import Queue

LATENCY_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600)


class _QueueCollector(Collector):
    """Reads the job counts when Prometheus scrapes, so they are never stale."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("conveyor_database_up", "1 when the database answered the scrape")
        try:
            per_queue = self.queue.queue_stats()
        except DatabaseError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        jobs = GaugeMetricFamily(
            "conveyor_jobs", "Jobs in the database per queue and status", labels=["queue", "status"]
        )
        oldest = GaugeMetricFamily(
            "conveyor_oldest_pending_timestamp_seconds",
            "When the oldest pending job of the queue became runnable (Unix time)",
            labels=["queue"],
        )
        for name, stats in sorted(per_queue.items()):
            for status in Status:
                jobs.add_metric([name, status.value], getattr(stats, status.value))
            if stats.oldest_pending_at is not None:
                oldest.add_metric([name], stats.oldest_pending_at.timestamp())
        yield up
        yield jobs
        yield oldest


class Metrics:
    def __init__(self, queue: Queue) -> None:
        self.registry = CollectorRegistry()
        r = self.registry

        def counter(name: str, text: str) -> Counter:
            return Counter(name, text, ["queue"], registry=r)

        self.enqueued = counter("conveyor_jobs_enqueued", "Jobs created through this server")
        self.claimed = counter("conveyor_jobs_claimed", "Jobs claimed through this server")
        self.completed = counter("conveyor_jobs_completed", "Jobs completed through this server")
        self.failed = counter("conveyor_jobs_failed", "Jobs failed for good through this server")
        self.retried = counter("conveyor_jobs_retried", "Failed attempts sent back to pending")
        self.claim_latency = Histogram(
            "conveyor_claim_latency_seconds",
            "From run_at (runnable) to claim",
            ["queue"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.end_to_end = Histogram(
            "conveyor_end_to_end_latency_seconds",
            "From enqueue to the final state",
            ["queue", "status"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        r.register(_QueueCollector(queue))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def enqueued_jobs(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            if not job.deduplicated:
                self.enqueued.labels(job.queue).inc()

    def claimed_jobs(self, claim: Claim) -> None:
        if claim.acked:
            self.completed.labels(claim.queue).inc(claim.acked)
        for job in claim.jobs:
            self.claimed.labels(job.queue).inc()
            if job.claimed_at is not None:
                waited = (job.claimed_at - job.run_at).total_seconds()
                self.claim_latency.labels(job.queue).observe(max(0.0, waited))

    def acked_jobs(self, count: int, queue: str = "") -> None:
        if count:
            self.completed.labels(queue).inc(count)

    def failed_jobs(self, count: int, queue: str = "") -> None:
        if count:
            self.failed.labels(queue).inc(count)

    def reported_jobs(self, jobs: Iterable[Job]) -> None:
        """Jobs returned by complete or fail: count them by the state they reached."""
        for job in jobs:
            if job.status == Status.PENDING:
                self.retried.labels(job.queue).inc()
                continue
            if job.status == Status.COMPLETED:
                self.completed.labels(job.queue).inc()
            elif job.status == Status.FAILED:
                self.failed.labels(job.queue).inc()
            if job.finished_at is not None:
                seconds = (job.finished_at - job.created_at).total_seconds()
                self.end_to_end.labels(job.queue, job.status.value).observe(max(0.0, seconds))
