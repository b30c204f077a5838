"""Upkeep never waits on rows it does not touch: folding the counts' deltas and
pruning final jobs go on while another transaction holds a job it is working on, or
has written a job (and its delta) it has not committed yet. MariaDB runs a one-table
DELETE … WHERE id IN (…) as a scan that waits on every locked row; these check the
statements do not. (SQLite has one writer at a time: there, any open write transaction
holds everyone, by design.)"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

import conveyor

SERVERS = pytest.mark.parametrize("backend_name", ["postgresql", "mysql"], indirect=True)


def _connect(url: str) -> Any:
    """The application's own connection to the queue's database, not in autocommit."""
    if url.startswith("mysql"):
        import pymysql

        from conveyor.drivers.mysql.dialect import Server

        conn = pymysql.connect(**Server.from_url(url).connect_kwargs(10.0))
        conn.autocommit(False)
        return conn
    import psycopg

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema")
    conn = psycopg.connect(urlunsplit(parts._replace(query=urlencode(query))))
    conn.execute(f'SET search_path TO "{schema}"')
    conn.commit()
    return conn


@contextmanager
def held_open(url: str, work: Callable[[Any], None]) -> Iterator[threading.Event]:
    """Runs ``work`` in a transaction on a connection of its own and keeps that
    transaction open (on another thread) until the block ends; yields an event set
    while it is still open."""
    started, release, open_ = threading.Event(), threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def hold() -> None:
        conn = _connect(url)
        try:
            work(conn)
            open_.set()
            started.set()
            release.wait(120)
            open_.clear()
            conn.rollback()
        except BaseException as exc:
            failure.append(exc)
            started.set()
        finally:
            conn.close()

    thread = threading.Thread(target=hold)
    thread.start()
    started.wait(30)
    try:
        assert failure == []
        yield open_
    finally:
        release.set()
        thread.join(30)


def _lock_job(job_id: int) -> Callable[[Any], None]:
    def work(conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM conveyor_jobs WHERE id = %s FOR UPDATE", (job_id,))

    return work


def _finish(q: conveyor.Queue, n: int) -> None:
    q.enqueue_ids([{"task": "t", "queue": "a"} for _ in range(n)])
    claim = q.claim("a", limit=n)
    q.complete_many([(j.id, claim.id, None) for j in claim.jobs])


def _by_policy(q: conveyor.Queue) -> int:
    q.set_retention("completed", 0, queue="a")
    return q.prune_expired([e.job.id for e in q.expired_jobs()])


def _by_an_operator(q: conveyor.Queue) -> int:
    return q.prune(older_than=0)


@SERVERS
@pytest.mark.queue_kinds("queue")
@pytest.mark.parametrize("prune", [_by_policy, _by_an_operator], ids=["policy", "operator"])
def test_pruning_goes_on_while_another_transaction_holds_a_job(
    q: conveyor.Queue, db_url: str, prune: Callable[[conveyor.Queue], int]
) -> None:
    _finish(q, 5)
    held = q.enqueue("t", queue="a")
    with held_open(db_url, _lock_job(held.id)) as still_open:
        removed = prune(q)
        assert still_open.is_set()  # done while the other transaction held its job
    assert removed == 5
    assert q.stats(queue="a").completed == 0 and q.get(held.id) is not None


@SERVERS
@pytest.mark.queue_kinds("queue")
def test_folding_goes_on_while_another_transaction_has_written_a_job(
    q: conveyor.Queue, db_url: str
) -> None:
    _finish(q, 5)

    def write_a_job(conn: Any) -> None:
        if hasattr(conn, "begin"):
            conn.begin()  # PyMySQL
        with conn.cursor() as cur:
            cur.execute("SELECT 1")  # the transaction is open: the job rides in it
        q.enqueue("t", queue="a", conn=conn)

    with held_open(db_url, write_a_job) as still_open:
        folded = q.fold_counts()
        assert still_open.is_set()  # done while that job's delta was uncommitted
    assert folded > 0  # the committed jobs' deltas; not the open transaction's
    assert q.stats(queue="a").completed == 5 and q.stats(queue="a").pending == 0


def test_a_sqlite_write_waits_for_another_writers_lock_then_goes_on(tmp_path: Any) -> None:
    # While another connection holds the write lock, a write (a single statement or a
    # transaction) waits for it, up to the timeout; once it is free, the write is done.
    import sqlite3

    path = f"{tmp_path}/held.db"
    q = conveyor.connect(f"sqlite:///{path}?timeout=30")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
    done: list[conveyor.Job] = []
    writers = [
        threading.Thread(target=lambda: done.append(q.enqueue("waited"))),  # one statement
        threading.Thread(target=lambda: done.append(q.claim("default").jobs[0])),  # a session
    ]
    try:
        writers[0].start()
        writers[0].join(0.3)
        assert writers[0].is_alive() and not done  # waiting for the lock
        other.execute("COMMIT")
        writers[0].join(30)
        assert [job.task for job in done] == ["waited"]
        other.execute("BEGIN IMMEDIATE")
        writers[1].start()
        writers[1].join(0.3)
        assert writers[1].is_alive() and len(done) == 1
        other.execute("COMMIT")
        writers[1].join(30)
        assert [job.status for job in done] == ["pending", "running"]
    finally:
        other.close()
        q.close()


def test_a_sqlite_write_that_cannot_get_the_lock_in_its_timeout_says_busy(
    tmp_path: Any,
) -> None:
    import sqlite3

    path = f"{tmp_path}/held.db"
    q = conveyor.connect(f"sqlite:///{path}?timeout=0.2")
    job = q.enqueue("first")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(conveyor.DatabaseError, match="busy"):
            q.enqueue("refused")
        with pytest.raises(conveyor.DatabaseError, match="busy"):
            q.claim("default")
    finally:
        other.close()
    assert [j.task for j in q.jobs()] == ["first"] and q.get(job.id).status == "pending"  # type: ignore[union-attr]
    q.close()
