"""Flow control: pause and resume, concurrency caps per queue and per group, rate
limits, all kept in the database and enforced when jobs are claimed."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import conveyor
from conveyor import InvalidArgument, Rate, Status


def _claimed(q: conveyor.Queue, queue: str = "default", limit: int = 100) -> list[int]:
    return [j.id for j in q.claim(queue, limit=limit, count_remaining=False).jobs]


def test_a_paused_queue_gives_nothing_until_resumed(q: conveyor.Queue) -> None:
    running = q.enqueue("t")
    held = q.claim()
    jobs = [q.enqueue("t") for _ in range(3)]
    other = q.enqueue("t", queue="other")
    settings = q.pause("default")
    assert settings.paused and settings.controlled
    assert q.claim(limit=10).jobs == []
    assert q.claim(limit=10).remaining == 0
    assert _claimed(q, "other") == [other.id]  # other queues are not affected
    # a job already running finishes normally
    assert q.complete(running.id, held.id).status == Status.COMPLETED
    assert q.queue_settings()["default"].paused
    resumed = q.resume("default")
    assert not resumed.paused and not resumed.controlled
    assert _claimed(q) == [j.id for j in jobs]


def test_a_queue_named_with_a_slash_is_paused_limited_and_claimed(q: conveyor.Queue) -> None:
    # Over HTTP the name travels in the path as %2F, which servers decode before routing.
    job = q.enqueue("t", queue="mail/eu")
    assert q.pause("mail/eu").paused
    assert q.claim(queue="mail/eu").jobs == []
    assert q.set_limits("mail/eu", max_running=2).max_running == 2
    assert not q.resume("mail/eu").paused
    assert [j.id for j in q.claim(queue="mail/eu").jobs] == [job.id]


def test_max_running_caps_the_queue_across_claims(q: conveyor.Queue) -> None:
    jobs = [q.enqueue("t") for _ in range(6)]
    q.set_limits("default", max_running=3)
    first = q.claim(limit=2)
    second = q.claim(limit=5)
    assert len(first.jobs) == 2 and len(second.jobs) == 1
    assert q.claim(limit=5).jobs == []
    q.complete(first.jobs[0].id, first.id)
    assert len(_claimed(q)) == 1  # one slot came free
    assert q.stats().running == 3
    q.set_limits("default")  # no limits: back to the plain path
    assert len(_claimed(q)) == 2
    assert q.stats().pending == 0 and len(jobs) == 6


def test_group_caps_leave_other_groups_and_ungrouped_jobs_free(q: conveyor.Queue) -> None:
    book1 = [q.enqueue("page", group="book-1") for _ in range(3)]
    book2 = [q.enqueue("page", group="book-2") for _ in range(2)]
    loose = q.enqueue("page")
    q.set_limits("default", group_max_running=1)
    first = q.claim(limit=100, count_remaining=False)
    assert [j.id for j in first.jobs] == [book1[0].id, book2[0].id, loose.id]
    assert _claimed(q) == []
    q.complete(book1[0].id, first.id)
    assert _claimed(q) == [book1[1].id]
    assert q.get(book1[1].id).group == "book-1"  # type: ignore[union-attr]


def test_group_caps_find_jobs_behind_a_crowded_group(q: conveyor.Queue) -> None:
    crowded = q.enqueue_many([{"task": "t", "group": "g"} for _ in range(1200)])
    behind = q.enqueue("t", group="other")
    q.set_limits("default", group_max_running=2)
    assert _claimed(q, limit=10) == [crowded[0].id, crowded[1].id, behind.id]


def test_a_rate_limit_spreads_starts_over_the_window(q: conveyor.Queue) -> None:
    for _ in range(10):
        q.enqueue("t")
    q.set_limits("default", rate=Rate(3, per=timedelta(seconds=0.5)))
    assert len(_claimed(q)) == 3
    assert _claimed(q) == []  # the window is full
    time.sleep(0.6)
    assert len(_claimed(q)) == 3
    assert q.queue_settings()["default"].rate == Rate(3, 0.5)


def test_a_group_rate_limit(q: conveyor.Queue) -> None:
    for group in ("a", "a", "a", "b"):
        q.enqueue("t", group=group)
    q.set_limits("default", group_rate="2/1m")
    assert len(_claimed(q)) == 3  # two of a, one of b
    assert _claimed(q) == []


def test_limits_are_checked_and_kept(q: conveyor.Queue) -> None:
    with pytest.raises(InvalidArgument, match="max_running"):
        q.set_limits("default", max_running=0)
    with pytest.raises(InvalidArgument, match="rate"):
        q.set_limits("default", rate="fast")
    with pytest.raises(InvalidArgument, match="queue"):
        q.pause("")
    assert q.queue_settings() == {}
    q.set_limits("mail", max_running=5, rate="10/1s")
    q.pause("mail")  # pausing keeps the limits
    mail = q.queue_settings("mail")["mail"]
    assert mail.paused and mail.max_running == 5 and mail.rate == Rate(10, 1)
    assert str(mail.rate) == "10/1s"
    assert q.resume("mail").max_running == 5


def test_claiming_one_job_by_id_ignores_pause_and_limits(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    q.pause("default")
    claim = q.claim_job(job.id, worker="operator")
    assert [j.id for j in claim.jobs] == [job.id] and claim.queue == "default"
    assert claim.jobs[0].worker == "operator" and claim.jobs[0].attempts == 1
