"""What only the MySQL backend has to show: the caller's transaction on their own PyMySQL
or aiomysql connection, deadlocks broken by the server and run again, JSON kept as sent,
and wake-ups heard from other connections without LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import conveyor
import conveyor.aio
import conveyor.queue
from conveyor import InvalidArgument, Status, TransactionConflict
from conveyor.drivers.mysql.session import Counting
from tests.conftest import (
    _mysql_server,
    drop_schema,
    fresh_url,
    mysql_connection,
    require_mysqlclient,
)
from tests.core.conftest import waiting_deltas

pytestmark = pytest.mark.queue_kinds("queue")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def my_url(tmp_path: Path) -> Iterator[str]:
    url, database = fresh_url("mysql", tmp_path)
    yield url
    drop_schema(database)  # type: ignore[arg-type]


def _database(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?", 1)[0]


# The queue's own connections through either client library (``?client=``).
CLIENTS = pytest.mark.parametrize("client", ["pymysql", "mysqlclient"])


def _through(url: str, client: str, **options: Any) -> str:
    """``url`` with ``?client=`` (and ``options``) set."""
    if client == "mysqlclient":
        require_mysqlclient()
    query = "&".join(f"{k}={v}" for k, v in {"client": client, **options}.items())
    return f"{url}?{query}"


def test_enqueue_commits_and_rolls_back_with_the_callers_transaction(my_url: str) -> None:
    q = conveyor.connect(my_url)
    with mysql_connection(_database(my_url), autocommit=False) as conn:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE books (title VARCHAR(100))")
            cur.execute("INSERT INTO books VALUES ('Dune')")
        job = q.enqueue("sync", {"book": "Dune"}, key="dune", conn=conn)
        assert q.get(job.id) is None  # the queue's own connections cannot see it yet
        conn.rollback()  # the application changed its mind: so does the queue
        assert q.get(job.id) is None and q.stats().total == 0
        with conn.cursor() as cur:
            cur.execute("INSERT INTO books VALUES ('Emma')")
        kept = q.enqueue("sync", {"book": "Emma"}, key="emma", conn=conn)
        many = q.enqueue_many([{"task": "a"}, {"task": "b", "payload": [1]}], conn=conn)
        conn.commit()
        with conn.cursor() as cur:
            cur.execute("SELECT title FROM books")
            assert cur.fetchall() == (("Emma",),)
    assert q.get(kept.id) == kept and [q.get(j.id) for j in many] == many
    assert q.stats().pending == 3
    # A key already active, inside the caller's transaction: their transaction goes on.
    with mysql_connection(_database(my_url), autocommit=False) as conn:
        again = q.enqueue("sync", key="emma", conn=conn)
        assert again.id == kept.id and again.deduplicated
        other = q.enqueue("sync", key="other", conn=conn)
        conn.commit()
    assert q.get(other.id) is not None
    with pytest.raises(InvalidArgument, match="PyMySQL or mysqlclient"):
        q.enqueue("sync", conn=object())
    q.close()


def _mysqlclient(database: str, *, autocommit: bool) -> Any:
    """A mysqlclient (``MySQLdb``) connection, as Django's MySQL engine opens them."""
    mysqldb = pytest.importorskip("MySQLdb")
    options = _mysql_server()
    conn = mysqldb.connect(
        host=options["host"], port=options["port"], user=options["user"],
        password=options.get("password") or "", database=database, charset="utf8mb4",
    )  # fmt: skip
    conn.autocommit(autocommit)
    return conn


def test_a_mysqlclient_connection_joins_the_callers_transaction(my_url: str) -> None:
    payload = {"text": "é 😀 ' \" \\ %s :name", "n": [1, 2.5, None]}
    with conveyor.connect(my_url) as q:
        conn = _mysqlclient(_database(my_url), autocommit=False)
        try:
            cur = conn.cursor()
            cur.execute("CREATE TABLE books (title VARCHAR(100))")
            cur.execute("INSERT INTO books VALUES ('Dune')")
            job = q.enqueue("sync", payload, key="dune", conn=conn)
            assert q.get(job.id) is None  # not committed yet
            conn.rollback()
            assert q.get(job.id) is None and q.stats().total == 0
            cur.execute("INSERT INTO books VALUES ('Emma')")
            kept = q.enqueue("sync", payload, key="emma", conn=conn)
            many = q.enqueue_many([{"task": "a"}, {"task": "b", "after": [kept.id]}], conn=conn)
            # An active key inside the transaction (the server's duplicate-key error, as
            # mysqlclient raises it, is conveyor's): a duplicate answered, theirs goes on.
            again = q.enqueue("sync", key="emma", conn=conn)
            assert again.id == kept.id and again.deduplicated
            with pytest.raises(conveyor.DuplicateJob):
                q.enqueue("sync", key="emma", on_active="raise", conn=conn)
            conn.commit()
            cur.execute("SELECT title FROM books")
            assert cur.fetchall() == (("Emma",),)
        finally:
            conn.close()
        assert q.get(kept.id) == kept and [q.get(j.id) for j in many] == many
        assert q.get(kept.id).payload == payload  # type: ignore[union-attr]
        assert q.stats().pending == 3
        # Autocommit (Django outside transaction.atomic()): a transaction of its own.
        conn = _mysqlclient(_database(my_url), autocommit=True)
        try:
            child = q.enqueue("child", after=[kept.id], conn=conn)
        finally:
            conn.close()
        assert q.get(child.id) == child and child.waiting_for == 1


def test_an_autocommit_connection_gets_a_transaction_of_its_own(my_url: str) -> None:
    q = conveyor.connect(my_url)
    first = q.enqueue("parent")
    with mysql_connection(_database(my_url), autocommit=True) as conn:
        # Several statements (the job, its dependency's mark, its edges) commit as one.
        job = q.enqueue("child", after=[first.id], conn=conn)
    assert q.get(job.id) == job and job.waiting_for == 1
    q.close()


@CLIENTS
def test_json_is_kept_as_sent(my_url: str, client: str) -> None:
    payload = {
        "zeta": 1,
        "alpha": [2**70, -(2**63), 0.1, 1e300, 1.5e-300, True, None],
        "text": "é 😀 \u2028 ' \" \\ %s :name",
        "nested": {"b": {}, "a": []},
    }
    with conveyor.connect(_through(my_url, client)) as q:
        job = q.enqueue("t", payload)
        got = q.get(job.id)
        assert got is not None and got.payload == payload
        assert json.dumps(got.payload) == json.dumps(payload)  # key order too
        claim = q.claim()
        done = q.complete(job.id, claim.id, payload)
        assert json.dumps(q.get(done.id).result) == json.dumps(payload)  # type: ignore[union-attr]


@CLIENTS
def test_times_read_back_as_the_server_stores_them(my_url: str, client: str) -> None:
    """The queue reads DATETIME(6) with a parser of its own: every time of a job is the
    server's value, in UTC, at the millisecond the other databases keep, whether or not
    the instant has a fraction, sync and async alike, through either client library (the
    async backend, always on aiomysql, takes the same URL)."""
    url = _through(my_url, client)
    with conveyor.connect(url) as q:
        job = q.enqueue("t", {}, run_at=datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc))
        exact = q.enqueue("t", {}, run_at=datetime(2026, 3, 4, 5, 6, 7, 891234, timezone.utc))
        claim = q.claim(limit=1, lease=60)
        with mysql_connection(_database(my_url)) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT id, created_at, run_at FROM conveyor_jobs WHERE id IN (%s, %s)",
                (job.id, exact.id),
            )
            stored = {row[0]: row[1:] for row in cur.fetchall()}
        for got in (q.get(job.id), q.get(exact.id)):
            assert got is not None
            created, run_at = stored[got.id]
            assert got.created_at == created.replace(
                microsecond=created.microsecond // 1000 * 1000, tzinfo=timezone.utc
            )
            assert got.run_at == run_at.replace(
                microsecond=run_at.microsecond // 1000 * 1000, tzinfo=timezone.utc
            )
        assert q.get(exact.id).run_at.microsecond == 891000  # type: ignore[union-attr]
        claimed = claim.jobs[0]
        with mysql_connection(_database(my_url)) as conn, conn.cursor() as cur:
            cur.execute("SELECT claimed_at FROM conveyor_jobs WHERE id = %s", (claimed.id,))
            (claimed_at,) = cur.fetchone()
        assert claimed.claimed_at == claimed_at.replace(
            microsecond=claimed_at.microsecond // 1000 * 1000, tzinfo=timezone.utc
        )

    async def read_async() -> datetime | None:
        async with await conveyor.aio.connect(url) as aq:
            got = await aq.get(exact.id)
            return None if got is None else got.run_at

    assert asyncio.run(read_async()) == datetime(2026, 3, 4, 5, 6, 7, 891000, timezone.utc)


def _lock_rows_after_changing_many(url: str, ids: list[int]) -> Any:
    """A connection whose open transaction wrote many rows elsewhere (so the server sees
    it as the larger one, and picks the other to roll back) and locks the jobs ``ids``."""
    with mysql_connection(_database(url)) as admin, admin.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS scratch (n INT)")
    conn = mysql_connection(_database(url), autocommit=False)
    with conn.cursor() as cur:
        cur.execute("SET SESSION innodb_lock_wait_timeout = 20")
        cur.execute("INSERT INTO scratch VALUES " + ",".join(f"({n})" for n in range(50)))
        for job_id in ids:
            cur.execute("SELECT id FROM conveyor_jobs WHERE id = %s FOR UPDATE", (job_id,))
    return conn


def _wait_until_blocked(url: str) -> None:
    """Until a transaction on the test's database waits for a row lock."""
    with mysql_connection() as admin, admin.cursor() as cur:
        for _ in range(200):
            cur.execute(
                "SELECT count(*) FROM information_schema.innodb_trx AS t"
                " JOIN information_schema.processlist AS p ON p.id = t.trx_mysql_thread_id"
                " WHERE t.trx_state = 'LOCK WAIT' AND p.db = %s",
                (_database(url),),
            )
            if cur.fetchone()[0]:
                return
            time.sleep(0.02)
    raise AssertionError("no transaction ever waited for a lock")


@CLIENTS
def test_a_deadlock_runs_the_queues_own_transaction_again(
    my_url: str, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = conveyor.connect(_through(my_url, client))
    a, b = q.enqueue("t"), q.enqueue("t")
    claim = q.claim(limit=2)
    assert {j.id for j in claim.jobs} == {a.id, b.id}
    pauses: list[float] = []
    pause = conveyor.queue.conflict_pause
    monkeypatch.setattr(conveyor.queue, "conflict_pause", lambda n: pauses.append(n) or pause(n))

    other = _lock_rows_after_changing_many(my_url, [b.id])
    result: list[Any] = []
    try:
        _deadlock_a_failing_batch(q, other, a.id, b.id, claim.id, result)
    finally:
        other.close()
    assert pauses == [0]  # one conflict, run again once
    assert sorted(j.id for j in result[0]) == [a.id, b.id]
    assert all(j.status == Status.FAILED for j in result[0])
    assert q.stats(queue="default").failed == 2
    q.close()


def _deadlock_a_failing_batch(
    q: conveyor.Queue, other: Any, a: int, b: int, claim: str, result: list[Any]
) -> None:
    """``other`` holds b; the queue's transaction locks a and waits for b; ``other``
    asks for a."""
    batch = [(a, claim, "boom", False, None), (b, claim, "boom", False, None)]
    # One transaction of the queue's: it locks a, then waits for b.
    failing = threading.Thread(target=lambda: result.append(q.fail_many(batch)))
    failing.start()
    _wait_until_blocked(q.url)
    with other.cursor() as cur:  # ... while the other one wants a: a deadlock
        cur.execute("SELECT id FROM conveyor_jobs WHERE id = %s FOR UPDATE", (a,))
    other.commit()  # the server rolled the queue's transaction back, not this one
    failing.join(timeout=30)


def test_a_deadlock_in_the_callers_transaction_is_theirs_to_handle(my_url: str) -> None:
    q = conveyor.connect(my_url)
    a, b = q.enqueue("t", key="a"), q.enqueue("t", key="b")
    other = _lock_rows_after_changing_many(my_url, [a.id])
    raised: list[BaseException] = []
    try:
        with mysql_connection(_database(my_url), autocommit=False) as app:
            assert q.complete_by_key("b", conn=app) == 1  # the application holds b ...

            def complete_a() -> None:
                try:
                    q.complete_by_key("a", conn=app)  # ... and waits for a
                except BaseException as exc:
                    raised.append(exc)

            waiting = threading.Thread(target=complete_a)
            waiting.start()
            _wait_until_blocked(my_url)
            with other.cursor() as cur:  # the other transaction wants b: a deadlock
                cur.execute("SELECT id FROM conveyor_jobs WHERE id = %s FOR UPDATE", (b.id,))
            waiting.join(timeout=30)
    finally:
        other.rollback()
        other.close()
    assert len(raised) == 1 and isinstance(raised[0], TransactionConflict)
    assert isinstance(raised[0], conveyor.DatabaseError)
    assert "deadlock" in str(raised[0]).lower()
    # Not run again: the whole of the application's transaction was rolled back.
    assert q.get(a.id).status == q.get(b.id).status == Status.PENDING  # type: ignore[union-attr]
    q.close()


def test_waiters_hear_other_connections_commits(my_url: str) -> None:
    """No LISTEN/NOTIFY: the watch of the count deltas wakes a waiter for another
    connection's commit, long before its poll interval."""
    waiter = conveyor.connect(my_url)
    other = conveyor.connect(my_url)
    job = waiter.enqueue("t")

    def finish() -> None:
        time.sleep(0.3)
        claim = other.claim()
        other.complete(job.id, claim.id)

    finishing = threading.Thread(target=finish)
    finishing.start()
    started = time.monotonic()
    done = waiter.wait(job.id, timeout=30, poll=20.0)  # polling alone would take 20 s
    took = time.monotonic() - started
    finishing.join()
    assert done.status == Status.COMPLETED
    print(f"woken {took - 0.3:.3f}s after the other connection's commit")
    assert took < 20.0
    other.close()
    waiter.close()


def test_async_enqueue_joins_the_callers_aiomysql_transaction(my_url: str) -> None:
    import aiomysql

    from tests.conftest import _mysql_server

    async def scenario() -> None:
        q = await conveyor.aio.connect(my_url)
        options = {**_mysql_server(), "db": _database(my_url), "autocommit": False}
        options.pop("connect_timeout")
        conn = await aiomysql.connect(**options)
        job = await q.enqueue("sync", {"book": "Dune"}, conn=conn)
        assert await q.get(job.id) is None
        await conn.rollback()
        assert await q.get(job.id) is None
        kept = await q.enqueue("sync", {"book": "Emma"}, conn=conn)
        await conn.commit()
        assert await q.get(kept.id) == kept
        conn.close()
        with pytest.raises(InvalidArgument, match="aiomysql Connection"):
            await q.enqueue("sync", conn=object())
        await q.close()

    asyncio.run(scenario())


@CLIENTS
def test_connections_the_server_dropped_are_replaced(my_url: str, client: str) -> None:
    q = conveyor.connect(_through(my_url, client, pool_max=4))
    first = q.enqueue("t")
    _kill_connections_of(my_url)
    # The next operation runs on a fresh connection, as after a server restart.
    assert q.get(first.id) == first
    assert q.enqueue("t").id > first.id
    q.close()


@CLIENTS
def test_an_enqueue_right_after_the_server_dropped_its_connections_is_written_once(
    my_url: str, client: str
) -> None:
    """On MariaDB a single enqueue is one autocommitted statement, without the BEGIN that
    finds a dropped connection before anything runs on it: a connection the server
    closed is found by its socket instead, and replaced, so the enqueue is written once,
    every time; a server that is gone is still an error of conveyor's."""
    q = conveyor.connect(_through(my_url, client, pool_max=4))
    ids = [q.enqueue("t").id]
    for _ in range(3):
        _kill_connections_of(my_url)
        time.sleep(0.05)  # the server's closing reaches the client's sockets
        ids.append(q.enqueue("t").id)
    assert len(set(ids)) == 4
    assert q.stats().pending == 4
    assert sorted(job.id for job in q.jobs(limit=10)) == sorted(ids)
    q.close()


def test_an_async_enqueue_right_after_the_server_dropped_its_connections_is_written_once(
    my_url: str,
) -> None:
    async def enqueue_around_kills() -> list[int]:
        async with await conveyor.aio.connect(f"{my_url}?pool_max=4") as aq:
            ids = [(await aq.enqueue("t")).id]
            for _ in range(3):
                _kill_connections_of(my_url)
                # Not asyncio.sleep: the event loop must not see the streams end first
                # (the pool drops those itself); the sockets alone must tell.
                time.sleep(0.05)
                ids.append((await aq.enqueue("t")).id)
            return ids

    ids = asyncio.run(enqueue_around_kills())
    assert len(set(ids)) == 4
    with conveyor.connect(my_url) as q:
        assert sorted(job.id for job in q.jobs(limit=10)) == sorted(ids)


def _kill_connections_of(url: str) -> None:
    with mysql_connection() as admin, admin.cursor() as cur:
        cur.execute(
            "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
            (_database(url),),
        )
        for (connection,) in cur.fetchall():
            cur.execute(f"KILL {int(connection)}")


@pytest.mark.parametrize("consecutive", [True, False])
def test_a_workflows_ids_are_reserved_without_rows_left_behind(
    my_url: str, consecutive: bool
) -> None:
    q = conveyor.connect(my_url)
    try:
        # Under innodb_autoinc_lock_mode 2 one INSERT's ids may interleave with
        # another's: the ids are then taken one row at a time.
        q.driver.consecutive_ids = consecutive  # type: ignore[attr-defined]
        before = q.enqueue("first")
        wf = conveyor.Workflow("ids")
        head = wf.add("a")
        for n in range(4):
            wf.add("b", n=n, after=[head])
        run = q.enqueue_workflow(wf)
        ids = [job.id for job in run.jobs.values()]
        assert ids == sorted(ids) and len(set(ids)) == 5 and ids[0] > before.id
        after = q.enqueue("last")
        assert after.id > ids[-1]
        # The placeholders that took the ids were rolled back: no job, no count.
        assert {j.id for j in q.jobs(limit=100)} == {before.id, after.id, *ids}
        assert q.stats().pending == 7 and q.stats().cancelled == 0
        assert list(q.get(ids[1]).depends_on) == [ids[0]]
    finally:
        q.close()


def _counted(q: conveyor.Queue) -> tuple[int, int, int]:
    stats = q.task_stats("q")["t"]
    return stats.pending, stats.running, stats.completed


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_counts_are_written_once_before_and_after_the_row_trigger_went(
    my_url: str, asynchronous: bool
) -> None:
    """Up to migration 14 a row trigger counts each change of state; from 15 on each
    statement writes its own counts. A queue opened on a schema of either kind counts
    every change once, whichever it is (a queue opened with migrate=False)."""

    def drain_one(q: conveyor.Queue, url: str) -> None:
        q.enqueue("t", queue="q")
        if asynchronous:

            async def claim_and_complete() -> None:
                async with await conveyor.aio.connect(url, migrate=False) as aq:
                    job = (await aq.claim("q")).jobs[0]
                    await aq.complete(job.id, job.claim_id)

            asyncio.run(claim_and_complete())
        else:
            with conveyor.connect(url, migrate=False) as other:
                job = other.claim("q").jobs[0]
                other.complete(job.id, job.claim_id)

    with conveyor.connect(my_url, migrate=False) as q:
        q.migrate(target=Counting.STATEMENTS - 1)
        q.enqueue("t", queue="q")
        drain_one(q, my_url)
        assert _counted(q) == (1, 0, 1)
    with conveyor.connect(my_url) as q:  # migrated to the latest
        assert q.driver.schema_version() >= Counting.STATEMENTS
        drain_one(q, my_url)
        assert _counted(q) == (1, 0, 2)
        job = q.claim("q").jobs[0]
        assert _counted(q) == (0, 1, 2)
        q.complete(job.id, job.claim_id)
        assert _counted(q) == (0, 0, 3)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_bulk_insert_counts_its_jobs_once_before_and_after_the_insert_trigger_changed(
    my_url: str, asynchronous: bool
) -> None:
    """Up to migration 16 the insert trigger counts each job of a bulk insert; from 17
    on the bulk insert writes one delta per queue and task, and the trigger skips its
    jobs. A queue that connected before the migration (migrate=False) goes on counting
    right after another process migrated, and a single enqueue is still counted by the
    trigger after a bulk insert on the same connection."""

    def load(url: str, n: int) -> None:
        items = [{"task": "t", "queue": "q"}] * n
        if asynchronous:

            async def enqueue() -> None:
                async with await conveyor.aio.connect(url, migrate=False) as aq:
                    await aq.enqueue_ids(items)
                    await aq.enqueue("t", queue="q")

            asyncio.run(enqueue())
        else:
            with conveyor.connect(url, migrate=False) as other:
                other.enqueue_ids(items)
                other.enqueue("t", queue="q")

    with conveyor.connect(my_url, migrate=False) as old:
        old.migrate(target=Counting.BULK_INSERTS - 1)
        old.fold_counts()
        load(my_url, 50)
        assert _counted(old) == (51, 0, 0)
        assert waiting_deltas(old) == 51  # a delta row per job
        old.fold_counts()
        with conveyor.connect(my_url) as new:  # migrated to the latest
            assert new.driver.schema_version() >= Counting.BULK_INSERTS
            # Connected at 16: its own bulk insert is counted by the new trigger.
            old.enqueue_ids([{"task": "t", "queue": "q"}] * 10)
            assert _counted(new) == (61, 0, 0) and waiting_deltas(new) == 10
            new.fold_counts()
            load(my_url, 50)
            assert _counted(new) == (112, 0, 0)
            assert waiting_deltas(new) == 2  # one for the 50, one for the single enqueue
            jobs = new.enqueue_many([{"task": "t", "queue": "q"}, {"task": "u", "queue": "q"}])
            assert [j.task for j in jobs] == ["t", "u"]
            assert new.task_stats("q")["u"].pending == 1 and _counted(new) == (113, 0, 0)
            assert new.stats(queue="q").pending == 114


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_delete_counts_its_jobs_once_before_and_after_the_delete_trigger_changed(
    my_url: str, asynchronous: bool
) -> None:
    """Up to migration 17 the delete trigger counts each job deleted; from 18 on a
    delete writes one delta per queue, status and task, and the trigger skips its rows.
    A queue that connected before the migration goes on counting its deletes right
    after another process migrated."""

    def cancelled(q: conveyor.Queue, n: int) -> list[int]:
        ids = q.enqueue_ids([{"task": "t", "queue": "q"}] * n)
        for i in ids:
            q.cancel(i)
        q.fold_counts()
        return ids

    def prune(url: str) -> int:
        if asynchronous:

            async def go() -> int:
                async with await conveyor.aio.connect(url, migrate=False) as aq:
                    return await aq.prune(older_than=0, statuses=["cancelled"])

            return asyncio.run(go())
        with conveyor.connect(url, migrate=False) as other:
            return other.prune(older_than=0, statuses=["cancelled"])

    def cancelled_count(q: conveyor.Queue) -> int:
        stats = q.task_stats("q").get("t")  # a task without jobs is left out
        return 0 if stats is None else stats.cancelled

    with conveyor.connect(my_url, migrate=False) as old:
        old.migrate(target=Counting.DELETES - 1)
        cancelled(old, 20)
        assert prune(my_url) == 20
        assert waiting_deltas(old) == 20  # a delta row per job
        assert cancelled_count(old) == 0
        with conveyor.connect(my_url) as new:  # migrated to the latest
            assert new.driver.schema_version() >= Counting.DELETES
            # Connected at 17: its own deletes are counted by the new trigger.
            one = cancelled(new, 3)[0]
            old.delete_job(one)
            assert waiting_deltas(new) == 1 and cancelled_count(new) == 2
            assert old.prune(older_than=0, statuses=["cancelled"]) == 2
            assert waiting_deltas(new) == 3 and cancelled_count(new) == 0
            new.fold_counts()
            ids = cancelled(new, 30)
            new.delete_job(ids[0])
            assert waiting_deltas(new) == 1 and cancelled_count(new) == 29
            new.fold_counts()
            assert prune(my_url) == 29
            assert waiting_deltas(new) == 1  # one row for the batch
            assert cancelled_count(new) == 0


def test_an_unknown_client_library_is_refused(my_url: str) -> None:
    with pytest.raises(conveyor.ConfigurationError, match="client: expected pymysql or"):
        conveyor.connect(my_url + "?client=libmysql")


def test_mysqlclient_asked_for_but_not_installed_says_how_to_get_it(
    my_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MySQLdb", "MySQLdb.converters", "MySQLdb.cursors"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails
    with pytest.raises(conveyor.ConfigurationError, match=r"conveyor\[mysqlclient\]"):
        conveyor.connect(_through(my_url, "pymysql").replace("pymysql", "mysqlclient"))


def test_mysqlclient_refusals_are_conveyors_errors(my_url: str) -> None:
    """The server's errors through mysqlclient are the typed errors PyMySQL's give:
    an active key, a value out of range, a server that does not answer (its password
    in no message)."""
    with conveyor.connect(_through(my_url, "mysqlclient")) as q:
        assert q.driver.describe().endswith("?client=mysqlclient")
        q.enqueue("t", key="k")
        with pytest.raises(conveyor.DuplicateJob):
            q.enqueue("t", key="k", on_active="raise")
        with pytest.raises(InvalidArgument):
            q.enqueue("t", priority=2**40)
        assert q.stats().pending == 1
    down = my_url.replace("@", ":sekret@", 1).replace(":3306/", ":1/")
    with pytest.raises(conveyor.DatabaseUnavailable) as raised:
        conveyor.connect(_through(down, "mysqlclient", connect_timeout=2))
    assert "sekret" not in str(raised.value)


def _claimers(url: str, n: int, mode: str, batch: str) -> list[subprocess.Popen[str]]:
    command = [sys.executable, "-m", "tests.core._procs", mode, url, batch]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return [subprocess.Popen(command, cwd=ROOT, text=True, **pipes) for _ in range(n)]


def test_processes_through_mysqlclient_claim_each_job_once_and_a_kill_leaves_whole_claims(
    my_url: str,
) -> None:
    url = _through(my_url, "mysqlclient")
    with conveyor.connect(url) as q:
        jobs = q.enqueue_many([{"task": "t", "payload": {"n": i}} for i in range(3000)])
        claimed: Counter[int] = Counter()
        for proc in _claimers(url, 4, "claim", "50"):
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err
            claimed.update(i for line in out.splitlines() for i in json.loads(line)["claimed"])
        assert set(claimed) == {j.id for j in jobs} and max(claimed.values()) == 1
        assert q.stats().completed == 3000

        q.enqueue_many([{"task": "t"} for _ in range(20_000)])
        (proc,) = _claimers(url, 1, "claim-forever", "250")
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        running: list[conveyor.Job] = []
        while page := q.jobs(status="running", limit=5000, after=running[-1].id if running else 0):
            running.extend(page)
        per_claim = Counter(j.claim_id for j in running)
        assert all(n == 250 for n in per_claim.values()), per_claim
        assert all(j.attempts == 1 and j.worker for j in running)
        stats = q.stats()
        assert stats.running == len(running) and stats.pending + stats.running == 20_000


class _Steps:
    """What a handler asks of a session, answered as a server would."""

    def __init__(self, *, returning_inserts: bool) -> None:
        self.returning_inserts = returning_inserts
        self.consecutive_ids = True
        self.counts_moves = True
        self.counts_bulk_inserts = True
        self.packed_rows = returning_inserts  # as on MariaDB through PyMySQL


def _steps_of_one_enqueue(session: _Steps) -> list[str]:
    from conveyor.drivers.mysql.handlers import Insert, Rows, insert_job

    asked, answer, result = [], None, None
    steps = insert_job(session, {"queue": "q"})  # type: ignore[arg-type]
    while result is None:
        try:
            step = steps.send(answer)
        except StopIteration as done:
            result = done.value
            break
        assert isinstance(step, Insert | Rows)
        asked.append(step.name)
        answer = (7, 1) if isinstance(step, Insert) else [{"id": 7}]
    assert result == [{"id": 7}]
    return asked


def test_one_enqueue_is_one_statement_on_mariadb_and_two_on_mysql(my_url: str) -> None:
    """MariaDB's INSERT … RETURNING gives the new job's id and times: no SELECT after it."""
    assert _steps_of_one_enqueue(_Steps(returning_inserts=True)) == ["insert_job_returning"]
    assert _steps_of_one_enqueue(_Steps(returning_inserts=False)) == [
        "insert_job",
        "inserted_jobs",
    ]
    with conveyor.connect(my_url) as q:
        with q.driver.session() as session:
            assert session.returning_inserts is q.driver.mariadb  # type: ignore[attr-defined]
        job = q.enqueue("t", key="k", payload={"n": 1})
        assert q.enqueue("t", key="k").id == job.id  # the key's conflict: the same job
        assert q.get(job.id) == job


@CLIENTS
def test_claimed_jobs_read_as_every_other_read_of_them(my_url: str, client: str) -> None:
    """A claim's jobs are read back packed (one JSON array per row) on MariaDB and column
    by column on MySQL: every field reads as ``get`` reads it, text of any kind, the
    attempts' errors, progress and a checkpoint included, and JSON kept as sent."""
    text = 'é 😀 \u2028 \x01 \' " \\ \n %s :name [1, "x"]'
    name = 'é 😀 \' " \\ %s :name [1, "x"]'  # keys and groups refuse control characters
    payload = {"zeta": [2**70, 0.1, 1e300, None], "text": text, "nested": {"b": {}, "a": []}}
    with conveyor.connect(_through(my_url, client)) as q:
        job = q.enqueue("t", payload, key=name, group=name, max_attempts=3)
        first = q.claim(lease=60).jobs[0]
        assert first == q.get(job.id)
        assert json.dumps(first.payload) == json.dumps(payload)  # key order too
        q.progress(job.id, first.claim_id or "", total=3, completed=1, current=text,
                   checkpoint={"page": 2**70, "text": text}, detail=[text])  # fmt: skip
        q.fail(job.id, first.claim_id or "", f"{text} failed", delay=0)
        again = q.claim(lease=60).jobs[0]
        assert again == q.get(job.id)
        assert again.attempts == 2 and again.errors[0].error == f"{text} failed"
        assert again.progress.checkpoint == {"page": 2**70, "text": text}
        assert again.group == again.key == name


@CLIENTS
def test_whole_jobs_are_read_packed_on_mariadb_through_pymysql_only(
    my_url: str, client: str
) -> None:
    with conveyor.connect(_through(my_url, client)) as q, q.driver.session() as session:
        mariadb = q.driver.mariadb  # type: ignore[attr-defined]
        assert session.packed_rows is (mariadb and client == "pymysql")  # type: ignore[attr-defined]


def test_a_job_too_large_to_pack_is_read_column_by_column() -> None:
    """The server answers NULL for a packed row larger than its ``max_allowed_packet``:
    the read is made again, column by column, and its rows are the answer."""
    from conveyor.drivers.mysql.handlers import PACKED_JOB, Rows, read_jobs

    session = _Steps(returning_inserts=True)
    assert session.packed_rows
    steps = read_jobs(session, (1, 2))  # type: ignore[arg-type]
    assert next(steps) == Rows("jobs_locked", {"locked": (1, 2)})
    whole = [{"id": 1}, {"id": 2}]
    assert steps.send([{PACKED_JOB: "[1]"}, {PACKED_JOB: None}]) == Rows(
        "jobs_locked_columns", {"locked": (1, 2)}
    )
    with pytest.raises(StopIteration) as answer:
        steps.send(whole)
    assert answer.value.value == whole
