"""Admin endpoints: retry, cancel, reset claims, recover, prune, complete, cancel or fail by
key; counts per task."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

import conveyor


def _job(client: TestClient, **fields: object) -> dict[str, object]:
    body = {"task": "t", **fields}
    job: dict[str, object] = client.post("/api/jobs", json=body).json()
    return job


def test_retry_reopens_a_failed_job_with_attempts_reset(
    client: TestClient, queue: conveyor.Queue
) -> None:
    job = _job(client)
    queue.fail(job["id"], queue.claim().id, "boom", retryable=False)  # type: ignore[arg-type]
    retried = client.post(f"/api/jobs/{job['id']}/retry")
    assert retried.status_code == 200
    assert (retried.json()["status"], retried.json()["attempts"]) == ("pending", 0)


def test_retry_of_a_pending_job_is_409(client: TestClient) -> None:
    job = _job(client)
    response = client.post(f"/api/jobs/{job['id']}/retry")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "invalid_transition"


def test_cancel_then_cancel_again(client: TestClient) -> None:
    job = _job(client)
    assert client.post(f"/api/jobs/{job['id']}/cancel").json()["status"] == "cancelled"
    again = client.post(f"/api/jobs/{job['id']}/cancel")
    assert again.status_code == 409
    assert client.post("/api/jobs/777/cancel").status_code == 404


def test_reset_claims_older_than_minutes(client: TestClient, queue: conveyor.Queue) -> None:
    _job(client)
    queue.claim()
    fresh = client.post("/api/claims/reset", params={"older_than_minutes": 10})
    assert fresh.json() == {"reset_count": 0}
    time.sleep(0.05)
    now = client.post("/api/claims/reset", params={"older_than_minutes": 0})
    assert now.json() == {"reset_count": 1}
    assert client.get("/api/stats").json()["pending"] == 1


def test_reset_claims_requires_the_age(client: TestClient) -> None:
    response = client.post("/api/claims/reset")
    assert response.status_code == 422
    assert "older_than_minutes" in response.json()["error"]["message"]


def test_recover_takes_back_expired_leases(client: TestClient, queue: conveyor.Queue) -> None:
    _job(client)
    queue.claim(lease=0.05)
    time.sleep(0.2)
    assert client.post("/api/recover").json() == {"recovered_count": 1}
    assert client.get("/api/stats").json()["pending"] == 1


def test_prune_removes_old_final_jobs(client: TestClient, queue: conveyor.Queue) -> None:
    done = _job(client)
    queue.complete(done["id"], queue.claim().id)  # type: ignore[arg-type]
    _job(client)
    body = {"older_than_seconds": 0, "statuses": ["completed", "failed"]}
    assert client.post("/api/prune", json=body).json() == {"removed_count": 1}
    assert client.get("/api/stats").json()["total"] == 1


def test_prune_refuses_active_statuses(client: TestClient) -> None:
    response = client.post("/api/prune", json={"older_than_seconds": 0, "statuses": ["pending"]})
    assert response.status_code == 422


def test_complete_by_key_finishes_the_active_job(client: TestClient) -> None:
    job = _job(client, queue="sync", key="book-9")
    response = client.post(
        "/api/queues/sync/complete-by-key", json={"key": "book-9", "result": {"external": 1}}
    )
    assert response.json() == {"completed_count": 1}
    after = client.get(f"/api/jobs/{job['id']}").json()
    assert (after["status"], after["result"]) == ("completed", {"external": 1})
    nothing = client.post("/api/queues/sync/complete-by-key", json={"key": "book-9"})
    assert nothing.json() == {"completed_count": 0}


def test_reset_claims_and_recover_of_some_tasks(client: TestClient, queue: conveyor.Queue) -> None:
    for task in ("books.sync", "books.ocr", "videos"):
        _job(client, task=task)
    queue.claim(limit=3, lease=0.05)
    time.sleep(0.2)
    one = client.post("/api/recover", params={"task": "videos"})
    assert one.json() == {"recovered_count": 1}
    queue.claim(lease=0.05)  # videos again
    reset = client.post(
        "/api/claims/reset", params={"older_than_minutes": 0, "task": "books.sync,books.ocr"}
    )
    assert reset.json() == {"reset_count": 2}
    assert client.get("/api/stats").json()["running"] == 1
    bad = client.post("/api/recover", params={"task": ""})
    assert bad.status_code == 422 and "task" in bad.json()["error"]["message"]


def test_cancel_by_key_fences_out_the_running_jobs_worker(
    client: TestClient, queue: conveyor.Queue
) -> None:
    job = _job(client, queue="sync", key="book-9")
    claim = queue.claim("sync")
    response = client.post("/api/queues/sync/cancel-by-key", json={"key": "book-9"})
    assert response.json() == {"cancelled_count": 1}
    assert client.get(f"/api/jobs/{job['id']}").json()["status"] == "cancelled"
    late = client.post(f"/api/jobs/{job['id']}/complete", json={"claim_id": claim.id})
    assert late.status_code == 409
    again = client.post("/api/queues/sync/cancel-by-key", json={"key": "book-9"})
    assert again.json() == {"cancelled_count": 0}
    assert client.post("/api/queues/sync/cancel-by-key", json={}).status_code == 422


def test_fail_by_key_fails_for_good(client: TestClient) -> None:
    job = _job(client, key="video-3", max_attempts=5)
    response = client.post(
        "/api/queues/default/fail-by-key", json={"key": "video-3", "error": "source deleted"}
    )
    assert response.json() == {"failed_count": 1}
    after = client.get(f"/api/jobs/{job['id']}").json()
    assert (after["status"], after["error"], after["error_kind"]) == (
        "failed", "source deleted", "terminal",
    )  # fmt: skip
    assert [e["error"] for e in after["errors"]] == ["source deleted"]
    for body in ({"key": "video-3"}, {"key": "video-3", "error": ""}, {"error": "x"}):
        assert client.post("/api/queues/default/fail-by-key", json=body).status_code == 422


def test_task_stats_count_per_task(client: TestClient, queue: conveyor.Queue) -> None:
    assert client.get("/api/tasks/stats").json() == {"tasks": {}}
    _job(client, task="books.sync")
    _job(client, task="books.sync", queue="other")
    _job(client, task="books.ocr")
    queue.claim()
    every = client.get("/api/tasks/stats").json()["tasks"]
    assert (every["books.sync"]["running"], every["books.sync"]["pending"]) == (1, 1)
    assert every["books.ocr"]["total"] == 1
    other = client.get("/api/tasks/stats", params={"queue": "other"}).json()["tasks"]
    assert list(other) == ["books.sync"] and other["books.sync"]["pending"] == 1
    assert client.get("/api/tasks/stats", params={"queue": ""}).status_code == 422
