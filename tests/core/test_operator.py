"""What an operator's console asks of a queue: jobs not yet due (scheduled, or waiting to
retry) and running them now, deleting one final job, which jobs a worker's tasks run,
and the oldest pending job counted among those that are due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import conveyor
from conveyor import InvalidArgument, InvalidTransition, JobNotFound, Status


def _later(hours: float = 1) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


def _retry_waiting(q: conveyor.Queue, queue: str = "retries") -> conveyor.Job:
    """A job whose first attempt failed, waiting an hour before the next one."""
    job = q.enqueue("flaky", {"n": 1}, queue=queue)
    claim = q.claim(queue)
    assert [j.id for j in claim.jobs] == [job.id]
    failed = q.fail(job.id, claim.id, "boom", delay=3600)
    assert failed.status == Status.PENDING and failed.attempts == 1
    return failed


def test_deferred_lists_scheduled_and_retry_waiting_jobs_soonest_first(q: conveyor.Queue) -> None:
    due = q.enqueue("t")
    far = q.enqueue("t", run_at=_later(5))
    near = q.enqueue("t", run_at=_later(2), queue="mail")
    retrying = _retry_waiting(q)
    assert [j.id for j in q.deferred()] == [retrying.id, near.id, far.id]
    assert [j.id for j in q.deferred(kind="scheduled")] == [near.id, far.id]
    assert [j.id for j in q.deferred(kind="retrying")] == [retrying.id]
    assert [j.id for j in q.deferred(queue="mail")] == [near.id]
    assert [j.id for j in q.deferred(queue="retries")] == [retrying.id]
    assert [j.id for j in q.deferred(task="flaky")] == [retrying.id]
    assert [j.id for j in q.deferred(limit=1)] == [retrying.id]
    assert due.id not in [j.id for j in q.deferred()]
    with pytest.raises(InvalidArgument, match="kind"):
        q.deferred(kind="later")
    with pytest.raises(InvalidArgument, match="limit"):
        q.deferred(limit=0)


def test_run_now_makes_one_pending_job_due(q: conveyor.Queue) -> None:
    job = q.enqueue("t", run_at=_later())
    assert q.claim(job.queue).jobs == []
    moved = q.run_now(job.id)
    assert moved.status == Status.PENDING and moved.run_at <= q.now()
    assert [j.id for j in q.claim(job.queue).jobs] == [job.id]
    # A job already due keeps its place; a running or final one is refused.
    with pytest.raises(InvalidTransition, match="expected status pending"):
        q.run_now(job.id)
    with pytest.raises(JobNotFound):
        q.run_now(10**9)


def test_run_now_brings_a_retry_forward_keeping_its_attempts(q: conveyor.Queue) -> None:
    job = _retry_waiting(q)
    moved = q.run_now(job.id)
    assert moved.attempts == 1 and moved.error == "boom"
    assert [j.id for j in q.claim("retries").jobs] == [job.id]


def test_run_now_all_is_bounded_and_filtered(q: conveyor.Queue) -> None:
    scheduled = [q.enqueue("t", run_at=_later(1 + i)) for i in range(3)]
    other = q.enqueue("t", run_at=_later(10), queue="other")
    retrying = _retry_waiting(q)
    assert q.run_now_all(kind="scheduled", limit=2) == sorted(j.id for j in scheduled[:2])
    assert q.run_now_all(kind="scheduled", queue="default") == [scheduled[2].id]
    assert q.run_now_all(kind="scheduled", queue="default") == []
    assert q.run_now_all(kind="retrying", queue="default") == []
    assert q.run_now_all(kind="retrying") == [retrying.id]
    assert [j.id for j in q.deferred()] == [other.id]
    assert q.run_now_all() == [other.id]
    assert q.deferred() == []
    with pytest.raises(InvalidArgument, match="limit"):
        q.run_now_all(limit=1001)


def test_delete_job_takes_a_final_job_with_its_subscribers_and_edges(q: conveyor.Queue) -> None:
    first = q.enqueue("t", key="report", subscriber="mailer")
    after = q.enqueue("t", after=[first.id])
    claim = q.claim()
    q.complete(first.id, claim.id, "done")
    assert q.dependents(first.id) == [after.id]
    assert q.subscribers(first.id) == ["mailer"]
    q.delete_job(first.id)
    assert q.get(first.id) is None
    assert q.dependents(first.id) == [] and q.subscribers(first.id) == []
    with pytest.raises(JobNotFound):
        q.delete_job(first.id)
    # An active job is refused: cancel it first.
    with pytest.raises(InvalidTransition, match="expected status completed, failed or cancelled"):
        q.delete_job(after.id)
    q.cancel(after.id)
    q.delete_job(after.id)
    assert q.get(after.id) is None
    assert q.stats().total == 0


def test_a_worker_lists_the_jobs_its_tasks_run(q: conveyor.Queue) -> None:
    started = datetime.now(UTC).replace(microsecond=0)
    q.worker_seen("w1", host="box", pid=1, queues=["default"], concurrency=4, version="1",
                  running=1, ttl=30, busy=[(7, started)])  # fmt: skip
    (w1,) = q.workers()
    assert [(b.id, b.started_at) for b in w1.busy] == [(7, started)]
    # A refresh without the list keeps it; an empty list clears it.
    q.worker_seen("w1", host="box", pid=1, queues=["default"], concurrency=4, version="1",
                  running=1, ttl=30)  # fmt: skip
    assert [b.id for b in q.workers()[0].busy] == [7]
    q.worker_seen("w1", host="box", pid=1, queues=["default"], concurrency=4, version="1",
                  running=0, ttl=30, busy=[])  # fmt: skip
    assert q.workers()[0].busy == ()
    with pytest.raises(InvalidArgument, match="busy"):
        q.worker_seen("w1", host="box", pid=1, queues=[], concurrency=4, version="1",
                      running=0, ttl=30, busy=[(0, started)])  # fmt: skip


def test_oldest_pending_counts_only_jobs_that_are_due(q: conveyor.Queue) -> None:
    q.enqueue("t", run_at=_later())
    stats = q.stats()
    assert stats.pending == 1 and stats.scheduled == 1
    assert stats.oldest_pending_at is None
    due = q.enqueue("t")
    assert q.stats().oldest_pending_at == due.run_at
