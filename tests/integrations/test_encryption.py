"""Encrypted payloads and results: the plaintext never reaches the database, the HTTP
API (the console reads the same answers), or the logs; a process that holds the key
reads plain values; keys rotate, and ``conveyor reencrypt`` seals old jobs anew."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from cryptography.fernet import Fernet

import conveyor
from conveyor import crypto
from conveyor.client import RemoteQueue
from conveyor.errors import ConfigurationError
from tests.conftest import PG_URL, mysql_connection
from tests.web.conftest import serving


@pytest.fixture(autouse=True)
def no_keys_held() -> Iterator[None]:
    crypto.use(None)
    yield
    crypto.use(None)


def _key() -> str:
    return Fernet.generate_key().decode()


def _stored_bytes(db_url: str) -> bytes:
    """Everything the database holds of conveyor's jobs, as bytes."""
    if db_url.startswith("sqlite"):
        path = Path(db_url.removeprefix("sqlite:///").split("?")[0])
        files = [path, path.with_name(path.name + "-wal")]
        return b"".join(p.read_bytes() for p in files if p.exists())
    if db_url.startswith("mysql"):
        database = db_url.split("?")[0].rsplit("/", 1)[1]
        with mysql_connection(database) as conn, conn.cursor() as cur:
            cur.execute("SELECT * FROM conveyor_jobs")
            return "\n".join(repr(row) for row in cur.fetchall()).encode()
    schema = db_url.split("schema=")[1]
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(f'SELECT row_to_json(j)::text FROM "{schema}".conveyor_jobs j')
        return "\n".join(r[0] for r in rows).encode()


def _app(db_url: str, **options: object) -> tuple[conveyor.App, conveyor.Task]:  # type: ignore[type-arg]
    app = conveyor.App(db_url, **options)  # type: ignore[arg-type]

    @app.task(name="accounts.reset", encrypt=True, max_attempts=2)
    def reset(ctx: conveyor.Context, email: str, password: str) -> dict[str, str]:
        logging.getLogger("tests.task").info("reset ran")
        return {"token": f"token-for-{password}"}

    return app, reset


def test_the_plaintext_never_leaves_the_processes_that_hold_the_key(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = f"pw-{uuid.uuid4().hex}"
    app, reset = _app(db_url, encryption_keys=[_key()])
    caplog.set_level(logging.DEBUG)
    job = reset.enqueue(email="a@example.com", password=secret)
    # This process holds the key: what it reads is plain.
    assert job.payload == {"email": "a@example.com", "password": secret}
    assert app.queue.get(job.id).payload == job.payload
    assert app.drain() == 1
    done = app.queue.get(job.id)
    assert done.status == "completed" and done.result == {"token": f"token-for-{secret}"}
    app.queue.close()

    stored = _stored_bytes(db_url)
    assert crypto.MARKER.encode() in stored
    assert secret.encode() not in stored and b"a@example.com" not in stored

    crypto.use(None)  # a process without the key sees the sealed values
    other = conveyor.connect(db_url)
    try:
        unread = other.get(job.id)
        assert unread is not None and crypto.sealed(unread.payload) and crypto.sealed(unread.result)
    finally:
        other.close()

    # The server holds no key: its answers (the console reads the same) are ciphertext.
    with serving(db_url) as served:
        answers = [
            httpx.get(f"{served.url}/api/jobs/{job.id}"),
            httpx.get(f"{served.url}/api/jobs", params={"limit": 10}),
            httpx.get(f"{served.url}/api/jobs", params={"task": "accounts.reset"}),
        ]
    assert crypto.MARKER.encode() in answers[0].content  # the job, sealed
    for answer in answers:
        assert answer.status_code == 200
        assert secret.encode() not in answer.content
    assert secret not in served.log
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert "reset ran" in logged and secret not in logged


def test_rotation_and_reencrypt(db_url: str, tmp_path: Path) -> None:
    old, new = _key(), _key()
    app, reset = _app(db_url, encryption_keys=[old])
    first = reset.enqueue(email="b@example.com", password="first-secret")
    app.drain()
    # A new key goes first: new values are sealed with it, old ones still open.
    crypto.use([new, old])
    second = reset.enqueue(email="c@example.com", password="second-secret")
    assert app.queue.get(first.id).result == {"token": "token-for-first-secret"}
    assert app.queue.get(second.id).payload["password"] == "second-secret"

    # With only the new key, the first job no longer opens...
    crypto.use([new])
    assert crypto.sealed(app.queue.get(first.id).payload)
    # ...until conveyor reencrypt seals it again under the new key.
    env = {**os.environ, crypto.ENV_KEYS: f"{new},{old}"}
    run = subprocess.run(
        [sys.executable, "-m", "conveyor", "reencrypt", "--db", db_url, "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"count": 2, "values": 3, "unopened": 0}
    again = app.queue.get(first.id)
    assert again.payload == {"email": "b@example.com", "password": "first-secret"}
    assert again.result == {"token": "token-for-first-secret"}
    assert app.queue.get(second.id).payload["password"] == "second-secret"
    app.queue.close()


def test_a_worker_without_the_key_leaves_the_job_for_one_that_has_it(db_url: str) -> None:
    app, reset = _app(db_url, encryption_keys=[_key()])
    job = reset.enqueue(email="d@example.com", password="kept")
    crypto.use(None)
    app.drain()
    failed = app.queue.get(job.id)
    assert failed.status == "pending" and failed.attempts == 1
    assert "holds no key" in (failed.error or "")
    app.queue.close()


def test_bad_keys_and_missing_keys_are_refused(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(crypto.ENV_KEYS, raising=False)
    with pytest.raises(ConfigurationError, match="key 1 is not a Fernet key") as caught:
        conveyor.App(db_url, encryption_keys=["not-a-key"])
    assert "not-a-key" not in str(caught.value)
    with pytest.raises(ConfigurationError, match=crypto.ENV_KEYS):
        conveyor.App(db_url, encrypt=True)
    monkeypatch.setenv(crypto.ENV_KEYS, _key())
    app = conveyor.App(db_url, encrypt=True)

    @app.task(name="plain.echo")
    def echo(ctx: conveyor.Context, word: str) -> str:
        return word

    assert echo.enqueue(word="sealed-by-the-app").payload == {"word": "sealed-by-the-app"}
    app.queue.close()
    crypto.use(None)
    assert b"sealed-by-the-app" not in _stored_bytes(db_url)


def test_reencrypt_without_keys_is_one_line_and_non_zero(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != crypto.ENV_KEYS}
    run = subprocess.run(
        [sys.executable, "-m", "conveyor", "reencrypt", "--db", f"sqlite:///{tmp_path}/x.db"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode != 0
    assert run.stderr.strip().count("\n") == 0 and crypto.ENV_KEYS in run.stderr


def test_redacted_fields_are_hidden_from_readers_but_not_from_the_worker(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret, token = f"pw-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    app = conveyor.App(db_url)
    seen: list[str] = []

    @app.task(name="accounts.login", redact=["password", "token"])
    def login(ctx: conveyor.Context, user: str, password: str) -> dict[str, str]:
        seen.append(password)
        return {"user": user, "token": token}

    caplog.set_level(logging.DEBUG)
    job = login.enqueue(user="ann", password=secret)
    shown = app.queue.get(job.id)
    assert shown.payload["password"] == crypto.REDACTED and shown.payload["user"] == "ann"
    # A worker over HTTP gets the real values with its claim.
    with serving(db_url) as served:
        remote = RemoteQueue(served.url)
        try:
            worker_app = conveyor.App(remote)
            worker_app.add(login)
            assert worker_app.drain() == 1
        finally:
            remote.close()
        answers = [
            httpx.get(f"{served.url}/api/jobs/{job.id}"),
            httpx.get(f"{served.url}/api/jobs", params={"include": "payload,result"}),
            httpx.post(
                f"{served.url}/api/jobs",
                json={
                    "task": "accounts.other",
                    "payload": {"password": secret, crypto.REDACT: ["password"]},
                },
            ),
        ]
    assert seen == [secret]
    done = app.queue.get(job.id)
    assert done.status == "completed"
    assert done.result == {"user": "ann", "token": crypto.REDACTED}
    for answer in answers:
        assert answer.status_code in (200, 201), answer.text
        assert secret.encode() not in answer.content and token.encode() not in answer.content
    assert crypto.REDACTED.encode() in answers[0].content
    assert secret not in served.log and token not in served.log
    assert secret not in caplog.text and token not in caplog.text
    app.queue.close()
