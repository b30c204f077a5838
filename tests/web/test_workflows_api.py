"""Workflows over HTTP: the roles each route needs, JSON errors, and the answers."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

import conveyor
from tests.web.conftest import bearer

BOOK: dict[str, Any] = {
    "label": "book-42",
    "steps": [
        {"name": "extract", "task": "books.extract", "payload": {"book": 42}},
        {"name": "page-1", "task": "books.ocr", "payload": {"page": 1}, "after": ["extract"]},
        {"name": "page-2", "task": "books.ocr", "payload": {"page": 2}, "after": ["extract"]},
        {"name": "done", "task": "books.finalize", "after": ["page-1", "page-2"]},
        {"task": "books.notify", "after": ["done"], "on_dependency_failure": "run"},
    ],
}


def test_a_worker_enqueues_a_run_and_a_reader_reads_it(client: TestClient) -> None:
    made = client.post("/api/workflows", json=BOOK, headers=bearer("worker"))
    assert made.status_code == 201, made.text
    run = made.json()
    assert run["label"] == "book-42" and run["status"] == "running" and run["total"] == 5
    steps = {j["step"]: j for j in run["jobs"]}
    assert list(steps) == ["extract", "page-1", "page-2", "done", "notify"]
    assert steps["done"]["depends_on"] == [steps["page-1"]["id"], steps["page-2"]["id"]]
    assert {j["workflow_id"] for j in run["jobs"]} == {run["id"]}
    read = client.get(f"/api/workflows/{run['id']}", headers=bearer("reader"))
    assert read.status_code == 200 and read.json()["counts"]["pending"] == 5
    listed = client.get("/api/workflows", headers=bearer("reader")).json()["workflows"]
    assert [(w["id"], w["status"], w["total"]) for w in listed] == [(run["id"], "running", 5)]
    parents = client.get(f"/api/jobs/{steps['done']['id']}/parents", headers=bearer("reader"))
    assert [j["step"] for j in parents.json()["jobs"]] == ["page-1", "page-2"]


def test_each_route_needs_its_role(client: TestClient) -> None:
    assert client.post("/api/workflows", json=BOOK, headers=bearer("reader")).status_code == 403
    run_id = client.post("/api/workflows", json=BOOK).json()["id"]
    for action in ("cancel", "retry"):
        refused = client.post(f"/api/workflows/{run_id}/{action}", headers=bearer("worker"))
        assert refused.status_code == 403
    assert client.get("/api/workflows", headers={"Authorization": "Bearer nope"}).status_code == 401
    cancelled = client.post(f"/api/workflows/{run_id}/cancel", headers=bearer("admin"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    retried = client.post(f"/api/workflows/{run_id}/retry", headers=bearer("admin"))
    assert retried.status_code == 200 and retried.json()["status"] == "cancelled"


def test_bad_runs_are_refused_with_json_errors(client: TestClient, queue: conveyor.Queue) -> None:
    cases: list[tuple[Any, int]] = [
        ({"steps": []}, 422),
        ({"steps": [{"task": "a", "after": ["nowhere"]}]}, 422),
        ({"steps": [{"task": "a"}, {"task": "b", "name": "a"}]}, 422),
        ({"steps": [{"task": "a", "colour": "red"}]}, 422),
        ({"steps": [{"task": "a", "priority": "high"}]}, 422),
        ({"steps": [{"task": "a", "on_dependency_failure": "maybe"}]}, 422),
    ]
    for body, status in cases:
        response = client.post("/api/workflows", json=body)
        assert response.status_code == status, (body, response.text)
        assert set(response.json()["error"]) >= {"code", "message"}
    queue.enqueue("other", key="taken")
    keyed = {"steps": [{"task": "a"}, {"task": "b", "key": "taken"}]}
    conflict = client.post("/api/workflows", json=keyed)
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "duplicate_job"
    assert queue.workflows() == [] and queue.stats().total == 1
    missing = client.get("/api/workflows/424242")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "workflow_not_found"
    assert client.post("/api/workflows/424242/retry").status_code == 404
    assert client.get("/api/workflows/0").status_code == 422


def test_runs_are_filtered_by_status_and_label(client: TestClient) -> None:
    first = client.post("/api/workflows", json=BOOK).json()["id"]
    second = client.post("/api/workflows", json={**BOOK, "label": "book-43"}).json()["id"]
    client.post(f"/api/workflows/{first}/cancel")

    def listed(**params: Any) -> list[int]:
        answer = client.get("/api/workflows", params=params, headers=bearer("reader"))
        assert answer.status_code == 200, answer.text
        return [w["id"] for w in answer.json()["workflows"]]

    assert listed(status="cancelled") == [first]
    assert listed(status="running") == [second]
    assert listed(label="book-43") == [second]
    assert listed(label="book-42", status="running") == []
    for bad in ({"status": "pending"}, {"label": "x" * 201}, {"status": ""}):
        refused = client.get("/api/workflows", params=bad, headers=bearer("reader"))
        assert refused.status_code == 422, (bad, refused.text)
        assert refused.json()["error"]["code"] in {"invalid_argument", "validation_error"}
