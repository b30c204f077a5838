"""What an operator's console asks of a queue: jobs not yet due (scheduled, or waiting to
retry) and running them now, deleting one final job, which jobs a worker's tasks run,
and the oldest pending job counted among those that are due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

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


def test_a_deleted_job_takes_its_edges_at_both_ends(q: conveyor.Queue) -> None:
    run = q.enqueue_workflow(conveyor.chain("a.one", "a.two", "a.three", label="chain"))
    one, two, three = (run.jobs[name].id for name in ("one", "two", "three"))
    for job_id in (one, two, three):
        claim = q.claim_job(job_id)
        q.complete(job_id, claim.id, None)
    assert q.dependents(one) == [two] and q.dependents(two) == [three]
    q.delete_job(two)  # the edges two -> one and three -> two go with it
    assert q.dependents(one) == [] and q.dependents(two) == []
    assert q.parents(three) == []
    assert q.prune(older_than=0) == 2
    assert q.dependents(one) == [] and q.workflows()[0].total == 0


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


def _old_throughput(db_url: str, rows: list[tuple[datetime, str, int, int]]) -> None:
    """Per-minute throughput rows from the past, written as the counting triggers would."""
    direct = conveyor.connect(db_url)
    try:
        with direct.driver.session() as session:
            cur = getattr(session, "_cur")  # noqa: B009 - a fixture, not a queue operation
            if direct.dialect == "sqlite":
                cur.executemany(
                    "INSERT INTO conveyor_throughput VALUES (?, ?, ?, ?)",
                    [(int(t.timestamp()), q, c, f) for t, q, c, f in rows],
                )
            elif direct.dialect == "mysql":
                cur.executemany(
                    "INSERT INTO conveyor_throughput VALUES (%s, %s, %s, %s)",
                    [(t.astimezone(UTC).replace(tzinfo=None), q, c, f) for t, q, c, f in rows],
                )
            else:
                schema = parse_qs(urlsplit(db_url).query)["schema"][0]
                cur.executemany(
                    f'INSERT INTO "{schema}".conveyor_throughput VALUES (%s, %s, %s, %s)', rows
                )
    finally:
        direct.close()


def test_throughput_by_hour_rolls_old_minutes_up(q: conveyor.Queue, db_url: str) -> None:
    hour = q.now().replace(minute=0, second=0, microsecond=0)
    three_days = hour - timedelta(days=3)
    forty_days = hour - timedelta(days=40)
    _old_throughput(db_url, [
        (three_days + timedelta(minutes=5), "mail", 3, 1),
        (three_days + timedelta(minutes=50), "mail", 2, 0),
        (three_days + timedelta(minutes=50), "fetch", 10, 0),
        (forty_days, "mail", 7, 7),
    ])  # fmt: skip
    job = q.enqueue("t", queue="mail")
    q.complete(job.id, q.claim("mail").id, None)

    def week(queue: str | None = None) -> list[tuple[datetime, int, int]]:
        return [(p.hour, p.completed, p.failed)
                for p in q.throughput_hours(queue=queue, hours=7 * 24)]  # fmt: skip

    before = week()
    assert before == [(three_days, 15, 1), (hour, 1, 0)]
    assert [(p.hour, p.completed) for p in q.throughput_hours(queue="mail", hours=1)] == [(hour, 1)]
    # mail's and fetch's hour three days ago, and mail's forty days ago (then dropped).
    assert q.roll_up_throughput() == 3
    assert q.roll_up_throughput() == 0  # nothing left to roll
    assert week() == before
    assert week("mail") == [(three_days, 5, 1), (hour, 1, 0)]
    # The minutes rolled up are gone from the per-minute history; the last hour stays.
    assert [p.completed for p in q.throughput(minutes=7 * 24 * 60)] == [1]
    # Hourly rows past a month are dropped: forty days ago is not counted in 31 days.
    assert sum(p.completed for p in q.throughput_hours(hours=31 * 24)) == 16
    with pytest.raises(InvalidArgument, match="hours"):
        q.throughput_hours(hours=31 * 24 + 1)
    with pytest.raises(InvalidArgument, match="keep_hours"):
        q.roll_up_throughput(keep_minutes=7200, keep_hours=3600)


def test_search_by_a_payload_field_is_a_bounded_walk(q: conveyor.Queue) -> None:
    ids = [q.enqueue("mail.send", {"to": f"u{n % 3}@example.org", "n": n}).id for n in range(9)]
    q.enqueue("other", {"to": "u0@example.org"}, queue="other")
    found = q.search_payload("to", "u0@example.org", queue="default")
    assert [j.id for j in found.jobs] == [ids[6], ids[3], ids[0]] and found.next_before is None
    assert found.jobs[0].payload == {"to": "u0@example.org", "n": 6}
    assert [j.id for j in q.search_payload("n", "4").jobs] == [ids[4]]  # numbers as text
    assert q.search_payload("to", "nobody").jobs == ()
    assert q.search_payload("to", "U0@example.org").jobs == ()  # text compares exactly
    assert q.search_payload("to", "u0@example.org ").jobs == ()
    q.enqueue("mail.send", {"to": None}, queue="other")
    assert q.search_payload("to", "null").jobs == ()  # a JSON null is no text
    # A page: the limit reached, go on below the last match.
    first = q.search_payload("to", "u0@example.org", queue="default", limit=2)
    assert [j.id for j in first.jobs] == [ids[6], ids[3]] and first.next_before == ids[3]
    rest = q.search_payload("to", "u0@example.org", queue="default", before=first.next_before)
    assert [j.id for j in rest.jobs] == [ids[0]] and rest.next_before is None
    # A bounded walk: four jobs walked, from the newest of the queue; go on from there.
    walked = q.search_payload("to", "u0@example.org", queue="default", scan=4)
    assert [j.id for j in walked.jobs] == [ids[6]] and walked.next_before == ids[5]
    pending = q.search_payload("to", "u1@example.org", task="mail.send", status="pending")
    assert [j.id for j in pending.jobs] == [ids[7], ids[4], ids[1]]
    for bad in ({"field": "a.b"}, {"field": ""}, {"scan": 0}, {"limit": 0}):
        args: dict[str, Any] = {"field": "to", "value": "x", **bad}
        with pytest.raises(InvalidArgument):
            q.search_payload(args.pop("field"), args.pop("value"), **args)


def test_task_timings_count_runs_failures_and_percentiles(q: conveyor.Queue) -> None:
    for n in range(4):
        job = q.enqueue("mail.send", {"n": n}, queue="mail")
        q.complete(job.id, q.claim("mail").id, None)
    failed = q.enqueue("mail.send", queue="mail")
    q.fail(failed.id, q.claim("mail").id, "boom", retryable=False)
    other = q.enqueue("fetch", queue="other")
    q.complete(other.id, q.claim("other").id, None)
    q.enqueue("never.ran")
    timings = {t.task: t for t in q.task_timings()}
    assert set(timings) == {"mail.send", "fetch"}
    mail = timings["mail.send"]
    assert (mail.runs, mail.failures) == (5, 1)
    runs = q.jobs(task="mail.send", status="completed")
    took = sorted((j.finished_at - j.started_at).total_seconds() for j in runs)  # type: ignore[operator]
    assert mail.p50_seconds == pytest.approx(took[1], abs=1e-3)  # nearest rank of 4: 2nd
    assert mail.p95_seconds == pytest.approx(took[3], abs=1e-3)
    assert [t.task for t in q.task_timings(queue="other")] == ["fetch"]
    assert [t.runs for t in q.task_timings(task="mail.send", sample=2)] == [2]
    with pytest.raises(InvalidArgument, match="sample"):
        q.task_timings(sample=0)
