"""Enqueue: one, many, keys and the dedupe policy, subscribers, transactional enqueue."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path

import pytest

import conveyor
from conveyor import DuplicateJob, InvalidArgument, Status
from tests.conftest import PG_URL, drop_schema, fresh_url
from tests.core._race import at_once


def test_enqueue_stores_every_field(q: conveyor.Queue) -> None:
    run_at = datetime.now(timezone.utc) + timedelta(hours=1)
    job = q.enqueue(
        "books.sync",
        {"book": 7, "tags": ["a", "b"]},
        queue="sync",
        key="book-7",
        priority=-5,
        run_at=run_at,
        max_attempts=9,
    )
    assert job.id > 0
    assert (job.task, job.queue, job.key, job.priority, job.max_attempts) == (
        "books.sync",
        "sync",
        "book-7",
        -5,
        9,
    )
    assert job.payload == {"book": 7, "tags": ["a", "b"]}
    assert job.status == Status.PENDING == "pending"
    assert job.attempts == 0
    assert abs((job.run_at - run_at).total_seconds()) < 0.01
    assert job.created_at.tzinfo is not None and job.created_at.utcoffset() == timedelta(0)
    assert not job.deduplicated
    assert q.get(job.id) == job


def test_an_enqueue_without_a_key_returns_the_job_as_stored(q: conveyor.Queue) -> None:
    """Every option a keyless enqueue takes, answered as the database stored it."""
    run_at = datetime.now(timezone.utc) + timedelta(minutes=5)
    job = q.enqueue(
        "books.sync", [1, {"a": None}], queue="sync", priority=3, run_at=run_at,
        max_attempts=4, group="book-7",
    )  # fmt: skip
    assert (job.queue, job.priority, job.max_attempts, job.group) == ("sync", 3, 4, "book-7")
    assert job.payload == [1, {"a": None}]
    assert abs((job.run_at - run_at).total_seconds()) < 0.01
    assert q.get(job.id) == job
    bare = q.enqueue("books.sync")
    assert bare.run_at == bare.created_at and bare.max_attempts == q.defaults.max_attempts
    assert (bare.queue, bare.priority, bare.payload, bare.group) == ("default", 0, None, None)
    assert q.get(bare.id) == bare


def test_an_enqueue_that_meets_a_transaction_conflict_is_written_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conflict (MySQL's deadlock or lock-wait time-out) rolled the INSERT back: the
    enqueue runs again and the job is there once."""
    q = conveyor.connect(db_url)
    real = q.driver.write_once
    calls: list[object] = []

    def conflicting(*args: object, **kwargs: object) -> object:
        calls.append(args[0])
        if len(calls) == 1:
            raise conveyor.TransactionConflict("MySQL broke a deadlock by rolling back")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(q.driver, "write_once", conflicting)
    job = q.enqueue("books.sync", {"n": 1}, queue="sync")
    assert len(calls) == 2 and calls[0] == calls[1]  # the same INSERT, twice
    assert [j.id for j in q.jobs(queue="sync")] == [job.id]
    q.close()


def test_a_job_is_due_the_moment_its_enqueue_returns(q: conveyor.Queue) -> None:
    """The enqueue's times and the claim's "now" come from one clock read alike: a job
    enqueued without a run_at is claimable at once, in the same millisecond too."""
    for n in range(200):
        job = q.enqueue("t", {"n": n})
        claim = q.claim(limit=1)
        assert [j.id for j in claim.jobs] == [job.id], f"enqueue {n}: not due at once"
        assert claim.jobs[0].created_at <= claim.jobs[0].claimed_at  # type: ignore[operator]
        q.complete(job.id, claim.id)


def test_payloads_round_trip_any_json(q: conveyor.Queue) -> None:
    for payload in [
        None,
        0,
        -1.5,
        "text ünïcode ✓",
        [1, [2, [3]]],
        {"a": {"b": None}},
        True,
        2**70,
        {"quote": "'; DROP TABLE conveyor_jobs; --"},
    ]:
        assert q.get(q.enqueue("t", payload).id).payload == payload  # type: ignore[union-attr]


def test_ids_increase_in_enqueue_order(q: conveyor.Queue) -> None:
    ids = [q.enqueue("t").id for _ in range(5)]
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_key_returns_the_active_job_instead_of_a_second_one(q: conveyor.Queue) -> None:
    first = q.enqueue("fetch", {"url": "u"}, key="u")
    again = q.enqueue("fetch", {"url": "other"}, key="u")
    assert again.id == first.id and again.deduplicated
    assert again.payload == {"url": "u"}
    claim = q.claim()
    assert q.enqueue("fetch", key="u").id == first.id  # running counts as active too
    q.complete(first.id, claim.id)
    fresh = q.enqueue("fetch", key="u")  # final: the key is free again by default
    assert fresh.id != first.id and not fresh.deduplicated


def test_keys_are_scoped_to_their_queue(q: conveyor.Queue) -> None:
    a = q.enqueue("t", key="k", queue="a")
    b = q.enqueue("t", key="k", queue="b")
    assert a.id != b.id


def test_on_active_raise_refuses_a_duplicate_and_writes_nothing(q: conveyor.Queue) -> None:
    first = q.enqueue("t", key="k")
    with pytest.raises(DuplicateJob, match=f"job {first.id}") as info:
        q.enqueue("t", key="k", on_active="raise")
    assert info.value.job_id == first.id
    assert q.stats().pending == 1


def test_cache_ttl_returns_a_recent_completed_result(q: conveyor.Queue) -> None:
    job = q.enqueue("fetch", key="url")
    claim = q.claim()
    q.complete(job.id, claim.id, result={"title": "T"})
    cached = q.enqueue("fetch", key="url", cache_ttl=timedelta(minutes=5))
    assert cached.id == job.id and cached.deduplicated and cached.result == {"title": "T"}
    # Without a TTL, or once the result is older than the TTL, a new job is made.
    assert q.enqueue("fetch", key="url", queue="default", cache_ttl=0.0).id != job.id


def test_on_failed_policies(q: conveyor.Queue) -> None:
    job = q.enqueue("fetch", key="u", max_attempts=1)
    claim = q.claim()
    q.fail(job.id, claim.id, "404", retryable=False)
    returned = q.enqueue("fetch", key="u", on_failed="return")
    assert returned.id == job.id and returned.status == Status.FAILED and returned.deduplicated
    retried = q.enqueue("fetch", key="u", on_failed="retry")
    assert retried.id == job.id and retried.status == Status.PENDING and retried.attempts == 0
    claim = q.claim()
    q.fail(job.id, claim.id, "404", retryable=False)
    new = q.enqueue("fetch", key="u")  # the default: a new job
    assert new.id != job.id and new.status == Status.PENDING


def test_bad_dedupe_options_are_refused(q: conveyor.Queue) -> None:
    with pytest.raises(InvalidArgument, match="on_active"):
        q.enqueue("t", key="k", on_active="ignore")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="on_failed"):
        q.enqueue("t", key="k", on_failed="maybe")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="cache_ttl"):
        q.enqueue("t", key="k", cache_ttl=-1)
    assert q.stats().total == 0


def test_subscribers_join_the_active_job(q: conveyor.Queue) -> None:
    job = q.enqueue("fetch", key="u", subscriber="alice")
    q.enqueue("fetch", key="u", subscriber="bob")
    q.enqueue("fetch", key="u", subscriber="alice")  # twice is once
    assert q.subscribers(job.id) == ["alice", "bob"]
    assert q.subscribers(q.enqueue("other").id) == []


def test_enqueue_many_is_one_transaction_in_order(q: conveyor.Queue) -> None:
    jobs = q.enqueue_many(
        [
            {"task": "a", "payload": {"n": 1}},
            {"task": "b", "priority": 3},
            {
                "task": "c",
                "run_at": datetime.now(timezone.utc) + timedelta(days=1),
                "max_attempts": 7,
            },
        ],
        queue="bulk",
    )
    assert [j.task for j in jobs] == ["a", "b", "c"]
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)
    assert all(j.queue == "bulk" for j in jobs)
    assert jobs[0].payload == {"n": 1} and jobs[1].priority == 3 and jobs[2].max_attempts == 7
    assert q.stats("bulk").pending == 3 and q.stats("bulk").scheduled == 1


def test_enqueue_many_with_keys_dedupes_within_the_batch(q: conveyor.Queue) -> None:
    jobs = q.enqueue_many(
        [{"task": "t", "key": "x"}, {"task": "t", "key": "x"}, {"task": "t", "key": "y"}]
    )
    assert jobs[0].id == jobs[1].id and jobs[1].deduplicated
    assert jobs[2].id != jobs[0].id
    assert q.stats().pending == 2


def test_enqueue_many_checks_everything_before_writing(q: conveyor.Queue) -> None:
    with pytest.raises(InvalidArgument, match=r"items\[2\]: payload"):
        q.enqueue_many([{"task": "a"}, {"task": "b"}, {"task": "c", "payload": {1, 2}}])
    with pytest.raises(InvalidArgument, match=r"items\[0\]: unknown field"):
        q.enqueue_many([{"task": "a", "colour": "red"}])
    with pytest.raises(InvalidArgument, match=r"items\[1\]: a task name is required"):
        q.enqueue_many([{"task": "a"}, {"payload": 1}])
    assert q.stats().total == 0
    assert q.enqueue_many([]) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"payload": float("nan")}, "payload: expected finite numbers"),
        ({"payload": {"a": object()}}, "payload: expected a JSON-serialisable value"),
        ({"payload": {1: "x"}}, "payload: expected string object keys"),
        ({"payload": "nul\x00byte"}, "payload: text may not contain NUL"),
        ({"payload": "x" * (1024 * 1024 + 1)}, "payload: expected at most 1048576 bytes"),
        ({"priority": 2**40}, "priority: expected an integer from"),
        ({"priority": "high"}, "priority: expected an integer"),
        ({"max_attempts": 0}, "max_attempts: expected an integer from 1"),
        ({"queue": ""}, "queue: expected 1 to"),
        ({"key": "k\x00"}, "key: may not contain control characters"),
        ({"run_at": datetime(2030, 1, 1)}, "run_at: expected a timezone-aware datetime"),
        ({"run_at": "tomorrow"}, "run_at: expected a datetime"),
        ({"subscriber": 42}, "subscriber: expected a string"),
    ],
)
def test_bad_enqueue_arguments_raise_and_write_nothing(
    q: conveyor.Queue, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message) as info:
        q.enqueue("task", **kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert q.stats().total == 0


def test_deeply_nested_payload_is_refused(q: conveyor.Queue) -> None:
    deep: object = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(InvalidArgument, match="nested at most"):
        q.enqueue("t", deep)
    assert q.stats().total == 0


def test_payload_limit_is_configurable(
    open_queue: Callable[..., conveyor.Queue], db_url: str
) -> None:
    with open_queue(db_url, max_payload_bytes=100) as small:
        small.enqueue("t", "x" * 50)
        with pytest.raises(InvalidArgument, match="at most 100 bytes"):
            small.enqueue("t", "x" * 200)


@pytest.mark.queue_kinds("queue")
def test_transactional_enqueue_sqlite(tmp_path: Path) -> None:
    import sqlite3

    path = f"{tmp_path}/app.db"
    q = conveyor.connect(f"sqlite:///{path}")
    conn = sqlite3.connect(path)  # the application's own connection
    conn.execute("CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT)")
    conn.commit()
    conn.execute("INSERT INTO books (title) VALUES ('Dune')")
    q.enqueue("sync", {"book": 1}, conn=conn)
    conn.rollback()  # the book and its job vanish together
    assert q.stats().total == 0
    conn.execute("INSERT INTO books (title) VALUES ('Emma')")
    job = q.enqueue("sync", {"book": 1}, key="book-1", conn=conn)
    conn.commit()
    assert q.get(job.id) is not None and q.stats().pending == 1
    with pytest.raises(InvalidArgument, match="conn: expected a sqlite3.Connection"):
        q.enqueue("sync", conn=object())
    conn.close()
    q.close()


@pytest.mark.queue_kinds("queue")
def test_transactional_enqueue_postgres(tmp_path: Path) -> None:
    import psycopg

    url, schema = fresh_url("postgresql", tmp_path)
    q = conveyor.connect(url)
    with psycopg.connect(PG_URL) as conn:
        conn.execute("CREATE TEMP TABLE books (id serial PRIMARY KEY, title text)")
        conn.commit()
        with pytest.raises(RuntimeError), conn.transaction():
            conn.execute("INSERT INTO books (title) VALUES ('Dune')")
            q.enqueue("sync", {"book": 1}, conn=conn)
            raise RuntimeError("the application changes its mind")
        assert q.stats().total == 0
        with conn.transaction():
            conn.execute("INSERT INTO books (title) VALUES ('Emma')")
            job = q.enqueue("sync", {"book": 2}, key="b2", conn=conn)
            assert q.get(job.id) is None  # not visible before the caller commits
        assert q.get(job.id) is not None
        # Outside a transaction block: the job commits with the caller's commit.
        conn.execute("INSERT INTO books (title) VALUES ('Ulysses')")
        later = q.enqueue("sync", {"book": 3}, conn=conn)
        conn.rollback()
        assert q.get(later.id) is None
    with pytest.raises(InvalidArgument, match="conn: expected a psycopg.Connection"):
        q.enqueue("sync", conn="not a connection")
    q.close()
    drop_schema(schema)  # type: ignore[arg-type]


def test_subscribers_at_once_never_take_a_job_past_the_cap(db_url: str) -> None:
    """Eight connections subscribe to one job at the same moment while two places are
    left: two join, the others get TooManySubscribers and write nothing; a subscriber
    already there still enqueues; a batch with one subscriber too many adds no job."""
    from conveyor.ops.defaults import MAX_SUBSCRIBERS

    first = conveyor.connect(db_url)
    job = first.enqueue("fetch", key="u", subscriber="s0")
    for n in range(1, MAX_SUBSCRIBERS - 2):
        first.enqueue("fetch", key="u", subscriber=f"s{n}")
    racers = [conveyor.connect(db_url) for _ in range(8)]
    outcomes = at_once(
        [
            partial(r.enqueue, "fetch", key="u", subscriber=f"racer{i}")
            for i, r in enumerate(racers)
        ],
        done="joined",
        refused=conveyor.TooManySubscribers,
    )
    assert sorted(outcomes) == ["joined"] * 2 + ["refused"] * 6
    subscribers = first.subscribers(job.id)
    assert len(subscribers) == MAX_SUBSCRIBERS
    assert len([s for s in subscribers if s.startswith("racer")]) == 2
    assert first.enqueue("fetch", key="u", subscriber="s0").id == job.id  # already one
    with pytest.raises(conveyor.TooManySubscribers, match=f"at most {MAX_SUBSCRIBERS}"):
        first.enqueue_many([{"task": "other"}, {"task": "fetch", "key": "u", "subscriber": "late"}])
    assert first.stats().total == 1  # the batch's other job was not added either
    assert len(first.subscribers(job.id)) == MAX_SUBSCRIBERS
    # Over HTTP, past a server limit set above it, the library's cap answers a 422.
    from fastapi.testclient import TestClient

    from conveyor.web import Limits, create_app

    app = create_app(first, tokens={}, limits=Limits(max_subscribers=5000))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        answer = client.post("/api/jobs", json={"task": "fetch", "key": "u", "subscriber": "x"})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "too_many_subscribers"
    assert len(first.subscribers(job.id)) == MAX_SUBSCRIBERS
    for racer in racers:
        racer.close()
    first.close()
