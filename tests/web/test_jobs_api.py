"""Enqueue and read endpoints: the semantics of the Python API over HTTP."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

from fastapi.testclient import TestClient

import conveyor
from tests.web.conftest import bearer


def test_enqueue_returns_201_and_the_job_as_a_top_level_object(client: TestClient) -> None:
    response = client.post(
        "/api/jobs",
        json={"task": "books.sync", "payload": {"book": 7}, "queue": "sync", "priority": -1},
    )
    assert response.status_code == 201
    job = response.json()
    assert job["task"] == "books.sync"
    assert job["payload"] == {"book": 7}
    assert job["queue"] == "sync"
    assert job["priority"] == -1
    assert job["status"] == "pending"
    assert job["deduplicated"] is False
    assert client.get(f"/api/jobs/{job['id']}").json() == job


def test_enqueue_with_an_active_key_returns_200_and_the_existing_job(client: TestClient) -> None:
    first = client.post("/api/jobs", json={"task": "fetch", "key": "url-1", "subscriber": "a"})
    second = client.post("/api/jobs", json={"task": "fetch", "key": "url-1", "subscriber": "b"})
    assert (first.status_code, second.status_code) == (201, 200)
    assert second.json()["id"] == first.json()["id"]
    assert second.json()["deduplicated"] is True
    subscribers = client.get(f"/api/jobs/{first.json()['id']}/subscribers").json()
    assert sorted(subscribers["subscribers"]) == ["a", "b"]


def test_enqueue_on_active_raise_gives_409_naming_the_active_job(client: TestClient) -> None:
    first = client.post("/api/jobs", json={"task": "ocr", "key": "book-1"}).json()
    response = client.post("/api/jobs", json={"task": "ocr", "key": "book-1", "on_active": "raise"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "duplicate_job"
    assert response.json()["error"]["job_id"] == first["id"]


def test_enqueue_cache_ttl_reuses_a_recent_result(
    client: TestClient, queue: conveyor.Queue
) -> None:
    job = client.post("/api/jobs", json={"task": "fetch", "key": "u"}).json()
    claim = queue.claim()
    queue.complete(job["id"], claim.id, {"title": "x"})
    cached = client.post("/api/jobs", json={"task": "fetch", "key": "u", "cache_ttl_seconds": 60})
    assert cached.status_code == 200
    assert cached.json()["result"] == {"title": "x"}
    fresh = client.post("/api/jobs", json={"task": "fetch", "key": "u"})
    assert fresh.status_code == 201
    assert fresh.json()["id"] != job["id"]


def test_enqueue_on_failed_retry_reopens_the_failed_job(
    client: TestClient, queue: conveyor.Queue
) -> None:
    job = client.post("/api/jobs", json={"task": "fetch", "key": "u"}).json()
    queue.fail(job["id"], queue.claim().id, "boom", retryable=False)
    again = client.post("/api/jobs", json={"task": "fetch", "key": "u", "on_failed": "retry"})
    assert again.status_code == 200
    assert again.json()["id"] == job["id"]
    assert again.json()["status"] == "pending"
    assert again.json()["attempts"] == 0


def test_enqueue_run_at_schedules_the_job(client: TestClient) -> None:
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    job = client.post("/api/jobs", json={"task": "t", "run_at": later}).json()
    assert datetime.fromisoformat(job["run_at"]) > datetime.now(timezone.utc)
    claim = client.post("/api/queues/default/claim", json={"limit": 1}).json()
    assert claim["jobs"] == []
    assert client.get("/api/stats").json()["scheduled"] == 1


def test_batch_enqueue_takes_jobs_and_returns_them_in_order(client: TestClient) -> None:
    items = [{"task": "t", "payload": {"n": n}} for n in range(5)]
    items.append({"task": "t", "queue": "other", "key": "k"})
    response = client.post("/api/jobs/batch", json={"jobs": items, "queue": "main"})
    assert response.status_code == 201
    jobs = response.json()["jobs"]
    assert [j["payload"] for j in jobs[:5]] == [{"n": n} for n in range(5)]
    assert [j["queue"] for j in jobs] == ["main"] * 5 + ["other"]
    assert client.get("/api/stats").json()["pending"] == 6


def test_batch_enqueue_is_all_or_nothing(client: TestClient) -> None:
    items = [{"task": "t"}, {"task": "t", "payload": float("inf")}]
    body = json.dumps({"jobs": items}).encode()  # Python writes inf as Infinity
    response = client.post(
        "/api/jobs/batch", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert "items[1]" in response.json()["error"]["message"]
    assert client.get("/api/stats").json()["total"] == 0


def test_list_filters_and_pages(client: TestClient) -> None:
    for n in range(5):
        client.post("/api/jobs", json={"task": "t", "queue": "a" if n % 2 else "b", "key": f"k{n}"})
    all_jobs = client.get("/api/jobs").json()["jobs"]
    assert [j["id"] for j in all_jobs] == sorted(j["id"] for j in all_jobs)
    assert len(all_jobs) == 5
    only_a = client.get("/api/jobs", params={"queue": "a"}).json()["jobs"]
    assert {j["queue"] for j in only_a} == {"a"} and len(only_a) == 2
    keyed = client.get("/api/jobs", params={"key": "k3"}).json()["jobs"]
    assert [j["key"] for j in keyed] == ["k3"]
    page1 = client.get("/api/jobs", params={"limit": 2}).json()["jobs"]
    page2 = client.get("/api/jobs", params={"limit": 2, "after": page1[-1]["id"]}).json()["jobs"]
    assert [j["id"] for j in page1 + page2] == [j["id"] for j in all_jobs[:4]]
    newest = client.get("/api/jobs", params={"newest_first": "true", "limit": 1}).json()["jobs"]
    assert newest[0]["id"] == all_jobs[-1]["id"]
    pending = client.get("/api/jobs", params={"status": "running"}).json()["jobs"]
    assert pending == []


def test_latest_returns_the_newest_job_for_a_key_or_404(
    client: TestClient, queue: conveyor.Queue
) -> None:
    first = client.post("/api/jobs", json={"task": "t", "key": "k"}).json()
    queue.cancel(first["id"])
    second = client.post("/api/jobs", json={"task": "t", "key": "k"}).json()
    latest = client.get("/api/jobs/latest", params={"key": "k"})
    assert latest.json()["id"] == second["id"]
    missing = client.get("/api/jobs/latest", params={"key": "nope", "queue": "default"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_get_unknown_job_is_a_404_envelope(client: TestClient) -> None:
    response = client.get("/api/jobs/999")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "job 999 does not exist"}}


def test_wait_returns_once_the_job_is_final(client: TestClient, queue: conveyor.Queue) -> None:
    job = client.post("/api/jobs", json={"task": "t"}).json()
    claim = queue.claim()

    def finish() -> None:
        time.sleep(0.3)
        queue.complete(job["id"], claim.id, {"ok": True})

    threading.Thread(target=finish).start()
    waited = client.get(f"/api/jobs/{job['id']}/wait", params={"timeout": 20})
    assert waited.status_code == 200
    assert waited.json()["status"] == "completed"
    assert waited.json()["result"] == {"ok": True}


def test_wait_times_out_with_the_job_as_it_is(client: TestClient) -> None:
    job = client.post("/api/jobs", json={"task": "t"}).json()
    waited = client.get(f"/api/jobs/{job['id']}/wait", params={"timeout": 0.2})
    assert waited.status_code == 200
    assert waited.json()["status"] == "pending"


def test_wait_on_unknown_job_is_404(client: TestClient) -> None:
    assert client.get("/api/jobs/12345/wait", params={"timeout": 1}).status_code == 404


def test_reader_can_read_but_not_enqueue(client: TestClient) -> None:
    client.post("/api/jobs", json={"task": "t"})
    assert client.get("/api/jobs", headers=bearer("reader")).status_code == 200
    refused = client.post("/api/jobs", json={"task": "t"}, headers=bearer("reader"))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
