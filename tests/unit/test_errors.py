from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from conveyor import errors
from conveyor.client import answer
from conveyor.web import envelope


def test_every_error_shares_one_root() -> None:
    for name in (
        "JobNotFound",
        "StaleClaim",
        "InvalidTransition",
        "DuplicateJob",
        "InvalidArgument",
        "ConfigurationError",
        "DatabaseError",
        "DatabaseUnavailable",
        "StorageFull",
        "StorageReadOnly",
    ):
        cls = getattr(conveyor, name)
        assert issubclass(cls, conveyor.ConveyorError)
        assert cls().message, f"{name} has no default message"
    assert issubclass(conveyor.InvalidArgument, ValueError)
    assert issubclass(conveyor.ConfigurationError, ValueError)


def test_control_exceptions_are_not_errors() -> None:
    assert not issubclass(conveyor.Retry, conveyor.ConveyorError)
    assert conveyor.Retry(delay=3).delay == 3
    assert not issubclass(conveyor.Terminal, errors.ConveyorError)


def test_status_is_a_str_enum() -> None:
    assert conveyor.Status.PENDING == "pending"
    assert conveyor.Status("failed").is_final and conveyor.Status.RUNNING.is_active


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("database_unavailable", conveyor.DatabaseUnavailable),
        ("storage_full", conveyor.StorageFull),
        ("storage_read_only", conveyor.StorageReadOnly),
    ],
)
def test_a_remote_queue_raises_the_database_fault_the_server_names(
    code: str, cls: type[conveyor.DatabaseError]
) -> None:
    """The server's 503 codes come back as the library's classes (each a DatabaseError,
    so code that catches that goes on working)."""
    body = {"error": {"code": code, "message": "the database is full; try again later"}}
    response = httpx.Response(503, json=body, headers={"Retry-After": "5"})
    with pytest.raises(cls) as raised:
        answer(response, "POST", "/api/jobs")
    assert isinstance(raised.value, conveyor.DatabaseError)
    assert raised.value.code == code


@pytest.mark.parametrize("unknown", [True, False])
def test_a_remote_queue_says_whether_a_refused_write_may_have_been_written(unknown: bool) -> None:
    error = {"code": "storage_read_only", "message": "the database accepts no writes"}
    if unknown:
        error["outcome_unknown"] = True
    response = httpx.Response(503, json={"error": error}, headers={"Retry-After": "5"})
    with pytest.raises(conveyor.StorageReadOnly) as raised:
        answer(response, "POST", "/api/jobs")
    assert raised.value.outcome_unknown is unknown


def _failing_connection(path: Path, code: int) -> sqlite3.Connection:
    """A connection whose statements fail as SQLite's do when the disk fails, with the
    extended result ``code``."""

    class Failing(sqlite3.Cursor):
        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            exc = sqlite3.OperationalError("disk I/O error")
            exc.sqlite_errorcode = code  # type: ignore[attr-defined]
            raise exc

    class Connection(sqlite3.Connection):
        def cursor(self, factory: Any = Failing) -> Any:
            return super().cursor(factory)

    return sqlite3.connect(path, factory=Connection)


@pytest.mark.parametrize(
    ("code", "unknown"),
    [(sqlite3.SQLITE_IOERR_FSYNC, True), (sqlite3.SQLITE_IOERR_WRITE, False)],
)
def test_a_sqlite_commit_whose_fsync_failed_says_it_may_have_been_written(
    tmp_path: Path, code: int, unknown: bool
) -> None:
    """A failed fsync comes after the commit's frames reached the WAL, which the next
    open recovers: the error says the write may be there. A failed write does not."""
    q = conveyor.connect(f"sqlite:///{tmp_path / 'q.db'}")
    conn = _failing_connection(tmp_path / "q.db", code)
    try:
        with pytest.raises(conveyor.DatabaseError) as raised:
            q.enqueue("t", {}, conn=conn)
        assert raised.value.outcome_unknown is unknown
        assert ("may have been written" in raised.value.message) is unknown
        assert q.stats().total == 0
    finally:
        conn.close()
        q.close()


@pytest.mark.parametrize("unknown", [True, False])
def test_the_server_says_whether_a_refused_write_may_have_been_written(unknown: bool) -> None:
    app = FastAPI()
    envelope.install(app)

    @app.post("/api/jobs")
    def refuse() -> None:
        raise conveyor.StorageReadOnly("SQLite disk I/O error", outcome_unknown=unknown)

    with TestClient(app) as client:
        response = client.post("/api/jobs", json={"task": "t"})
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    error = response.json()["error"]
    assert error["code"] == "storage_read_only"
    assert "SQLite" not in error["message"]  # the database's own words stay in the log
    assert ("outcome_unknown" in error) is unknown
    assert ("may have been written" in error["message"]) is unknown
    assert ("nothing was written" in error["message"]) is not unknown
    with pytest.raises(conveyor.StorageReadOnly) as raised:
        answer(response, "POST", "/api/jobs")
    assert raised.value.outcome_unknown is unknown
