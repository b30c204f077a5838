"""The routes the console needs, over HTTP: ``GET /api/whoami`` and the bulk admin
actions on a filtered selection."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from conveyor.web import create_app
from tests.web.conftest import bearer


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'conveyor.db'}"


@pytest.fixture
def q(app: FastAPI, client: TestClient) -> conveyor.Queue:
    queue: conveyor.Queue = app.state.conveyor.queue
    return queue


def fail_for_good(q: conveyor.Queue, job_id: int, error: str = "boom") -> None:
    claim = q.claim_job(job_id)
    q.fail(job_id, claim.id, error, retryable=False)


# -- whoami --------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["admin", "worker", "reader"])
def test_whoami_names_the_role_of_the_token(client: TestClient, role: str) -> None:
    answer = client.get("/api/whoami", headers=bearer(role))
    assert answer.status_code == 200
    assert answer.json() == {"role": role, "auth": True}


def test_whoami_without_a_token_is_401(client: TestClient) -> None:
    answer = client.get("/api/whoami", headers={"Authorization": ""})
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthorized"
    answer = client.get("/api/whoami", headers={"Authorization": "Bearer not-a-real-token"})
    assert answer.status_code == 401


def test_whoami_on_a_server_without_tokens_is_an_admin(sqlite_url: str) -> None:
    with TestClient(create_app(sqlite_url, tokens={}), base_url="http://localhost") as anonymous:
        assert anonymous.get("/api/whoami").json() == {"role": "admin", "auth": False}


# -- bulk actions ----------------------------------------------------------------------------


def test_bulk_retry_retries_the_failed_jobs_of_the_filter_only(
    client: TestClient, q: conveyor.Queue
) -> None:
    mail = [q.enqueue("send", {"n": n}, queue="mail").id for n in range(4)]
    other = q.enqueue("send", queue="other").id
    for job_id in [*mail[:3], other]:
        fail_for_good(q, job_id)
    answer = client.post("/api/jobs/bulk/retry", json={"queue": "mail", "status": "failed"})
    assert answer.status_code == 200
    assert answer.json() == {
        "changed_count": 3,
        "ids": mail[:3],
        "skipped": [],
        "next_after": None,
    }
    assert [q.get(i).status for i in mail] == ["pending"] * 4  # type: ignore[union-attr]
    assert all(q.get(i).attempts == 0 for i in mail)  # type: ignore[union-attr]
    assert q.get(other).status == "failed"  # type: ignore[union-attr]


def test_bulk_retry_filters_by_task_key_and_creation_time(
    client: TestClient, q: conveyor.Queue
) -> None:
    a = q.enqueue("resize", key="img-1").id
    b = q.enqueue("resize", key="img-2").id
    time.sleep(0.05)
    c = q.enqueue("resize", key="img-3").id
    for job_id in (a, b, c):
        fail_for_good(q, job_id)
    by_task = client.post("/api/jobs/bulk/retry", json={"task": "resize", "key": "img-2"})
    assert by_task.json()["ids"] == [b]
    since = q.get(c).created_at - timedelta(milliseconds=20)  # type: ignore[union-attr]
    later = client.post("/api/jobs/bulk/retry", json={"created_after": since.isoformat()})
    assert later.json()["ids"] == [c]
    none = client.post("/api/jobs/bulk/retry", json={"created_before": "2000-01-01T00:00:00Z"})
    assert none.json()["changed_count"] == 0
    assert q.get(a).status == "failed"  # type: ignore[union-attr]


def test_bulk_cancel_cancels_pending_by_default_and_running_when_asked(
    client: TestClient, q: conveyor.Queue
) -> None:
    pending = [q.enqueue("crawl", queue="web").id for _ in range(3)]
    running = q.claim("web", limit=1).jobs[0].id
    answer = client.post("/api/jobs/bulk/cancel", json={"queue": "web"})
    assert answer.json()["ids"] == [i for i in pending if i != running]
    assert q.get(running).status == "running"  # type: ignore[union-attr]
    answer = client.post("/api/jobs/bulk/cancel", json={"queue": "web", "status": "running"})
    assert answer.json()["ids"] == [running]
    assert q.stats("web").cancelled == 3


def test_bulk_pages_through_a_large_selection_with_next_after(
    client: TestClient, q: conveyor.Queue
) -> None:
    ids = [j.id for j in q.enqueue_many([{"task": "t"} for _ in range(250)], queue="big")]
    body: dict[str, Any] = {"queue": "big", "limit": 120}
    seen: list[int] = []
    rounds = 0
    while True:
        answer = client.post("/api/jobs/bulk/cancel", json=body).json()
        seen += answer["ids"]
        rounds += 1
        if answer["next_after"] is None:
            break
        assert answer["next_after"] == seen[-1]
        body["after"] = answer["next_after"]
    assert seen == ids and rounds == 3
    assert q.stats("big").cancelled == 250


def test_bulk_retry_skips_a_job_whose_key_is_taken_and_says_why(
    client: TestClient, q: conveyor.Queue
) -> None:
    first = q.enqueue("fetch", key="url-1").id
    fail_for_good(q, first)
    second = q.enqueue("fetch", key="url-1").id  # the key's new active job
    answer = client.post("/api/jobs/bulk/retry", json={}).json()
    assert answer["changed_count"] == 0
    assert answer["skipped"][0]["id"] == first
    assert "key" in answer["skipped"][0]["reason"]
    assert q.get(first).status == "failed" and q.get(second).status == "pending"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/jobs/bulk/retry", {"status": "pending"}),
        ("/api/jobs/bulk/cancel", {"status": "failed"}),
        ("/api/jobs/bulk/retry", {"limit": 1001}),
        ("/api/jobs/bulk/retry", {"limit": 0}),
        ("/api/jobs/bulk/retry", {"queue": ""}),
        ("/api/jobs/bulk/retry", {"created_after": 5}),
        ("/api/jobs/bulk/retry", {"after": -1}),
        ("/api/jobs/bulk/retry", {"everything": True}),
    ],
)
def test_bulk_refuses_bad_input_and_changes_nothing(
    client: TestClient, q: conveyor.Queue, path: str, body: dict[str, Any]
) -> None:
    job = q.enqueue("t").id
    fail_for_good(q, job)
    answer = client.post(path, json=body)
    assert answer.status_code == 422
    assert set(answer.json()["error"]) == {"code", "message"}
    assert q.get(job).status == "failed"  # type: ignore[union-attr]


@pytest.mark.parametrize("role", ["worker", "reader"])
def test_bulk_is_for_admins(client: TestClient, q: conveyor.Queue, role: str) -> None:
    job = q.enqueue("t").id
    fail_for_good(q, job)
    for path in ("/api/jobs/bulk/retry", "/api/jobs/bulk/cancel"):
        assert client.post(path, json={}, headers=bearer(role)).status_code == 403
    assert q.get(job).status == "failed"  # type: ignore[union-attr]


def test_a_cross_site_form_cannot_post_a_bulk_action(sqlite_url: str) -> None:
    """A form on another site can send a body that is not JSON, or none: neither acts,
    even on a server without tokens."""
    with TestClient(create_app(sqlite_url, tokens={}), base_url="http://localhost") as anonymous:
        q: conveyor.Queue = anonymous.app.state.conveyor.queue  # type: ignore[attr-defined]
        job = q.enqueue("t").id
        fail_for_good(q, job)
        form = anonymous.post(
            "/api/jobs/bulk/retry",
            content=b"status=failed",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 415
        empty = anonymous.post("/api/jobs/bulk/retry")  # no JSON content type, no token
        assert empty.status_code == 415
        assert q.get(job).status == "failed"  # type: ignore[union-attr]


# -- jobs not yet due, run now, delete --------------------------------------------------------


def test_deferred_run_now_and_delete_over_http(client: TestClient, q: conveyor.Queue) -> None:
    later = q.enqueue("digest", {"team": "ops"}, run_at=q.now() + timedelta(hours=1))
    listed = client.get("/api/jobs/deferred", params={"kind": "scheduled"}).json()
    assert [j["id"] for j in listed["jobs"]] == [later.id] and "payload" not in listed["jobs"][0]
    with_payload = client.get("/api/jobs/deferred", params={"include": "payload"}).json()
    assert with_payload["jobs"][0]["payload"] == {"team": "ops"}
    assert client.get("/api/jobs/deferred", params={"kind": "retrying"}).json()["jobs"] == []
    assert client.get("/api/jobs/deferred", params={"kind": "soon"}).status_code == 422
    assert client.get("/api/jobs/deferred", params={"limit": 501}).status_code == 422

    moved = client.post(f"/api/jobs/{later.id}/run-now")
    assert moved.status_code == 200 and moved.json()["status"] == "pending"
    assert client.get("/api/jobs/deferred").json()["jobs"] == []
    assert client.post("/api/jobs/777/run-now").status_code == 404

    more = [q.enqueue("digest", run_at=q.now() + timedelta(hours=2)).id for _ in range(3)]
    answer = client.post("/api/jobs/bulk/run-now", json={"limit": 2}).json()
    assert answer == {"changed_count": 2, "ids": more[:2]}
    assert client.post("/api/jobs/bulk/run-now", json={"kind": "never"}).status_code == 422
    assert client.post("/api/jobs/bulk/run-now", json={"limit": 1001}).status_code == 422

    assert client.delete(f"/api/jobs/{later.id}").status_code == 409  # pending: cancel first
    q.cancel(later.id)
    assert client.delete(f"/api/jobs/{later.id}").status_code == 204
    assert client.get(f"/api/jobs/{later.id}").status_code == 404
    assert client.delete(f"/api/jobs/{later.id}").status_code == 404


@pytest.mark.parametrize("role", ["worker", "reader"])
def test_run_now_and_delete_are_for_admins(
    client: TestClient, q: conveyor.Queue, role: str
) -> None:
    later = q.enqueue("digest", run_at=q.now() + timedelta(hours=1)).id
    done = q.enqueue("t").id
    fail_for_good(q, done)
    who = bearer(role)
    assert client.post(f"/api/jobs/{later}/run-now", headers=who).status_code == 403
    assert client.post("/api/jobs/bulk/run-now", json={}, headers=who).status_code == 403
    assert client.delete(f"/api/jobs/{done}", headers=who).status_code == 403
    assert [j["id"] for j in client.get("/api/jobs/deferred", headers=who).json()["jobs"]] == [
        later
    ]
    assert q.get(done) is not None
