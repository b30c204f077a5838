"""A database that turns read-only while the queue is open: writes are refused with
``StorageReadOnly`` (HTTP 503 ``storage_read_only`` with ``Retry-After``), reads go on,
and writes go through again once the database accepts them. PostgreSQL and MariaDB on
servers of the test's own (``default_transaction_read_only``, ``read_only``); SQLite
through a connection that may only read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

import conveyor
from tests.faults.restart import ServeProcess
from tests.faults.servers import ThrowawayMariaDB, ThrowawayPostgres
from tests.worker.procs import wait_for

TASK = "ro.work"


def _enqueued(q: conveyor.Queue) -> bool:
    try:
        q.enqueue(TASK, {"n": 1})
    except conveyor.StorageReadOnly:
        return False
    return True


def _accepted(base: str) -> bool:
    answer = httpx.post(f"{base}/api/jobs", json={"task": TASK}, timeout=30)
    return answer.status_code == 201


def _turns_read_only_and_back(
    url: str, tmp_path: Path, read_only: object, writable: object
) -> None:
    q = conveyor.connect(url)
    serve = ServeProcess(url, tmp_path)
    try:
        assert serve.ready()
        before = [q.enqueue(TASK, {"n": n}).id for n in range(5)]
        assert _accepted(serve.base)
        read_only()  # type: ignore[operator]

        # Pooled connections opened before the change are refused too.
        with pytest.raises(conveyor.StorageReadOnly):
            for _ in range(20):  # as many as the pool may hold
                q.enqueue(TASK, {"n": -1})
        answer = httpx.post(f"{serve.base}/api/jobs", json={"task": TASK}, timeout=30)
        for _ in range(20):
            if answer.status_code != 201:
                break
            answer = httpx.post(f"{serve.base}/api/jobs", json={"task": TASK}, timeout=30)
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "storage_read_only"
        assert answer.headers["Retry-After"] == "5"
        # Reads go on, and every job acknowledged before is there.
        assert all(q.get(job_id) is not None for job_id in before)
        assert httpx.get(f"{serve.base}/api/jobs", timeout=30).status_code == 200

        writable()  # type: ignore[operator]
        assert wait_for(lambda: _enqueued(q), 30, every=0.2)
        assert wait_for(lambda: _accepted(serve.base), 30, every=0.2)
    finally:
        serve.stop()
        q.close()
    assert "Traceback" not in serve.log()


@pytest.mark.slow
def test_postgresql_turned_read_only_refuses_writes_then_recovers(
    own_postgres: ThrowawayPostgres, tmp_path: Path
) -> None:
    _turns_read_only_and_back(
        own_postgres.url,
        tmp_path,
        lambda: own_postgres.set("default_transaction_read_only", "on"),
        lambda: own_postgres.set("default_transaction_read_only", "off"),
    )


@pytest.mark.slow
def test_mariadb_turned_read_only_refuses_writes_then_recovers(
    own_mariadb: ThrowawayMariaDB, tmp_path: Path
) -> None:
    # read_only binds users without the READ ONLY ADMIN privilege: not root.
    url = own_mariadb.add_user("conveyor_app")
    _turns_read_only_and_back(
        url,
        tmp_path,
        lambda: own_mariadb.set("read_only", "1"),
        lambda: own_mariadb.set("read_only", "0"),
    )


def test_sqlite_read_only_connection_refuses_writes_with_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = conveyor.connect(f"sqlite:///{path}")
    kept = q.enqueue(TASK, {"n": 1})
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    with pytest.raises(conveyor.StorageReadOnly, match="read-only"):
        q.enqueue(TASK, {"n": 2}, conn=reader)
    reader.close()
    assert q.get(kept.id) is not None and q.stats().pending == 1
    q.close()
