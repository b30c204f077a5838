"""Retention policies over HTTP: set, list, clear; bad input is a 4xx with the error
envelope, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient


def test_policies_are_set_listed_and_cleared(client: TestClient) -> None:
    put = client.put(
        "/api/retention",
        json={"status": "completed", "keep_seconds": 3600, "queue": "mail", "retire_keys": True},
    )
    assert put.status_code == 200
    assert put.json()["keep_seconds"] == 3600 and put.json()["retire_keys"] is True
    forever = client.put("/api/retention", json={"status": "failed", "keep_seconds": None})
    assert forever.json()["keep_seconds"] is None and forever.json()["queue"] is None
    listed = client.get("/api/retention").json()["policies"]
    assert [(p["status"], p["queue"]) for p in listed] == [("completed", "mail"), ("failed", None)]
    cleared = client.post("/api/retention/clear", json={"queue": "mail"})
    assert cleared.json() == {"removed_count": 1}
    assert len(client.get("/api/retention").json()["policies"]) == 1


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("PUT", "/api/retention", {"status": "pending", "keep_seconds": 1}, 422),
        ("PUT", "/api/retention", {"status": "completed"}, 422),  # keep_seconds required
        ("PUT", "/api/retention", {"status": "completed", "keep_seconds": -1}, 422),
        ("PUT", "/api/retention", {"status": "completed", "keep_seconds": 1e12}, 422),
        ("PUT", "/api/retention", {"status": "completed", "keep_seconds": 1, "queue": ""}, 422),
        ("PUT", "/api/retention", {"status": "completed", "keep_seconds": 1, "archive": "x"}, 422),
        ("PUT", "/api/retention", {"status": "completed", "keep_seconds": 1, "extra": 1}, 422),
        ("PUT", "/api/retention", {"status": "completed", "keep_seconds": 1,
                                   "archive": "task:" + "t" * 300}, 422),
        ("POST", "/api/retention/clear", {"status": "running"}, 422),
        ("POST", "/api/retention/prune", {"ids": [0]}, 422),
        ("POST", "/api/retention/prune", {"ids": list(range(1, 1002))}, 422),
        ("GET", "/api/retention/expired?limit=0", None, 422),
        ("GET", "/api/retention/expired?archive=s3:x", None, 422),
    ],
)  # fmt: skip
def test_bad_input_is_a_4xx_envelope(
    client: TestClient, method: str, path: str, body: Any, status: int
) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] and error["message"]


def test_a_file_archive_is_never_named_over_http(client: TestClient) -> None:
    """A path on the workers' machines is not for a remote caller to choose."""
    body = {"status": "failed", "keep_seconds": 60, "archive": "file:/tmp/pruned.jsonl"}
    answer = client.put("/api/retention", json=body)
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_argument"
    assert client.get("/api/retention").json()["policies"] == []
    task = client.put("/api/retention", json={**body, "archive": "task:archive"})
    assert task.status_code == 200


def test_expired_jobs_and_prune_over_http(client: TestClient) -> None:
    job = client.post("/api/jobs", json={"task": "t", "queue": "a"}).json()
    claim = client.post("/api/queues/a/claim", json={}).json()
    done = client.post(
        f"/api/jobs/{job['id']}/complete", json={"claim_id": claim["claim_id"], "result": 1}
    )
    assert done.status_code == 200
    client.put("/api/retention", json={"status": "completed", "keep_seconds": 0})
    expired = client.get("/api/retention/expired").json()["expired"]
    assert [e["job"]["id"] for e in expired] == [job["id"]]
    assert expired[0]["policy"]["status"] == "completed"
    pruned = client.post("/api/retention/prune", json={"ids": [job["id"]]})
    assert pruned.json() == {"removed_count": 1}
    assert client.get(f"/api/jobs/{job['id']}").status_code == 404
