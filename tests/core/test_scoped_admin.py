"""An operator's tools scoped by task and by key: resets and recoveries of some tasks,
counts per task, and cancelling or failing every active job with a key."""

from __future__ import annotations

import time

import pytest

import conveyor
from conveyor import InvalidArgument, InvalidTransition, StaleClaim, Status
from conveyor.job import ErrorKind


def _claim_all(q: conveyor.Queue, n: int, *, lease: float = 30.0) -> conveyor.Claim:
    claim = q.claim(limit=n, lease=lease)
    assert len(claim.jobs) == n
    return claim


# -- resets and recoveries scoped by task ---------------------------------------------
def test_reset_claims_of_some_tasks_only(q: conveyor.Queue) -> None:
    a = q.enqueue("books.sync")
    b = q.enqueue("books.ocr")
    c = q.enqueue("videos.encode")
    other = q.enqueue("books.sync", queue="other")
    _claim_all(q, 3)
    q.claim("other")
    assert q.reset_claims(0, task="books.sync") == 2  # both queues: no queue named
    assert [q.get(j.id).status for j in (a, b, c, other)] == [  # type: ignore[union-attr]
        Status.PENDING, Status.RUNNING, Status.RUNNING, Status.PENDING,
    ]  # fmt: skip
    q.claim("other")
    assert q.reset_claims(0, task=["books.ocr", "books.sync"], queue="default") == 1
    assert q.get(b.id).status == Status.PENDING  # type: ignore[union-attr]
    assert q.get(other.id).status == Status.RUNNING  # type: ignore[union-attr]
    assert q.reset_claims(0, task="nothing.like.it") == 0
    assert q.reset_claims(0) == 2  # videos.encode in default, books.sync in other


def test_recover_of_some_tasks_only(q: conveyor.Queue) -> None:
    a = q.enqueue("books.sync")
    b = q.enqueue("books.ocr")
    old = _claim_all(q, 2, lease=0.05)
    time.sleep(0.2)
    assert q.recover(task="videos.encode") == 0
    assert q.recover(task=["books.ocr"], queue=["default", "other"]) == 1
    assert q.jobs(status="running")[0].id == a.id  # a running job past its lease
    with pytest.raises(StaleClaim):
        q.complete(b.id, old.id)
    assert q.recover(task="books.sync") == 1


@pytest.mark.parametrize("bad", ["", ["ok", ""], [], 7])
def test_a_task_filter_must_name_tasks(q: conveyor.Queue, bad: object) -> None:
    with pytest.raises(InvalidArgument, match="task"):
        q.reset_claims(60, task=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="task"):
        q.recover(task=bad)  # type: ignore[arg-type]


# -- counts per task -------------------------------------------------------------------
def test_task_stats_count_each_tasks_jobs_per_status(q: conveyor.Queue) -> None:
    assert q.task_stats() == {}
    q.enqueue_many([{"task": "books.sync"} for _ in range(3)])
    ocr = q.enqueue("books.ocr", max_attempts=1)
    q.enqueue("books.sync", queue="other")
    claim = q.claim(limit=2)  # two books.sync
    q.complete(claim.jobs[0].id, claim.id)
    q.fail(ocr.id, q.claim_job(ocr.id).id, "unreadable")
    per_task = q.task_stats()
    assert sorted(per_task) == ["books.ocr", "books.sync"]
    sync = per_task["books.sync"]
    assert (sync.pending, sync.running, sync.completed, sync.total) == (2, 1, 1, 4)
    assert (per_task["books.ocr"].failed, per_task["books.ocr"].total) == (1, 1)
    only_other = q.task_stats("other")
    assert list(only_other) == ["books.sync"] and only_other["books.sync"].pending == 1
    assert q.task_stats("nowhere") == {}
    # The tasks' counts add up to the queues'.
    assert sum(s.total for s in per_task.values()) == q.stats().total


def test_task_stats_refuse_a_bad_queue_name(q: conveyor.Queue) -> None:
    with pytest.raises(InvalidArgument, match="queue"):
        q.task_stats("")


# -- cancel and fail by key --------------------------------------------------------------
def test_cancel_by_key_cancels_the_active_job_with_the_key(q: conveyor.Queue) -> None:
    running = q.enqueue("books.sync", key="book-7", queue="sync")
    claim = q.claim("sync")
    other_key = q.enqueue("books.sync", key="book-8", queue="sync")
    other_queue = q.enqueue("books.sync", key="book-7")
    assert q.cancel_by_key("book-7", queue="sync") == 1
    found = q.get(running.id)
    assert found is not None and found.status == Status.CANCELLED
    assert found.finished_at is not None
    assert q.get(other_key.id).status == Status.PENDING  # type: ignore[union-attr]
    assert q.get(other_queue.id).status == Status.PENDING  # type: ignore[union-attr]
    # The running job's worker is fenced out.
    with pytest.raises(InvalidTransition, match="found cancelled"):
        q.complete(running.id, claim.id)
    with pytest.raises(InvalidTransition):
        q.heartbeat(running.id, claim.id)
    assert q.cancel_by_key("book-7", queue="sync") == 0  # nothing active is left
    # A pending one too; the key is then free for a new job.
    pending = q.enqueue("books.sync", key="book-7", queue="sync")
    assert q.cancel_by_key("book-7", queue="sync") == 1
    assert q.get(pending.id).status == Status.CANCELLED  # type: ignore[union-attr]
    assert q.enqueue("books.sync", key="book-7", queue="sync").id not in (running.id, pending.id)
    assert q.cancel_by_key("book-7") == 1  # the default queue


def test_fail_by_key_fails_for_good_and_keeps_the_history(q: conveyor.Queue) -> None:
    done = q.enqueue("videos.encode", key="video-3")
    q.complete(done.id, q.claim().id)
    running = q.enqueue("videos.encode", key="video-3", max_attempts=5, subscriber="chat-1")
    claim = q.claim()
    q.fail(running.id, claim.id, "codec crashed", delay=0)
    claim = q.claim()
    assert q.fail_by_key("video-3", "source file deleted") == 1
    failed = q.get(running.id)
    assert failed is not None and failed.status == Status.FAILED
    assert failed.error == "source file deleted" and failed.error_kind == ErrorKind.TERMINAL
    assert failed.attempts == 2 and failed.finished_at is not None  # attempts left: no retry
    assert [(e.error, e.kind) for e in failed.errors] == [
        ("codec crashed", ErrorKind.RETRYABLE), ("source file deleted", ErrorKind.TERMINAL),
    ]  # fmt: skip
    assert q.get(done.id).status == Status.COMPLETED  # type: ignore[union-attr]
    with pytest.raises(InvalidTransition, match="found failed"):
        q.complete(running.id, claim.id)
    # A finish like any other: its subscriber is told.
    [(told, subscribers)] = q.take_notifications()
    assert (told.id, subscribers) == (running.id, ["chat-1"])
    assert q.fail_by_key("video-3", "again") == 0
    # A pending job that never ran fails too, its history starting there.
    pending = q.enqueue("videos.encode", key="video-3", queue="later")
    assert q.fail_by_key("video-3", "gone", queue="later") == 1
    never_ran = q.get(pending.id)
    assert never_ran is not None and never_ran.status == Status.FAILED
    assert [e.error for e in never_ran.errors] == ["gone"]
    assert q.stats().failed == 2


def test_cancel_and_fail_by_key_refuse_bad_input(q: conveyor.Queue) -> None:
    with pytest.raises(InvalidArgument, match="key"):
        q.cancel_by_key("")
    with pytest.raises(InvalidArgument, match="queue"):
        q.cancel_by_key("k", queue="")
    with pytest.raises(InvalidArgument, match="error"):
        q.fail_by_key("k", "")
    with pytest.raises(InvalidArgument, match="error"):
        q.fail_by_key("k", 42)  # type: ignore[arg-type]
