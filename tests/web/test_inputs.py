"""Inputs that once answered 500 or slipped through: times at the ends of the calendar,
job ids of thousands of digits, names holding control characters or text direction
overrides, and a queue named like a wildcard."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

import conveyor
from conveyor.errors import InvalidArgument
from tests.web.conftest import bearer, snapshot

HUGE_ID = "9" * 4400  # past the 4,300 digits Python's int() accepts from text
WORKER_ENTRY = {"host": "h", "pid": 1, "queues": [], "concurrency": 1, "version": "v",
                "running": 0, "ttl_seconds": 5}  # fmt: skip


@pytest.mark.parametrize(
    "run_at",
    ["9999-12-31T23:00:00-14:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-00:01"],
)
def test_times_past_the_calendar_are_422(
    client: TestClient, queue: conveyor.Queue, run_at: str
) -> None:
    before = snapshot(queue)
    for path, body in [
        ("/api/jobs", {"task": "t", "run_at": run_at}),
        ("/api/jobs/batch", {"jobs": [{"task": "t", "run_at": run_at}]}),
    ]:
        response = client.post(path, json=body)
        assert response.status_code == 422, response.text
        assert "run_at" in response.json()["error"]["message"]
    listed = client.get("/api/jobs", params={"created_after": run_at})
    assert listed.status_code == 422
    assert snapshot(queue) == before


@pytest.mark.parametrize("run_at", ["9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00+00:00"])
def test_the_first_and_last_times_are_kept(client: TestClient, run_at: str) -> None:
    job = client.post("/api/jobs", json={"task": "t", "run_at": run_at}).json()
    assert datetime.fromisoformat(job["run_at"]) == datetime.fromisoformat(run_at)
    assert client.get(f"/api/jobs/{job['id']}").json()["run_at"] == job["run_at"]


def test_job_ids_of_thousands_of_digits_are_422(client: TestClient, queue: conveyor.Queue) -> None:
    before = snapshot(queue)
    for method, path, body in [
        ("GET", f"/api/jobs/{HUGE_ID}", None),
        ("GET", f"/api/jobs/{HUGE_ID}/wait", None),
        ("GET", f"/api/jobs/{HUGE_ID}/subscribers", None),
        ("POST", f"/api/jobs/{HUGE_ID}/complete", {"claim_id": "c"}),
        ("POST", f"/api/jobs/{HUGE_ID}/cancel", {}),
        ("POST", f"/api/jobs/{HUGE_ID}/claim", {}),
        ("GET", f"/api/jobs?after={HUGE_ID}", None),
        ("GET", f"/api/jobs?limit={HUGE_ID}", None),
    ]:
        response = client.request(method, path, json=body)
        assert response.status_code == 422, (path[:40], response.status_code)
        assert HUGE_ID not in response.text  # the answer does not echo it whole
    assert snapshot(queue) == before


BAD_NAMES = {
    "a newline": "a\nb",
    "DEL": "a\x7fb",
    "a C1 control": "a\x85b",
    "a right-to-left override": "invoice\u202egpj.exe",
    "a left-to-right isolate": "a\u2066b",
    "a right-to-left mark": "a\u200fb",
    "an Arabic letter mark": "a\u061cb",
}


@pytest.mark.parametrize("name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_names_with_controls_or_direction_overrides_are_refused_over_http(
    client: TestClient, queue: conveyor.Queue, name: str
) -> None:
    claim = queue.claim()
    before = snapshot(queue)
    for method, path, body in [
        ("POST", "/api/jobs", {"task": name}),
        ("POST", "/api/jobs", {"task": "t", "queue": name}),
        ("POST", "/api/jobs", {"task": "t", "key": name}),
        ("POST", "/api/jobs", {"task": "t", "group": name}),
        ("POST", "/api/jobs", {"task": "t", "subscriber": name}),
        ("POST", "/api/queues/default/claim", {"worker": name}),
        ("POST", f"/api/queues/{quote(name)}/claim", {}),
        ("GET", "/api/jobs", {"queue": name}),
        ("PUT", f"/api/workers/{quote(name)}", WORKER_ENTRY),
    ]:
        if method == "GET":
            response = client.get(path, params=body)
        else:
            response = client.request(method, path, json=body)
        assert response.status_code == 422, (path, body, response.text)
    assert snapshot(queue) == before and queue.workers() == [] and claim.jobs == []


@pytest.mark.parametrize("name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_names_with_controls_or_direction_overrides_are_refused_by_the_library(
    q: conveyor.Queue, name: str
) -> None:
    for call in (
        lambda: q.enqueue(name),
        lambda: q.enqueue("t", queue=name),
        lambda: q.enqueue("t", key=name),
        lambda: q.enqueue("t", group=name),
        lambda: q.enqueue("t", subscriber=name),
        lambda: q.claim(worker=name),
    ):
        with pytest.raises(InvalidArgument, match="control characters or bidirectional"):
            call()
    assert q.stats().total == 0


def test_a_queue_named_like_a_wildcard_is_a_queue_like_any_other(
    client: TestClient, queue: conveyor.Queue
) -> None:
    """The total of every queue has a place of its own: it never collides with a queue."""
    queue.enqueue_many([{"task": "t"}] * 2, queue="*")
    queue.enqueue("t", queue="other")
    queues = client.get("/api/queues").json()
    assert queues["queues"]["*"]["pending"] == 2
    assert queues["queues"]["other"]["pending"] == 1
    assert queues["total"]["pending"] == 3
    assert client.get("/api/stats", params={"queue": "*"}).json()["pending"] == 2
    metrics = client.get("/metrics", headers=bearer("reader")).text
    pending = {
        s.labels["queue"]: s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "conveyor_jobs" and s.labels["status"] == "pending"
    }
    assert pending == {"*": 2, "other": 1}
