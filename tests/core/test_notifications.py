"""Taking subscriber notifications: each one by a single dispatcher at a time."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import conveyor


def _finished_with_subscribers(q: conveyor.Queue, jobs: int, subscribers: int) -> None:
    for n in range(jobs):
        job = q.enqueue("t", key=f"k{n}", subscriber="s0")
        for s in range(1, subscribers):
            q.enqueue("t", key=f"k{n}", subscriber=f"s{s}")
        q.cancel(job.id)


def test_concurrent_dispatchers_never_take_the_same_subscriber(
    q: conveyor.Queue, open_queue: Callable[..., conveyor.Queue], db_url: str
) -> None:
    _finished_with_subscribers(q, jobs=40, subscribers=5)
    dispatchers = [open_queue(db_url) for _ in range(6)]

    def take_all(n: int) -> list[tuple[int, str]]:
        taken = []
        mine = dispatchers[n]
        while batch := mine.take_notifications(limit=7):
            taken += [(job.id, who) for job, subs in batch for who in subs]
            mine.mark_notified([(job.id, who) for job, subs in batch for who in subs])
        return taken

    with ThreadPoolExecutor(6) as pool:
        results = [pair for part in pool.map(take_all, range(6)) for pair in part]
    assert len(results) == len(set(results)) == 200


def test_an_untold_notification_returns_after_its_lease(q: conveyor.Queue) -> None:
    _finished_with_subscribers(q, jobs=1, subscribers=2)
    # A lease long enough that the next take, on a loaded machine and over HTTP, still
    # comes inside it (0.2 s did not, once, with a remote queue on MariaDB).
    [(job, subscribers)] = q.take_notifications(lease=1.0)
    assert subscribers == ["s0", "s1"] and job.status == "cancelled"
    assert q.take_notifications() == []  # taken, not yet told
    time.sleep(1.1)  # the dispatcher died without marking them
    [(again, who)] = q.take_notifications()
    assert again.id == job.id and who == ["s0", "s1"]
    q.mark_notified([(job.id, "s0"), (job.id, "s1")])
    time.sleep(0.01)
    assert q.take_notifications(lease=0.01) == []
    q.retry(job.id)  # finishing again is news again
    q.cancel(job.id)
    assert [w for _, w in q.take_notifications()] == [["s0", "s1"]]
