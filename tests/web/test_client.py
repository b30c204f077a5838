"""RemoteQueue: the Queue contract over HTTP, with the same exceptions."""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from fastapi import FastAPI

import conveyor
from conveyor.client import RemoteQueue
from conveyor.errors import (
    ConfigurationError,
    DatabaseError,
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    StaleClaim,
)
from conveyor.job import Job, Status
from tests.web.conftest import TOKEN_OF, live_server

# Everything of Queue that makes sense over the wire (not: conn transactions, migrate,
# backend access, close/now which have their own forms).
SHARED = [
    "enqueue", "enqueue_many", "claim", "complete", "complete_many", "fail", "fail_many",
    "heartbeat", "heartbeat_many", "progress", "ack", "release", "reset_claims", "recover",
    "retry", "cancel", "complete_by_key", "cancel_by_key", "fail_by_key", "get", "latest",
    "jobs", "stats", "queue_stats", "task_stats",
    "prune", "wait", "subscribers", "now", "close",
]  # fmt: skip


@pytest.mark.parametrize("name", SHARED)
def test_same_signature_as_queue(name: str) -> None:
    local = inspect.signature(getattr(conveyor.Queue, name))
    remote = inspect.signature(getattr(RemoteQueue, name))
    as_tuple = [(p.name, p.kind, p.default) for p in local.parameters.values()]
    assert [(p.name, p.kind, p.default) for p in remote.parameters.values()] == as_tuple


def _same_job(local: Job, remote: Job) -> None:
    """Every field but the claim id, which the server shows only to the claim's holder
    (and `deduplicated`, which is not compared)."""
    assert remote == dataclasses.replace(local, claim_id=None)
    assert remote.deduplicated == local.deduplicated


def test_the_worker_round_trip(remote: RemoteQueue, queue: conveyor.Queue) -> None:
    job = remote.enqueue("pages.ocr", {"book": 1}, key="book-1", max_attempts=2)
    assert not job.deduplicated
    again = remote.enqueue("pages.ocr", {"book": 1}, key="book-1", subscriber="chat-42")
    assert again.deduplicated and again.id == job.id
    assert remote.subscribers(job.id) == ["chat-42"]
    claim = remote.claim(limit=10, lease=timedelta(seconds=30), worker="w1")
    assert (len(claim), claim.remaining, claim.jobs[0].worker) == (1, 0, "w1")
    remote.heartbeat(job.id, claim.id, extend=60)
    remote.progress(job.id, claim.id, total=3, completed=1, checkpoint="page-1")
    done = remote.complete(job.id, claim.id, {"pages": 3})
    assert done.status == Status.COMPLETED
    _same_job(queue.get(job.id), remote.get(job.id))  # type: ignore[arg-type]
    assert remote.get(job.id).progress.checkpoint == "page-1"  # type: ignore[union-attr]
    _same_job(queue.latest("book-1"), remote.latest("book-1"))  # type: ignore[arg-type]
    assert remote.stats() == queue.stats()
    assert remote.queue_stats() == queue.queue_stats()


def test_library_errors_come_back_as_the_same_exceptions(remote: RemoteQueue) -> None:
    job = remote.enqueue("t", key="k")
    with pytest.raises(DuplicateJob) as duplicate:
        remote.enqueue("t", key="k", on_active="raise")
    assert duplicate.value.job_id == job.id
    claim = remote.claim()
    remote.release(claim.id)
    with pytest.raises(StaleClaim):
        remote.complete(job.id, claim.id)
    with pytest.raises(JobNotFound):
        remote.cancel(987654)
    with pytest.raises(InvalidTransition):
        remote.retry(job.id)
    with pytest.raises(InvalidArgument):
        remote.enqueue("t", payload=float("nan"))
    with pytest.raises(InvalidArgument):
        remote.enqueue("t", run_at=datetime(2030, 1, 1))  # naive
    with pytest.raises(InvalidArgument):
        remote.claim(limit=0)
    with pytest.raises(InvalidArgument):
        remote.enqueue("t", conn=object())
    with pytest.raises(InvalidArgument):
        remote.release("a/b")
    assert remote.get(987654) is None
    assert remote.latest("nothing") is None


def test_batches_and_admin_calls(remote: RemoteQueue) -> None:
    jobs = remote.enqueue_many(
        [{"task": "t", "payload": n, "run_at": datetime.now(timezone.utc)} for n in range(4)],
        queue="b",
    )
    assert [j.payload for j in jobs] == [0, 1, 2, 3]
    claim = remote.claim("b", limit=4)
    a, b, c, _ = (j.id for j in claim.jobs)
    assert [j.id for j in remote.heartbeat_many([(a, claim.id), (b, "stale")])] == [a]
    assert [j.id for j in remote.complete_many([(a, claim.id, "ok"), (b, "stale", None)])] == [a]
    failed = remote.fail_many([(b, claim.id, "boom", False, None), (c, claim.id, "x", True, 0)])
    assert sorted((j.id, j.status) for j in failed) == [(b, Status.FAILED), (c, Status.PENDING)]
    assert remote.ack(claim.id) == 1  # d
    assert remote.complete_many([]) == []
    remote.enqueue("t", queue="sync", key="book-7")
    assert remote.complete_by_key("book-7", queue="sync", result={"id": 7}) == 1
    assert remote.retry(b).status == Status.PENDING
    assert remote.cancel(b).status == Status.CANCELLED
    assert remote.reset_claims(timedelta(minutes=5)) == 0
    assert remote.recover() == 0
    assert remote.prune(older_than=0, statuses=["completed", "cancelled"]) == 4
    assert [j.id for j in remote.jobs(queue="b")] == [c]
    assert [j.id for j in remote.jobs(status="pending", newest_first=True, limit=1)] == [c]


def test_wait_long_polls_until_final(remote: RemoteQueue, queue: conveyor.Queue) -> None:
    job = remote.enqueue("t")
    claim = queue.claim()
    threading.Timer(0.3, lambda: queue.complete(job.id, claim.id, 5)).start()
    finished = remote.wait(job.id, timeout=20)
    assert (finished.status, finished.result) == (Status.COMPLETED, 5)
    pending = remote.enqueue("t")
    started = time.monotonic()
    assert remote.wait(pending.id, timeout=0.2).status == Status.PENDING
    assert time.monotonic() - started < 15  # bounded: it did return
    with pytest.raises(JobNotFound):
        remote.wait(999999, timeout=1)


def test_a_refused_token_is_a_configuration_error(app: FastAPI) -> None:
    with live_server(app) as url:
        with RemoteQueue(url, "wrong-token-123") as stranger, pytest.raises(ConfigurationError):
            stranger.stats()
        with RemoteQueue(url, TOKEN_OF["reader"]) as reader:
            assert reader.stats().total == 0
            with pytest.raises(ConfigurationError, match="worker role"):
                reader.enqueue("t")


def test_an_unreachable_server_is_a_database_error() -> None:
    with (
        RemoteQueue("http://127.0.0.1:9", "token", timeout=2) as nowhere,
        pytest.raises(DatabaseError, match="cannot reach"),
    ):
        nowhere.stats()


def test_a_server_whose_database_is_down_is_a_database_error(
    remote: RemoteQueue, queue: conveyor.Queue
) -> None:
    queue.close()
    with pytest.raises(DatabaseError):
        remote.claim()


def test_remote_now_is_the_database_clock(remote: RemoteQueue, queue: conveyor.Queue) -> None:
    assert abs((remote.now() - queue.now()).total_seconds()) < 60


def test_custom_http_client_is_used_as_given(app: FastAPI) -> None:
    with live_server(app) as url:
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN_OF['admin']}"})
        with RemoteQueue("ignored", http=http) as remote:
            assert remote.enqueue("t").id == 1
