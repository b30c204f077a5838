"""``enqueue_ids``: a large load of jobs in one transaction, only their ids back."""

from __future__ import annotations

import pytest

import conveyor
from conveyor import InvalidArgument


def test_enqueue_ids_adds_every_job_in_order(q: conveyor.Queue) -> None:
    items = [{"task": "t", "payload": {"n": n}, "priority": n % 3} for n in range(2500)]
    ids = q.enqueue_ids(items, queue="bulk")
    assert len(ids) == 2500 and ids == sorted(ids) and len(set(ids)) == 2500
    assert q.stats("bulk").pending == 2500
    first, last = q.get(ids[0]), q.get(ids[-1])
    assert first is not None and first.payload == {"n": 0} and first.queue == "bulk"
    assert last is not None and last.payload == {"n": 2499} and last.priority == 2499 % 3


def test_enqueue_ids_refuses_what_needs_enqueue_many_and_writes_nothing(
    q: conveyor.Queue,
) -> None:
    for extra in ({"key": "k"}, {"subscriber": "s"}, {"after": [1]}):
        with pytest.raises(InvalidArgument, match="need enqueue_many"):
            q.enqueue_ids([{"task": "ok"}, {"task": "t", **extra}])
    with pytest.raises(InvalidArgument, match="a task name is required"):
        q.enqueue_ids([{"task": "ok"}, {"payload": 1}])
    assert q.stats().total == 0
    assert q.enqueue_ids([]) == []
