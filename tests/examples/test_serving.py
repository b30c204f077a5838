"""What every example's ``serve`` shares: loopback unless a token is required, the token
checked on every request, and one error shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import psycopg
import pymysql
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from examples._web import install_errors
from tests.examples.conftest import run_module


def test_serving_off_loopback_needs_a_token(db_url: str, tmp_path: Path) -> None:
    refused = run_module("fetch_queue", "serve", "--db", db_url, "--host", "0.0.0.0",
                         cwd=tmp_path, timeout=60)  # fmt: skip
    assert refused.returncode == 2
    assert "refusing to listen on 0.0.0.0 without --token" in refused.stdout + refused.stderr


def test_a_token_is_checked_on_every_request(db_url: str, start_server: Any) -> None:
    server = start_server("subtitles", db_url, "--token", "s3cret", workers=0)
    anonymous = httpx.get(f"{server.url}/videos/v1")
    assert anonymous.status_code == 401
    assert anonymous.json() == {
        "error": {"code": "unauthorized", "message": "send Authorization: Bearer <token>"}
    }
    wrong = httpx.get(f"{server.url}/videos/v1", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    right = httpx.get(f"{server.url}/videos/v1", headers={"Authorization": "Bearer s3cret"})
    assert right.status_code == 404 and right.json()["error"]["code"] == "not_found"
    missing = httpx.get(f"{server.url}/nowhere", headers={"Authorization": "Bearer s3cret"})
    assert missing.status_code == 404 and "no route matches GET /nowhere" in missing.text


def test_the_book_pipeline_refuses_a_missing_token_in_its_own_format(
    db_url: str, start_server: Any
) -> None:
    server = start_server("book_pipeline", db_url, "--token", "s3cret", workers=0)
    anonymous = httpx.get(f"{server.url}/admin/books/b1/pages")
    assert anonymous.status_code == 401
    assert anonymous.json() == {"detail": "send Authorization: Bearer <token>"}


@pytest.mark.parametrize(
    ("raised", "status"),
    [
        (pymysql.err.OperationalError(1213, "Deadlock found when trying to get lock"), 503),
        (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), 503),
        (psycopg.errors.DeadlockDetected("deadlock detected"), 503),
        (psycopg.errors.SerializationFailure("could not serialize access"), 503),
        (conveyor.TransactionConflict("MySQL broke a deadlock by rolling back"), 503),
        (pymysql.err.OperationalError(1045, "Access denied for user 'app'"), 500),
    ],
)
def test_a_transaction_lost_to_a_deadlock_answers_503_and_asks_for_a_retry(
    raised: Exception, status: int
) -> None:
    # The examples run their transactions again a few times; when the last try loses too,
    # the client hears that nothing was written and when to send it again — not a 500.
    api = FastAPI()
    install_errors(api)

    @api.get("/write")
    def write() -> None:
        raise raised

    with TestClient(api, raise_server_exceptions=False) as client:
        answer = client.get("/write")
    assert answer.status_code == status
    if status == 503:
        assert answer.headers["Retry-After"] == "1"
        assert answer.json()["error"]["code"] == "unavailable"
        assert "Deadlock" not in answer.text and "serialize" not in answer.text
    else:
        assert answer.json()["error"]["code"] == "internal_error"
        assert "Access denied" not in answer.text
