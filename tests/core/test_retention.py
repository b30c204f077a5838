"""Retention policies through the contract, on every kind of queue and database:
precedence, batches, archives, retired keys."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import conveyor
from conveyor.maintenance import RetentionPruner
from tests.core._race import at_once


def finish(q: Any, queue: str, task: str, n: int, *, key: str | None = None) -> list[int]:
    """``n`` jobs of ``task`` in ``queue``, claimed and completed; their ids."""
    ids = []
    for i in range(n):
        job = q.enqueue(task, {"i": i}, queue=queue, key=None if key is None else f"{key}{i}")
        ids.append(job.id)
    done = 0
    while done < n:
        claim = q.claim(queue, limit=n)
        for job in claim.jobs:
            q.complete(job.id, claim.id, {"done": job.id})
            done += 1
    return ids


def prune_all(q: Any, **options: Any) -> int:
    removed = 0
    while True:
        expired = q.expired_jobs(**options)
        if not expired:
            return removed
        removed += q.prune_expired([e.job.id for e in expired], **options)


def test_policies_are_set_read_replaced_and_cleared(q: Any) -> None:
    assert q.retention_policies() == []
    p = q.set_retention("completed", timedelta(days=7))
    assert (p.status, p.queue, p.task, p.keep, p.archive, p.retire_keys) == (
        "completed", None, None, timedelta(days=7), None, False,
    )  # fmt: skip
    q.set_retention("completed", None, queue="mail", task="send", retire_keys=True)
    q.set_retention("failed", 60, task="send", archive="task:archive")
    again = q.set_retention("completed", 3600, queue="mail", task="send")
    assert again.keep_seconds == 3600 and again.retire_keys is False  # replaced whole
    listed = {(p.status, p.queue, p.task): p.keep_seconds for p in q.retention_policies()}
    assert listed == {
        ("completed", None, None): 7 * 86400.0,
        ("completed", "mail", "send"): 3600.0,
        ("failed", None, "send"): 60.0,
    }
    assert q.clear_retention(status="completed", queue="mail", task="send") == 1
    assert q.clear_retention(status="completed", queue="mail", task="send") == 0
    assert q.clear_retention(task="send") == 1  # every status of the task's policies
    assert [(p.status, p.queue, p.task) for p in q.retention_policies()] == [
        ("completed", None, None)
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda q: q.set_retention("pending", 10), "status: expected one of completed"),
        (lambda q: q.set_retention("completed", -1), "keep"),
        (lambda q: q.set_retention("completed", 10, queue=""), "queue"),
        (lambda q: q.set_retention("completed", 10, archive="s3:bucket"), "archive"),
        (lambda q: q.set_retention("completed", 10, archive="task:"), "archive"),
        (lambda q: q.set_retention("completed", 10, retire_keys="yes"), "retire_keys"),
        (lambda q: q.clear_retention(status="running"), "status"),
        (lambda q: q.expired_jobs(limit=0), "limit"),
        (lambda q: q.expired_jobs(limit=1001), "limit"),
        (lambda q: q.expired_jobs(after=-1), "after"),
        (lambda q: q.prune_expired(list(range(1, 1002))), "ids"),
    ],
)
def test_bad_input_is_refused(q: Any, call: Any, message: str) -> None:
    with pytest.raises(conveyor.InvalidArgument, match=message):
        call(q)


def test_the_most_specific_policy_wins(q: Any) -> None:
    # Every job finished just now: a policy of 0 s lets its jobs go, one of an hour or
    # for ever keeps them.
    default = finish(q, "a", "t", 1)  # the status default: pruned
    by_queue = finish(q, "kept", "t", 1)  # queue+state keeps
    by_task = finish(q, "kept", "brief", 1)  # task+state beats queue+state: pruned
    by_both = finish(q, "kept", "keep", 1)  # queue+task+state beats task+state: kept
    forever = finish(q, "b", "keep", 1)  # task+state (for ever) beats the default
    failed = q.enqueue("t", queue="a", max_attempts=1)
    claim = q.claim("a")
    q.fail(failed.id, claim.id, "boom")  # no policy for failed jobs: kept
    q.set_retention("completed", 0)
    q.set_retention("completed", 3600, queue="kept")
    q.set_retention("completed", 0, task="brief")
    q.set_retention("completed", None, task="keep")
    q.set_retention("completed", 3600, queue="kept", task="keep")
    q.set_retention("completed", 0, queue="kept", task="keep-not")  # covers nothing here
    assert sorted(e.job.id for e in q.expired_jobs()) == sorted(default + by_task)
    assert prune_all(q) == 2
    for gone in default + by_task:
        assert q.get(gone) is None
    for kept in by_queue + by_both + forever + [failed.id]:
        assert q.get(kept) is not None


def test_jobs_are_pruned_at_most_limit_at_a_time(q: Any) -> None:
    ids = finish(q, "a", "t", 7)
    q.set_retention("completed", 0)
    first = q.expired_jobs(limit=3)
    assert [e.job.id for e in first] == ids[:3]
    assert first[0].policy.status == "completed" and first[0].job.result == {"done": ids[0]}
    assert q.prune_expired([e.job.id for e in first]) == 3
    assert q.prune_expired([e.job.id for e in first]) == 0  # gone already
    assert [e.job.id for e in q.expired_jobs(limit=10)] == ids[3:]
    assert [e.job.id for e in q.expired_jobs(limit=2, after=ids[4])] == ids[5:7]


def test_a_batch_takes_the_oldest_ids_whatever_their_policy(q: Any) -> None:
    a = finish(q, "a", "t", 2)
    b = finish(q, "b", "t", 2)
    more_a = finish(q, "a", "t", 2)
    q.set_retention("completed", 0, queue="a")
    q.set_retention("completed", 0, queue="b", task="t")
    first = q.expired_jobs(limit=3)
    assert [e.job.id for e in first] == [*a, b[0]]
    assert [e.policy.queue for e in first] == ["a", "a", "b"]
    rest = q.expired_jobs(limit=3, after=first[-1].job.id)
    assert [e.job.id for e in rest] == [b[1], *more_a]


def test_prune_expired_deletes_only_jobs_their_policy_lets_go(q: Any) -> None:
    young = finish(q, "a", "t", 1)
    pending = q.enqueue("t", queue="a")
    q.set_retention("completed", 3600)
    assert q.prune_expired([*young, pending.id, 10**9]) == 0
    assert q.get(young[0]) is not None and q.get(pending.id) is not None


def test_an_archive_task_receives_the_records_in_the_pruning_transaction(q: Any) -> None:
    ids = finish(q, "a", "t", 3)
    q.set_retention("completed", 0, queue="a", archive="task:archive")
    assert prune_all(q) == 3
    archive_jobs = q.jobs(queue="a", task="archive")
    assert len(archive_jobs) == 1
    full = q.get(archive_jobs[0].id)
    records = full.payload["jobs"]
    assert [r["id"] for r in records] == ids
    assert records[0]["result"] == {"done": ids[0]} and "claim_id" not in records[0]


def test_a_default_archive_serves_policies_without_one(q: Any) -> None:
    finish(q, "a", "t", 2)
    q.set_retention("completed", 0)
    assert prune_all(q, archive="task:archived") == 2
    assert len(q.jobs(queue="a", task="archived")) == 1


@pytest.mark.queue_kinds("queue", "async")
def test_the_pruner_writes_a_file_archive_before_deleting(q: Any, tmp_path: Path) -> None:
    ids = finish(q, "a", "t", 5)
    path = tmp_path / "archive.jsonl"
    q.set_retention("completed", 0, archive=f"file:{path}")
    pauses: list[float] = []
    pruner = RetentionPruner(q, batch=2, pause=0.01, sleep=pauses.append)
    assert pruner.run_once() == 5
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in lines] == ids
    assert len(pauses) == 2  # three batches of at most 2, a pause between
    assert q.stats("a").completed == 0


def test_a_retired_key_answers_as_its_job_would(q: Any) -> None:
    finish(q, "once", "t", 1, key="book-")
    finish(q, "plain", "t", 1, key="book-")
    q.set_retention("completed", 0, queue="once", retire_keys=True)
    q.set_retention("completed", 0, queue="plain")
    assert prune_all(q) == 2
    # Retired: returned as the job was, however old (on_completed="return").
    kept = q.enqueue("t", queue="once", key="book-0", on_completed="return")
    assert kept.deduplicated and kept.status == conveyor.Status.COMPLETED
    assert kept.payload is None and kept.result is None
    latest = q.latest("book-0", queue="once")
    assert latest is not None and latest.id == kept.id and latest.status == "completed"
    # Not retired: a new job, the key forgotten.
    new = q.enqueue("t", queue="plain", key="book-0", on_completed="return")
    assert not new.deduplicated and new.status == conveyor.Status.PENDING
    # The default dedupe policy enqueues anew after a completed job, retired or not.
    again = q.enqueue("t", queue="once", key="book-0")
    assert not again.deduplicated
    # The newer job holds the key now; pruned in its turn, it is the one retired.
    claim = q.claim("once")
    q.complete(again.id, claim.id)
    assert prune_all(q) == 1
    assert q.latest("book-0", queue="once").id == again.id  # type: ignore[union-attr]


def test_a_retired_failed_key_is_retried_as_a_new_job(q: Any) -> None:
    job = q.enqueue("t", queue="v", key="video-1", max_attempts=1)
    claim = q.claim("v")
    q.fail(job.id, claim.id, "no audio")
    q.set_retention("failed", 0, retire_keys=True)
    assert prune_all(q) == 1
    returned = q.enqueue("t", queue="v", key="video-1", on_failed="return")
    assert returned.id == job.id and returned.status == conveyor.Status.FAILED
    retried = q.enqueue("t", queue="v", key="video-1", on_failed="retry")
    assert retried.id != job.id and retried.status == conveyor.Status.PENDING


@pytest.mark.queue_kinds("queue")
def test_a_stopping_worker_ends_its_pass_between_batches(q: Any) -> None:
    import threading

    finish(q, "a", "t", 5)
    q.set_retention("completed", 0)
    stopping = threading.Event()
    stopping.set()
    assert RetentionPruner(q, batch=2, stopping=stopping).run_once() == 2
    assert RetentionPruner(q, batch=2, pause=0).run_once() == 3  # the next pass goes on


@pytest.mark.queue_kinds("queue")
def test_a_pass_stopped_at_its_batch_limit_is_followed_at_once(q: Any) -> None:
    """Jobs finishing faster than one pass a minute prunes are not left to pile up."""
    import time

    from conveyor.maintenance import Maintainer

    finish(q, "a", "t", 7)
    q.set_retention("completed", 0)
    pruner = RetentionPruner(q, batch=2, max_batches=1, pause=0)
    maintainer = Maintainer()
    maintainer.add(pruner, 3600.0)  # an interval no test outlives
    maintainer.start()
    try:
        deadline = time.monotonic() + 10
        while q.stats(queue="a").completed and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        maintainer.stop()
    assert q.stats(queue="a").completed == 0  # four passes of two, not one an hour
    assert pruner.behind is False  # the last pass found fewer than a batch


def test_writers_at_once_never_take_the_policies_past_the_cap(db_url: str) -> None:
    """Eight connections set new policies at the same moment while two places are left:
    two get them, the others are refused with InvalidArgument and write nothing; and a
    policy already there is still replaced at the cap."""
    from conveyor.ops.retention import MAX_POLICIES

    first = conveyor.connect(db_url)
    for n in range(MAX_POLICIES - 2):
        first.set_retention("completed", n + 1, queue=f"q{n}")
    racers = [conveyor.connect(db_url) for _ in range(8)]
    outcomes = at_once(
        [partial(r.set_retention, "failed", 60, queue=f"racer{i}") for i, r in enumerate(racers)],
        done="set",
        refused=conveyor.InvalidArgument,
        says=f"at most {MAX_POLICIES} policies",
    )
    policies = first.retention_policies()
    assert sorted(outcomes) == ["refused"] * 6 + ["set"] * 2
    assert len(policies) == MAX_POLICIES
    assert len([p for p in policies if (p.queue or "").startswith("racer")]) == 2
    replaced = first.set_retention("completed", 5, queue="q0")  # at the cap: replaced
    assert replaced.keep_seconds == 5 and len(first.retention_policies()) == MAX_POLICIES
    with pytest.raises(conveyor.InvalidArgument, match="at most"):
        first.set_retention("cancelled", 5, queue="one-too-many")
    assert len(first.retention_policies()) == MAX_POLICIES
    from fastapi.testclient import TestClient

    from conveyor.web import create_app

    with TestClient(create_app(first, tokens={}), base_url="http://127.0.0.1") as client:
        body = {"status": "cancelled", "keep_seconds": 5, "queue": "over-http"}
        answer = client.put("/api/retention", json=body)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_argument"
    assert len(first.retention_policies()) == MAX_POLICIES
    for racer in racers:
        racer.close()
    first.close()
