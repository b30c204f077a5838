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

A ``queue`` label takes at most ``max_queues`` values (``Limits.max_metric_queues``),
so that a database with many queues cannot make a scrape huge: the job counts label
the queues with the most jobs one by one and sum the others under
``queue="_other"`` (their oldest pending job is the oldest of them all); the counters
and histograms label the first queues this server saw and count later ones under
``_other``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from conveyor.errors import DatabaseError
from conveyor.job import Claim, Job, Status
from conveyor.queue import Queue

OTHER = "_other"
LATENCY_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600)


class _QueueCollector(Collector):
    """Reads the job counts when Prometheus scrapes, so they are never stale."""

    def __init__(self, queue: Queue, max_queues: int) -> None:
        self.queue = queue
        self.max_queues = max_queues

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
        ranked = sorted(per_queue.items(), key=lambda item: (-item[1].total, item[0]))
        shown = dict(ranked[: self.max_queues])
        rest = [stats for _, stats in ranked[self.max_queues :]]
        for name, stats in sorted(shown.items()):
            for status in Status:
                jobs.add_metric([name, status.value], getattr(stats, status.value))
            if stats.oldest_pending_at is not None:
                oldest.add_metric([name], stats.oldest_pending_at.timestamp())
        if rest:
            for status in Status:
                jobs.add_metric([OTHER, status.value], sum(getattr(s, status.value) for s in rest))
            times = [s.oldest_pending_at for s in rest if s.oldest_pending_at is not None]
            if times:
                oldest.add_metric([OTHER], min(times).timestamp())
        yield up
        yield jobs
        yield oldest


class Metrics:
    def __init__(self, queue: Queue, max_queues: int = 100) -> None:
        self.registry = CollectorRegistry()
        self.max_queues = max_queues
        self._labelled: set[str] = set()
        self._lock = threading.Lock()
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
        r.register(_QueueCollector(queue, max_queues))

    def _label(self, queue: str) -> str:
        """The queue's label: its name while fewer than ``max_queues`` are labelled."""
        if queue in self._labelled:
            return queue
        with self._lock:  # routes run in threads
            if len(self._labelled) < self.max_queues:
                self._labelled.add(queue)
                return queue
        return OTHER

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def enqueued_jobs(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            if not job.deduplicated:
                self.enqueued.labels(self._label(job.queue)).inc()

    def claimed_jobs(self, claim: Claim) -> None:
        if claim.acked:
            self.completed.labels(self._label(claim.queue)).inc(claim.acked)
        for job in claim.jobs:
            self.claimed.labels(self._label(job.queue)).inc()
            if job.claimed_at is not None:
                waited = (job.claimed_at - job.run_at).total_seconds()
                self.claim_latency.labels(self._label(job.queue)).observe(max(0.0, waited))

    def acked_jobs(self, count: int, queue: str = "") -> None:
        if count:
            self.completed.labels(self._label(queue)).inc(count)

    def failed_jobs(self, count: int, queue: str = "") -> None:
        if count:
            self.failed.labels(queue).inc(count)

    def reported_jobs(self, jobs: Iterable[Job]) -> None:
        """Jobs returned by complete or fail: count them by the state they reached."""
        for job in jobs:
            if job.status == Status.PENDING:
                self.retried.labels(self._label(job.queue)).inc()
                continue
            if job.status == Status.COMPLETED:
                self.completed.labels(self._label(job.queue)).inc()
            elif job.status == Status.FAILED:
                self.failed.labels(self._label(job.queue)).inc()
            if job.finished_at is not None:
                seconds = (job.finished_at - job.created_at).total_seconds()
                self.end_to_end.labels(self._label(job.queue), job.status.value).observe(
                    max(0.0, seconds)
                )
