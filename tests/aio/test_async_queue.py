"""What only the asynchronous queue can show (the conformance suite in tests/core runs
every contract test against it too): SQLite work never blocks the event loop, and a job
enqueued with the caller's own connection commits or rolls back with their transaction."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

import conveyor
import conveyor.aio
from conveyor.errors import InvalidArgument
from tests.conftest import PG_URL, drop_schema, fresh_url

HOLD = 3.0
_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def test_sqlite_work_waits_for_the_file_off_the_loop(tmp_path: Path) -> None:
    """While another process holds the write lock for 3 s, an enqueue waits for it and
    the loop goes on: a ticker wakes every 10 ms throughout."""
    path = tmp_path / "q.db"

    async def scenario() -> tuple[conveyor.Job, float, int, subprocess.Popen[str]]:
        q = await conveyor.aio.connect(f"sqlite:///{path}")
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(path), str(HOLD)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        loop = asyncio.get_running_loop()
        worst, ticks = 0.0, 0

        async def ticker() -> None:
            nonlocal worst, ticks
            while True:
                start = loop.time()
                await asyncio.sleep(0.01)
                worst = max(worst, loop.time() - start - 0.01)
                ticks += 1

        ticking = asyncio.create_task(ticker())
        job = await q.enqueue("t", {"n": 1})
        ticking.cancel()
        await q.close()
        return job, worst, ticks, holder

    job, worst_lag, ticks, holder = asyncio.run(scenario())
    assert holder.wait(10) == 0
    assert job.status == "pending"
    assert ticks > 10  # the loop ran while the enqueue waited for the lock
    assert worst_lag < 1.0  # never the 3 s the lock was held: it never waited for it


def test_sqlite_enqueue_joins_the_callers_connection(tmp_path: Path) -> None:
    path = tmp_path / "app.db"

    async def scenario() -> None:
        q = await conveyor.aio.connect(f"sqlite:///{path}")
        # The queue works on one of its threads: the connection must allow that.
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("CREATE TABLE books (title TEXT)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO books VALUES ('Dune')")
        await q.enqueue("sync", {"book": "Dune"}, conn=conn)
        conn.execute("ROLLBACK")
        assert (await q.stats()).total == 0
        conn.execute("BEGIN")
        job = await q.enqueue("sync", {"book": "Emma"}, conn=conn)
        assert await q.get(job.id) is None  # not committed yet
        conn.execute("COMMIT")
        assert (await q.get(job.id)) is not None
        conn.close()
        await q.close()

    asyncio.run(scenario())


@pytest.fixture
def pg_url(tmp_path: Path) -> object:
    url, schema = fresh_url("postgresql", tmp_path)
    yield url
    drop_schema(schema)  # type: ignore[arg-type]


def test_postgresql_enqueue_joins_the_callers_async_transaction(pg_url: str) -> None:
    async def scenario() -> None:
        q = await conveyor.aio.connect(pg_url)
        async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
            await conn.execute("CREATE TEMP TABLE books (title text)")
            await conn.commit()
            with pytest.raises(RuntimeError):
                async with conn.transaction():
                    await conn.execute("INSERT INTO books VALUES ('Dune')")
                    await q.enqueue("sync", {"book": "Dune"}, conn=conn)
                    raise RuntimeError("the application changes its mind")
            assert (await q.stats()).total == 0
            async with conn.transaction():
                job = await q.enqueue("sync", {"book": "Emma"}, key="emma", conn=conn)
                assert await q.get(job.id) is None  # the queue's pool cannot see it yet
            assert (await q.get(job.id)) is not None
            # No transaction begun yet, no autocommit: ours begins the caller's, which
            # ends when they say (here: a rollback).
            later = await q.enqueue("sync", {"book": "Ulysses"}, conn=conn)
            await conn.rollback()
            assert await q.get(later.id) is None
        with pytest.raises(InvalidArgument, match="AsyncConnection"):
            await q.enqueue("sync", conn=object())
        await q.close()

    asyncio.run(scenario())


def test_postgresql_reads_the_callers_connection_as_its_own(pg_url: str) -> None:
    """A connection whose owner changed how values load (as Django does: jsonb as text)
    still gives jobs their JSON payload and aware times; an autocommit connection gets a
    transaction of its own for a multi-statement enqueue."""

    async def scenario() -> None:
        q = await conveyor.aio.connect(pg_url)
        async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
            conn.adapters.register_loader("jsonb", TextLoader)
            jobs = await q.enqueue_many(
                [{"task": "a", "payload": {"x": [1]}}, {"task": "b", "payload": "text"}],
                conn=conn,
            )
        assert [j.payload for j in jobs] == [{"x": [1]}, "text"]
        assert all(j.created_at.tzinfo is not None for j in jobs)
        assert (await q.stats()).pending == 2
        await q.close()

    asyncio.run(scenario())

    q = conveyor.connect(pg_url)
    with psycopg.connect(PG_URL, cursor_factory=psycopg.ClientCursor) as conn:
        conn.adapters.register_loader("jsonb", TextLoader)
        job = q.enqueue("sync", {"deep": {"a": 1}}, conn=conn)
        conn.commit()
    assert job.payload == {"deep": {"a": 1}}
    assert q.get(job.id) == job
    q.close()


def test_waiting_on_a_threaded_postgresql_queue_hears_other_processes(pg_url: str) -> None:
    """The HTTP server's long poll runs a synchronous queue's wait as a coroutine: it
    must hear another process's completion through LISTEN/NOTIFY, not only by polling."""
    sync = conveyor.connect(pg_url)
    job = sync.enqueue("t")
    other = conveyor.connect(pg_url)  # another process, as far as the listener can tell

    async def scenario() -> float:
        watcher = conveyor.aio.AsyncQueue(sync)

        async def finish() -> None:
            await asyncio.sleep(0.5)
            claim = await asyncio.to_thread(other.claim)
            await asyncio.to_thread(other.complete, job.id, claim.id)

        started = time.monotonic()
        finishing = asyncio.create_task(finish())
        done = await watcher.wait(job.id, timeout=20, poll=10.0)  # polling would take 10 s
        await finishing
        assert done.status == "completed"
        return time.monotonic() - started

    took = asyncio.run(scenario())
    assert took < 10.0  # woken by the notification, not by the 10 s poll
    other.close()
    sync.close()


@pytest.mark.parametrize("migrate", [True, False], ids=["migrating", "opening"])
def test_async_mysql_that_cannot_be_reached_is_unavailable_without_the_password(
    migrate: bool,
) -> None:
    """As the synchronous drivers and asynchronous PostgreSQL say it: nothing listens on
    the port, so the database is unavailable (worth waiting for), not a plain error —
    whether the migration's connection or the asynchronous driver's own finds it out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there

    async def scenario() -> None:
        url = f"mysql://root:hunter2@127.0.0.1:{port}/test?connect_timeout=2"
        await conveyor.aio.connect(url, migrate=migrate)

    with pytest.raises(conveyor.DatabaseUnavailable) as raised:
        asyncio.run(scenario())
    message = str(raised.value)
    assert message.startswith(f"cannot connect to MySQL at mysql://root@127.0.0.1:{port}/test")
    assert "hunter2" not in message and "Can't connect" in message


@pytest.mark.parametrize("backend_name", ["mysql"], indirect=True)
def test_async_mysql_that_refuses_the_login_is_a_database_error(db_url: str) -> None:
    """A server that answers and refuses the user is no outage: a plain DatabaseError."""
    url = db_url.replace("root@", "nobody_here:hunter2@", 1)

    async def scenario() -> None:
        await conveyor.aio.connect(url, migrate=False)

    with pytest.raises(conveyor.DatabaseError) as raised:
        asyncio.run(scenario())
    assert not isinstance(raised.value, conveyor.DatabaseUnavailable)
    assert "cannot connect to MySQL" in str(raised.value) and "hunter2" not in str(raised.value)


def test_an_enqueue_that_meets_a_transaction_conflict_is_written_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for ``Queue``: a conflict (MySQL's deadlock or lock-wait time-out) rolled the
    INSERT back, the enqueue runs again through its plan, and the job is there once."""
    calls: list[object] = []

    def first_conflicts(op: object) -> None:
        calls.append(op)
        if len(calls) == 1:
            raise conveyor.TransactionConflict("MySQL broke a deadlock by rolling back")

    async def scenario() -> tuple[conveyor.Job, list[conveyor.Job]]:
        q = await conveyor.aio.connect(db_url)
        if q._threaded is not None:  # SQLite: the synchronous queue, on a thread
            driver, real = q._threaded.driver, q._threaded.driver.write_once

            def sync_write(op: Any, **kwargs: Any) -> Any:
                first_conflicts(op)
                return real(op, **kwargs)

            monkeypatch.setattr(driver, "write_once", sync_write)
        else:
            backend = q._backend
            assert backend is not None
            real_async = backend.write_once

            async def async_write(op: Any, **kwargs: Any) -> Any:
                first_conflicts(op)
                return await real_async(op, **kwargs)

            monkeypatch.setattr(backend, "write_once", async_write)
        try:
            job = await q.enqueue("books.sync", {"n": 1}, queue="sync")
            return job, await q.jobs(queue="sync")
        finally:
            await q.close()

    job, listed = asyncio.run(scenario())
    assert len(calls) == 2 and calls[0] == calls[1]  # the same INSERT, twice
    assert [j.id for j in listed] == [job.id]
