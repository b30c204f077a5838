"""The worker registry, periodic schedule slots, and retried notification deliveries."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import conveyor
from conveyor import InvalidArgument, Status


def _seen(q: conveyor.Queue, name: str, *, running: int = 0, ttl: float = 30) -> None:
    q.worker_seen(name, host="box", pid=42, queues=["a", "b"], concurrency=8,
                  version="0.2.0", running=running, ttl=ttl)  # fmt: skip


def test_workers_register_refresh_and_leave(q: conveyor.Queue) -> None:
    _seen(q, "w1")
    _seen(q, "w2", running=3)
    first = {w.name: w for w in q.workers()}
    assert set(first) == {"w1", "w2"}
    w2 = first["w2"]
    assert (w2.host, w2.pid, w2.queues, w2.concurrency, w2.version, w2.running) == (
        "box", 42, ("a", "b"), 8, "0.2.0", 3)  # fmt: skip
    time.sleep(0.02)
    _seen(q, "w2", running=1)
    again = {w.name: w for w in q.workers()}["w2"]
    assert again.running == 1 and again.last_seen_at > w2.last_seen_at
    assert again.started_at == w2.started_at
    q.worker_stopped("w1")
    assert [w.name for w in q.workers()] == ["w2"]


def test_a_worker_that_stops_refreshing_expires(q: conveyor.Queue) -> None:
    _seen(q, "gone", ttl=0.05)
    _seen(q, "alive")
    time.sleep(0.2)
    assert [w.name for w in q.workers()] == ["alive"]
    assert q.forget_workers(older_than=0) == 1
    assert q.forget_workers(older_than=0) == 0


def test_each_schedule_slot_is_enqueued_once(q: conveyor.Queue) -> None:
    now = q.now().replace(microsecond=0)
    slot = now - timedelta(seconds=5)
    saved = q.save_schedule("nightly", task="report", queue="cron", spec="every 5s",
                            first_slot=slot - timedelta(seconds=5), next_slot=slot)  # fmt: skip
    assert saved.last_slot == slot - timedelta(seconds=5) and saved.next_slot == slot
    first = q.run_schedule_slot("nightly", slot=slot, next_slot=now, task="report", queue="cron")
    assert first is not None and first.queue == "cron" and first.task == "report"
    assert q.run_schedule_slot("nightly", slot=slot, next_slot=now, task="report") is None
    earlier = slot - timedelta(seconds=5)
    assert q.run_schedule_slot("nightly", slot=earlier, next_slot=now, task="report") is None
    info = q.schedules()[0]
    assert (info.name, info.last_slot, info.next_slot) == ("nightly", slot, now)
    # Declaring it again (a worker restarts) keeps the slot it reached.
    q.save_schedule("nightly", task="report", queue="cron", spec="every 5s",
                    first_slot=now + timedelta(hours=1), next_slot=None)  # fmt: skip
    assert q.schedules()[0].last_slot == slot
    assert q.stats("cron").pending == 1


def test_a_failed_delivery_is_offered_again_later_then_given_up(q: conveyor.Queue) -> None:
    job = q.enqueue("t", subscriber="alice")
    claim = q.claim()
    q.complete(job.id, claim.id)
    taken = q.take_notifications()
    assert [(j.id, who) for j, who in taken] == [(job.id, ["alice"])]
    assert q.retry_notifications([(job.id, "alice")], "HTTP 502", base=0.1, max_attempts=2) == 1
    assert q.take_notifications() == []  # backing off
    time.sleep(0.15)
    assert [who for _, who in q.take_notifications()] == [["alice"]]
    q.retry_notifications([(job.id, "alice")], "HTTP 502", base=0.01, max_attempts=2)
    time.sleep(0.05)
    assert q.take_notifications() == []  # given up after two attempts
    with pytest.raises(InvalidArgument):
        q.retry_notifications([(job.id, "alice")], "x", max_attempts=0)
    assert q.get(job.id).status == Status.COMPLETED  # type: ignore[union-attr]
