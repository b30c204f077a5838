"""The Idempotency-Key header of the routes that create jobs, and the remote queues that
send one with every create and retry a lost answer with it: on every database."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from conveyor.aio.client import AsyncRemoteQueue
from conveyor.client import RemoteQueue
from conveyor.errors import ConfigurationError, DatabaseError, IdempotencyKeyReused
from conveyor.maintenance import IdempotencyPruner
from conveyor.ops.enqueue import enqueue as enqueue_call
from conveyor.ops.idempotency import Answer, IdempotentRequest
from conveyor.web import create_app
from conveyor.web.limits import Limits
from tests.conftest import PG_URL, mysql_connection
from tests.web.conftest import TOKENS, bearer, serve_env, serving, snapshot

# Every route that creates jobs, with a request body, and another body for the same path.
CREATES = {
    "one": ("/api/jobs", {"task": "mail", "payload": {"to": "a"}},
            {"task": "mail", "payload": {"to": "b"}}),
    "batch": ("/api/jobs/batch", {"jobs": [{"task": "a"}, {"task": "b", "payload": 1}]},
              {"jobs": [{"task": "a"}]}),
    "ids_only": ("/api/jobs/batch", {"jobs": [{"task": "a"}] * 3, "ids_only": True},
                 {"jobs": [{"task": "a"}] * 4, "ids_only": True}),
    "workflow": ("/api/workflows",
                 {"steps": [{"name": "fetch", "task": "fetch"},
                            {"name": "send", "task": "send", "after": ["fetch"]}]},
                 {"steps": [{"name": "fetch", "task": "fetch"}]}),
}  # fmt: skip
CREATED = {"one": 1, "batch": 2, "ids_only": 3, "workflow": 2}


def keyed(key: str, role: str = "worker") -> dict[str, str]:
    return {**bearer(role), "Idempotency-Key": key}


@pytest.mark.parametrize("route", list(CREATES))
def test_the_same_request_again_replays_the_first_answer_and_creates_nothing(
    client: TestClient, queue: conveyor.Queue, route: str
) -> None:
    path, body, _ = CREATES[route]
    first = client.post(path, json=body, headers=keyed("order-17"))
    assert first.status_code == 201
    assert "idempotent-replayed" not in first.headers
    before = snapshot(queue)
    again = client.post(path, json=body, headers=keyed("order-17"))
    assert again.status_code == first.status_code
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert snapshot(queue) == before
    assert queue.stats().total == CREATED[route]


def test_the_canonical_body_decides_not_its_spelling(
    client: TestClient, queue: conveyor.Queue
) -> None:
    first = client.post(
        "/api/jobs", content=b'{"task": "t", "payload": {"a": 1, "b": 2}}',
        headers={**keyed("k"), "Content-Type": "application/json"},
    )  # fmt: skip
    again = client.post(
        "/api/jobs", content=b'{"payload":{"b":2,"a":1},"task":"t"}',
        headers={**keyed("k"), "Content-Type": "application/json"},
    )  # fmt: skip
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert queue.stats().total == 1


@pytest.mark.parametrize("route", list(CREATES))
def test_the_key_with_another_body_is_refused_and_writes_nothing(
    client: TestClient, queue: conveyor.Queue, route: str
) -> None:
    path, body, other = CREATES[route]
    assert client.post(path, json=body, headers=keyed("order-18")).status_code == 201
    before = snapshot(queue)
    refused = client.post(path, json=other, headers=keyed("order-18"))
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert snapshot(queue) == before


def test_the_key_on_another_route_is_refused(client: TestClient, queue: conveyor.Queue) -> None:
    assert client.post("/api/jobs", json={"task": "t"}, headers=keyed("k1")).status_code == 201
    refused = client.post("/api/jobs/batch", json={"jobs": [{"task": "t"}]}, headers=keyed("k1"))
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert queue.stats().total == 1


@pytest.mark.parametrize(
    "key",
    [b"", b"x" * 256, "clé".encode(), b"tab\there", b"bell\x07"],
    ids=["empty", "too-long", "not-ascii", "tab", "control"],
)
def test_a_malformed_key_is_refused_before_anything_is_written(
    client: TestClient, queue: conveyor.Queue, key: bytes
) -> None:
    before = snapshot(queue)
    for path, body, _ in CREATES.values():
        refused = client.post(path, json=body, headers={**bearer("worker"), "Idempotency-Key": key})  # type: ignore[dict-item]
        assert refused.status_code == 422, path
        assert refused.json()["error"]["code"] == "invalid_argument"
    assert snapshot(queue) == before


def test_a_key_of_255_printable_characters_is_taken(
    client: TestClient, queue: conveyor.Queue
) -> None:
    key = ("~ !" * 100)[:255]
    assert client.post("/api/jobs", json={"task": "t"}, headers=keyed(key)).status_code == 201
    again = client.post("/api/jobs", json={"task": "t"}, headers=keyed(key))
    assert again.headers["idempotent-replayed"] == "true"
    assert queue.stats().total == 1


def test_keys_of_different_tokens_never_meet(client: TestClient, queue: conveyor.Queue) -> None:
    worker = client.post("/api/jobs", json={"task": "t"}, headers=keyed("same", "worker"))
    admin = client.post("/api/jobs", json={"task": "t"}, headers=keyed("same", "admin"))
    assert worker.status_code == admin.status_code == 201
    assert "idempotent-replayed" not in admin.headers
    assert worker.json()["id"] != admin.json()["id"]
    # Another body under the same key is the admin's own first use, not a reuse.
    other = client.post("/api/jobs", json={"task": "u"}, headers=keyed("other", "admin"))
    assert other.status_code == 201
    assert queue.stats().total == 3


def test_a_request_without_a_key_creates_every_time(
    client: TestClient, queue: conveyor.Queue
) -> None:
    for _ in range(2):
        assert client.post("/api/jobs", json={"task": "t"}, headers=bearer("worker")).json()
    assert queue.stats().total == 2


def test_a_refused_create_keeps_no_record_and_the_key_may_be_sent_again(
    client: TestClient, queue: conveyor.Queue, db_url: str
) -> None:
    active = queue.enqueue("report", key="daily")
    body = {"task": "report", "key": "daily", "on_active": "raise"}
    refused = client.post("/api/jobs", json=body, headers=keyed("report-1"))
    assert refused.status_code == 409
    assert _records(db_url) == []  # rolled back with the insert that failed
    queue.cancel(active.id)
    again = client.post("/api/jobs", json=body, headers=keyed("report-1"))
    assert again.status_code == 201
    assert "idempotent-replayed" not in again.headers
    assert client.post("/api/jobs", json=body, headers=keyed("report-1")).json() == again.json()


def test_the_token_is_not_stored(client: TestClient, db_url: str) -> None:
    client.post("/api/jobs", json={"task": "t"}, headers=keyed("k"))
    stored = _records(db_url)
    assert len(stored) == 1
    assert not any(token in str(value) for token in TOKENS for value in stored[0])


def test_concurrent_requests_with_one_key_create_once(
    server_url: str, queue: conveyor.Queue
) -> None:
    threads, barrier = 8, threading.Barrier(8)
    answers: list[httpx.Response] = []
    lock = threading.Lock()
    body = {"jobs": [{"task": "load", "payload": i} for i in range(20)], "ids_only": True}

    def send() -> None:
        with httpx.Client(base_url=server_url, timeout=60) as http:
            barrier.wait()
            response = http.post("/api/jobs/batch", json=body, headers=keyed("bulk-load-1"))
        with lock:
            answers.append(response)

    running = [threading.Thread(target=send) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join(timeout=120)
    assert len(answers) == threads
    # Each is the answer or, if it met the first one still open, a 409 to try again.
    done = [a for a in answers if a.status_code == 201]
    assert all(a.status_code in (201, 409) for a in answers), [a.text for a in answers]
    assert done and all(a.json() == done[0].json() for a in done)
    assert sum("idempotent-replayed" not in a.headers for a in done) == 1
    assert queue.stats().total == 20
    assert sorted(j.id for j in queue.jobs(limit=100)) == sorted(done[0].json()["ids"])


def test_after_the_retention_the_key_may_be_used_again(db_url: str) -> None:
    app = create_app(db_url, tokens=TOKENS, limits=Limits(idempotency_keep_seconds=1.0))
    with TestClient(app) as client:
        queue: conveyor.Queue = app.state.conveyor.queue
        first = client.post("/api/jobs", json={"task": "t"}, headers=keyed("daily"))
        replay = client.post("/api/jobs", json={"task": "t"}, headers=keyed("daily"))
        assert replay.headers["idempotent-replayed"] == "true"
        _wait_past_retention(queue, 1.0)
        later = client.post("/api/jobs", json={"task": "u"}, headers=keyed("daily"))
        assert later.status_code == 201
        assert "idempotent-replayed" not in later.headers
        assert later.json()["id"] != first.json()["id"]
        assert queue.stats().total == 2
        assert len(_records(db_url)) == 1  # the expired record was replaced


def test_expired_records_are_deleted_in_batches(db_url: str) -> None:
    app = create_app(db_url, tokens=TOKENS, limits=Limits(idempotency_keep_seconds=1.0))
    with TestClient(app) as client:
        queue: conveyor.Queue = app.state.conveyor.queue
        for i in range(5):
            client.post("/api/jobs", json={"task": "t"}, headers=keyed(f"k{i}"))
        pruner = IdempotencyPruner(queue, batch=2)
        assert pruner.run_once() == 0  # nothing has expired yet
        _wait_past_retention(queue, 1.0)
        assert queue.prune_idempotency_keys(2) == 2  # one batch at a time
        assert pruner.run_once() == 3
        assert _records(db_url) == []
        assert queue.stats().total == 5  # the jobs stay


def test_the_retention_has_a_cap() -> None:
    with pytest.raises(ConfigurationError):
        Limits(idempotency_keep_seconds=31 * 86400.0)
    with pytest.raises(ConfigurationError):
        Limits(idempotency_keep_seconds=0)


def test_the_jobs_and_the_key_commit_together_or_not_at_all(q: conveyor.Queue) -> None:
    """An answer that fails to be stored (the process dying between the insert and the
    commit) leaves neither the jobs nor the key: the retry creates them once."""
    request = IdempotentRequest(scope="s" * 64, key="k", request_hash="h" * 64)

    def crash(job: conveyor.Job) -> Answer:
        raise RuntimeError("gone before the answer was stored")

    with pytest.raises(RuntimeError):
        q.run_idempotent(enqueue_call(q.defaults, "t", None), request, crash)
    assert q.stats().total == 0

    def store(job: conveyor.Job) -> Answer:
        return Answer(201, json.dumps({"id": job.id}))

    first = q.run_idempotent(enqueue_call(q.defaults, "t", None), request, store)
    again = q.run_idempotent(enqueue_call(q.defaults, "t", None), request, store)
    assert not first.replayed and again.replayed
    assert again.answer == first.answer
    assert [j.id for j in q.jobs()] == [json.loads(first.answer.body)["id"]]


def test_a_server_killed_mid_request_leaves_a_retry_that_creates_once(db_url: str) -> None:
    """``conveyor serve`` SIGKILLed while it writes a large batch: the retry with the
    same key, to the restarted server, either creates the batch (nothing had committed)
    or replays it (everything had): never both, never half."""
    body = {"jobs": [{"task": "load", "payload": i} for i in range(3000)], "ids_only": True}
    headers = {"Authorization": "Bearer wrk-secret-0001", "Idempotency-Key": "crash-1"}
    tokens = "worker:wrk-secret-0001"
    with serving(db_url, tokens=tokens) as served:
        sending = threading.Thread(
            target=lambda: _post_ignoring_errors(served.url, body, headers), daemon=True
        )
        sending.start()
        time.sleep(0.3)
        served.process.send_signal(signal.SIGKILL)
        served.process.wait(timeout=30)
        sending.join(timeout=60)
    with serving(db_url, tokens=tokens) as served:
        answer = httpx.post(f"{served.url}/api/jobs/batch", json=body, headers=headers, timeout=60)
        again = httpx.post(f"{served.url}/api/jobs/batch", json=body, headers=headers, timeout=60)
    assert answer.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == answer.json()
    with conveyor.connect(db_url) as q:
        assert q.stats().total == 3000
        assert sorted(j.id for j in q.jobs(limit=5000)) == sorted(answer.json()["ids"])


def test_serve_keeps_answers_for_its_idempotency_keep(db_url: str) -> None:
    headers = {"Authorization": "Bearer wrk-secret-0001", "Idempotency-Key": "k"}
    with serving(db_url, "--idempotency-keep", "1", tokens="worker:wrk-secret-0001") as served:
        first = httpx.post(f"{served.url}/api/jobs", json={"task": "t"}, headers=headers)
        replay = httpx.post(f"{served.url}/api/jobs", json={"task": "t"}, headers=headers)
        with conveyor.connect(db_url) as q:
            _wait_past_retention(q, 1.0)
        later = httpx.post(f"{served.url}/api/jobs", json={"task": "t"}, headers=headers)
    assert replay.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in later.headers
    assert later.json()["id"] != first.json()["id"]


def test_serve_refuses_a_retention_past_thirty_days(db_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "conveyor", "serve", "--db", db_url, "--port", "0",
         "--idempotency-keep", str(31 * 86400)],
        capture_output=True, text=True, timeout=60, env=serve_env(),
    )  # fmt: skip
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "--idempotency-keep" in result.stderr


def _post_ignoring_errors(url: str, body: Any, headers: dict[str, str]) -> None:
    with suppress(httpx.HTTPError):
        httpx.post(f"{url}/api/jobs/batch", json=body, headers=headers, timeout=60)


# -- remote queues: a fresh key with each create, the same key for its retries ----------
@contextmanager
def proxy(upstream: str, mode: str, times: int = 1) -> Iterator[tuple[str, list[int]]]:
    """A TCP proxy in front of ``upstream``. Its first ``times`` connections fail:
    ``"drop"`` forwards the request and drops the server's answer (the connection
    closes without one); ``"gateway"`` answers 502 without forwarding. The others pass
    through. Yields its URL and a list that counts the failed connections."""
    host, port = upstream.removeprefix("http://").split(":")
    target = (host, int(port))
    listener = socket.create_server(("127.0.0.1", 0))
    failed: list[int] = []
    lock = threading.Lock()

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def handle(client: socket.socket) -> None:
        with lock:
            fail = len(failed) < times
            if fail:
                failed.append(1)
        if fail and mode == "gateway":
            client.recv(65536)
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n"
                           b"connection: close\r\n\r\n")  # fmt: skip
            client.close()
            return
        server = socket.create_connection(target)
        if fail:  # forward the request, wait for the answer, drop it
            threading.Thread(target=pump, args=(client, server), daemon=True).start()
            server.recv(65536)
            for s in (client, server):
                with suppress(OSError):  # the pump may have shut it already
                    s.shutdown(socket.SHUT_RDWR)  # wakes the pump, sends the FIN now
                s.close()
            return
        threading.Thread(target=pump, args=(client, server), daemon=True).start()
        pump(server, client)

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", failed
    finally:
        listener.close()


@pytest.mark.parametrize("mode", ["drop", "gateway"])
def test_a_remote_queue_whose_answer_is_lost_retries_and_creates_once(
    server_url: str, queue: conveyor.Queue, mode: str
) -> None:
    with proxy(server_url, mode) as (url, failed):
        remote = RemoteQueue(url, token="worker-secret-0001", timeout=30)
        try:
            job = remote.enqueue("mail", {"to": "a"})
        finally:
            remote.close()
    assert failed == [1]
    assert [j.id for j in queue.jobs()] == [job.id]


def test_a_remote_ids_only_load_whose_answer_is_lost_creates_once(
    server_url: str, queue: conveyor.Queue
) -> None:
    with proxy(server_url, "drop") as (url, failed):
        remote = RemoteQueue(url, token="worker-secret-0001", timeout=30)
        try:
            ids = remote.enqueue_ids([{"task": "load", "payload": i} for i in range(50)])
        finally:
            remote.close()
    assert failed == [1]
    assert queue.stats().total == 50
    assert sorted(j.id for j in queue.jobs(limit=100)) == sorted(ids)


def test_a_remote_workflow_whose_answer_is_lost_creates_once(
    server_url: str, queue: conveyor.Queue
) -> None:
    flow = conveyor.Workflow("nightly")
    flow.add("fetch", name="fetch")
    with proxy(server_url, "drop") as (url, failed):
        remote = RemoteQueue(url, token="worker-secret-0001", timeout=30)
        try:
            run = remote.enqueue_workflow(flow)
        finally:
            remote.close()
    assert failed == [1]
    assert [j.id for j in queue.jobs()] == [j.id for j in run.jobs.values()]


def test_an_async_remote_queue_whose_answer_is_lost_retries_and_creates_once(
    server_url: str, queue: conveyor.Queue
) -> None:
    async def send(url: str) -> list[conveyor.Job]:
        remote = AsyncRemoteQueue(url, token="worker-secret-0001", timeout=30)
        try:
            return await remote.enqueue_many([{"task": "a"}, {"task": "b"}])
        finally:
            await remote.close()

    with proxy(server_url, "drop") as (url, failed):
        jobs = asyncio.run(send(url))
    assert failed == [1]
    assert sorted(j.id for j in queue.jobs()) == sorted(j.id for j in jobs)


def test_a_remote_queue_gives_up_after_a_few_attempts(
    server_url: str, queue: conveyor.Queue
) -> None:
    with proxy(server_url, "gateway", times=100) as (url, failed):
        remote = RemoteQueue(url, token="worker-secret-0001", timeout=30)
        try:
            with pytest.raises(DatabaseError):
                remote.enqueue("mail")
        finally:
            remote.close()
    assert len(failed) == 4
    assert queue.stats().total == 0


def test_a_claim_is_not_retried(server_url: str, queue: conveyor.Queue) -> None:
    queue.enqueue("mail")
    with proxy(server_url, "drop") as (url, failed):
        remote = RemoteQueue(url, token="worker-secret-0001", timeout=30)
        try:
            with pytest.raises(DatabaseError):
                remote.claim("default")
        finally:
            remote.close()
    assert failed == [1]


def test_each_remote_create_sends_a_key_of_its_own(app: FastAPI, client: TestClient) -> None:
    seen: list[str | None] = []

    def record(request: httpx.Request) -> None:
        seen.append(request.headers.get("idempotency-key"))

    client.event_hooks["request"] = [record]
    remote = RemoteQueue(str(client.base_url), http=client)
    remote.enqueue("a")
    remote.enqueue("a")
    remote.enqueue_many([{"task": "a"}])
    remote.stats()
    assert len(set(seen[:3])) == 3 and all(seen[:3])
    assert seen[3] is None
    # A key the server saw with another request is the caller's error, not a retry.
    response = client.post("/api/jobs", json={"task": "b"}, headers={"Idempotency-Key": seen[0]})  # type: ignore[dict-item]
    assert response.json()["error"]["code"] == IdempotencyKeyReused.code


# -- helpers ---------------------------------------------------------------------------
def _records(url: str) -> list[tuple[Any, ...]]:
    """Every idempotency record, read straight from the database at ``url``."""
    columns = "scope, idem_key, request_hash, answer_status, body"
    query = f"SELECT {columns} FROM {{}}conveyor_idempotency_keys"
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///").split("?")[0]
        with closing(sqlite3.connect(path)) as conn:
            return [tuple(r) for r in conn.execute(query.format(""))]
    if url.startswith("mysql"):
        database = url.split("?")[0].rsplit("/", 1)[1]
        with mysql_connection(database) as conn, conn.cursor() as cur:
            cur.execute(query.format(""))
            return [tuple(r) for r in cur.fetchall()]
    schema = url.split("schema=")[1]
    with psycopg.connect(PG_URL) as conn:
        return [tuple(r) for r in conn.execute(query.format(f'"{schema}".'))]


def _wait_past_retention(queue: conveyor.Queue, keep: float) -> None:
    """Until the database's clock is past ``keep`` seconds from now."""
    end = queue.now().timestamp() + keep + 0.05
    while queue.now().timestamp() <= end:
        time.sleep(0.1)
