"""Reading: get, latest, jobs, stats, prune, wait, subscribers, the database clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

import conveyor
from conveyor import InvalidArgument, JobNotFound, Status
from conveyor.job import sum_stats


def test_get_unknown_job_is_none(q: conveyor.Queue) -> None:
    assert q.get(424242) is None
    with pytest.raises(InvalidArgument, match="job_id"):
        q.get(-1)
    with pytest.raises(InvalidArgument, match="job_id"):
        q.get("7")  # type: ignore[arg-type]


def test_latest_is_the_newest_job_for_the_key(q: conveyor.Queue) -> None:
    assert q.latest("k") is None
    first = q.enqueue("t", key="k")
    q.cancel(first.id)
    second = q.enqueue("t", key="k")
    assert q.latest("k").id == second.id  # type: ignore[union-attr]
    assert q.latest("k", queue="elsewhere") is None


def test_jobs_filters_and_pages(q: conveyor.Queue) -> None:
    made = [q.enqueue("t", queue="a" if i % 2 else "b", key=f"k{i}") for i in range(7)]
    q.cancel(made[0].id)
    assert [j.id for j in q.jobs()] == [j.id for j in made]
    assert all(j.queue == "a" for j in q.jobs(queue="a"))
    assert [j.id for j in q.jobs(status="cancelled")] == [made[0].id]
    assert [j.id for j in q.jobs(key="k3")] == [made[3].id]
    page1 = q.jobs(limit=3)
    page2 = q.jobs(limit=3, after=page1[-1].id)
    page3 = q.jobs(limit=3, after=page2[-1].id)
    assert [j.id for j in page1 + page2 + page3] == [j.id for j in made]
    newest = q.jobs(limit=2, newest_first=True)
    assert [j.id for j in newest] == [made[6].id, made[5].id]
    older = q.jobs(limit=2, newest_first=True, after=newest[-1].id)
    assert [j.id for j in older] == [made[4].id, made[3].id]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "done"}, "status: expected one of pending, running"),
        ({"limit": 0}, "limit"),
        ({"after": -3}, "after"),
        ({"queue": 5}, "queue"),
    ],
)
def test_bad_list_arguments(q: conveyor.Queue, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        q.jobs(**kwargs)  # type: ignore[arg-type]


def test_stats_counts_every_status(q: conveyor.Queue) -> None:
    assert q.stats() == conveyor.Stats()
    jobs = q.enqueue_many([{"task": "t", "max_attempts": 1} for _ in range(6)])
    q.enqueue("t", queue="other", run_at=datetime.now(timezone.utc) + timedelta(hours=1))
    claim = q.claim(limit=4)
    q.complete(jobs[0].id, claim.id)
    q.fail(jobs[1].id, claim.id, "x")
    q.cancel(jobs[4].id)
    stats = q.stats()
    assert (stats.pending, stats.running, stats.completed, stats.failed, stats.cancelled) == (
        2,
        2,
        1,
        1,
        1,
    )
    assert stats.total == 7 and stats.scheduled == 1
    assert stats.oldest_pending_at == q.get(jobs[5].id).created_at  # type: ignore[union-attr]
    default = q.stats("default")
    assert default.pending == 1 and default.scheduled == 0
    assert q.stats("nope") == conveyor.Stats()
    per_queue = q.queue_stats()
    assert set(per_queue) == {"default", "other"} and per_queue["other"].pending == 1
    assert q.stats() == sum_stats(per_queue.values())
    assert stats.to_dict()["total"] == 7


def test_stats_counts_expired_leases(q: conveyor.Queue) -> None:
    q.enqueue("t")
    q.claim(lease=0.05)
    time.sleep(0.2)
    assert q.stats().expired == 1


def test_prune_removes_old_final_jobs_only(q: conveyor.Queue) -> None:
    jobs = q.enqueue_many([{"task": "t", "max_attempts": 1} for _ in range(4)])
    q.enqueue("t", subscriber="s")
    claim = q.claim(limit=3)
    q.complete(jobs[0].id, claim.id)
    q.fail(jobs[1].id, claim.id, "x")
    assert q.prune(older_than=timedelta(hours=1)) == 0  # too young
    time.sleep(0.05)
    assert q.prune(older_than=0) == 1  # completed only, by default
    assert q.get(jobs[0].id) is None and q.get(jobs[1].id) is not None
    assert q.prune(older_than=0, statuses=["failed", "cancelled"]) == 1
    assert q.stats().total == 3  # pending and running ones stay
    with pytest.raises(InvalidArgument, match="expected final statuses"):
        q.prune(older_than=0, statuses=["pending"])
    with pytest.raises(InvalidArgument, match="status: expected one of"):
        q.prune(older_than=0, statuses=["gone"])


def test_prune_goes_past_one_batch_and_leaves_other_statuses(q: conveyor.Queue) -> None:
    """A prune deletes a thousand jobs a status per transaction, and goes on to the end."""
    for _ in range(5):
        q.enqueue_ids([{"task": "t"} for _ in range(500)])
        claim = q.claim(limit=500)
        q.complete_many([(j.id, claim.id, None) for j in claim.jobs])
    failed = q.enqueue("t", max_attempts=1)
    q.fail(failed.id, q.claim().id, "x")
    time.sleep(0.01)
    assert q.prune(older_than=0, statuses=["completed", "failed"]) == 2501
    assert q.stats().total == 0 and q.get(failed.id) is None
    assert q.prune(older_than=0, statuses=["completed", "failed"]) == 0


def test_ids_are_not_reused_after_prune(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    claim = q.claim()
    q.complete(job.id, claim.id)
    time.sleep(0.01)
    q.prune(older_than=0)
    assert q.enqueue("t").id > job.id


def test_wait_returns_when_the_job_is_final(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    claim = q.claim()
    timer = threading.Timer(0.2, lambda: q.complete(job.id, claim.id, result="done"))
    timer.start()
    started = time.monotonic()
    final = q.wait(job.id, timeout=10)
    timer.join()
    assert final.status == Status.COMPLETED and final.result == "done"
    assert time.monotonic() - started < 5


def test_wait_times_out_with_the_job_as_it_is(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    assert q.wait(job.id, timeout=0.2).status == Status.PENDING
    with pytest.raises(JobNotFound):
        q.wait(987654, timeout=0.1)


def test_wait_sees_a_change_made_by_another_connection(
    open_queue: Callable[..., conveyor.Queue], db_url: str
) -> None:
    with open_queue(db_url) as waiter, conveyor.connect(db_url) as other:
        job = other.enqueue("t")
        claim = other.claim()
        timer = threading.Timer(0.3, lambda: other.complete(job.id, claim.id))
        timer.start()
        assert waiter.wait(job.id, timeout=10, poll=0.05).status == Status.COMPLETED
        timer.join()


def test_the_database_clock_is_utc_and_current(q: conveyor.Queue) -> None:
    now = q.now()
    assert now.utcoffset() == timedelta(0)
    assert abs((now - datetime.now(timezone.utc)).total_seconds()) < 5


@pytest.mark.queue_kinds("queue")
def test_sqlite_reads_do_not_wait_for_another_writer(tmp_path: object) -> None:
    """WAL readers never wait for the writer: while another connection holds the
    write lock, reads answer at once (only writes wait for the busy timeout)."""
    import sqlite3

    path = f"{tmp_path}/held.db"
    q = conveyor.connect(f"sqlite:///{path}?timeout=5")
    job = q.enqueue("t")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
    try:
        started = time.monotonic()
        got = q.get(job.id)
        assert q.stats().pending == 1
        assert q.jobs(limit=5)[0].id == job.id
        assert got is not None and got.id == job.id
        assert time.monotonic() - started < 1.0  # not the 5 s busy timeout
        writer = threading.Thread(target=lambda: q.enqueue("blocked-until-commit"))
        writer.start()  # this write waits for the lock; reads beside it must not
        time.sleep(0.2)
        started = time.monotonic()
        assert q.get(job.id) is not None
        assert time.monotonic() - started < 1.0
    finally:
        other.execute("COMMIT")
        other.close()
    writer.join(10)
    assert q.stats().pending == 2
    q.close()
