"""Worker endpoints: claim, report, batches, ack and release."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.web.conftest import bearer

WORKER = bearer("worker")


def _enqueue(client: TestClient, count: int, queue: str = "default") -> list[int]:
    jobs = client.post(
        "/api/jobs/batch", json={"jobs": [{"task": "t"}] * count, "queue": queue}
    ).json()["jobs"]
    return [j["id"] for j in jobs]


def _claim(client: TestClient, queue: str = "default", **body: Any) -> dict[str, Any]:
    response = client.post(f"/api/queues/{queue}/claim", json=body, headers=WORKER)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_claim_returns_a_claim_id_the_jobs_and_the_remaining_count(client: TestClient) -> None:
    ids = _enqueue(client, 5, "sync")
    claim = _claim(client, "sync", limit=3, lease_seconds=60, worker="w1")
    assert claim["queue"] == "sync"
    assert [j["id"] for j in claim["jobs"]] == ids[:3]
    assert claim["remaining"] == 2
    assert claim["acked"] == 0
    assert {j["status"] for j in claim["jobs"]} == {"running"}
    assert {j["claim_id"] for j in claim["jobs"]} == {claim["claim_id"]}
    assert {j["worker"] for j in claim["jobs"]} == {"w1"}


def test_claim_with_ack_completes_the_previous_batch_first(client: TestClient) -> None:
    _enqueue(client, 4, "sync")
    first = _claim(client, "sync", limit=2)
    second = _claim(client, "sync", limit=2, ack=first["claim_id"])
    assert second["acked"] == 2
    assert second["remaining"] == 0
    for job in first["jobs"]:
        assert client.get(f"/api/jobs/{job['id']}").json()["status"] == "completed"
    third = _claim(client, "sync", limit=2, ack=second["claim_id"])
    assert (third["acked"], third["jobs"], third["remaining"]) == (2, [], 0)


def test_claim_without_counting_leaves_remaining_null(client: TestClient) -> None:
    _enqueue(client, 2)
    assert _claim(client, count_remaining=False)["remaining"] is None


def test_complete_stores_the_result(client: TestClient) -> None:
    _enqueue(client, 1)
    claim = _claim(client)
    job_id = claim["jobs"][0]["id"]
    done = client.post(
        f"/api/jobs/{job_id}/complete",
        json={"claim_id": claim["claim_id"], "result": {"path": "/x.mp4"}},
        headers=WORKER,
    )
    assert done.status_code == 200
    assert done.json()["status"] == "completed"
    assert done.json()["result"] == {"path": "/x.mp4"}


def test_a_stale_claim_gets_409_and_changes_nothing(client: TestClient) -> None:
    _enqueue(client, 1)
    old = _claim(client)
    job_id = old["jobs"][0]["id"]
    client.delete(f"/api/claims/{old['claim_id']}", headers=WORKER)
    new = _claim(client)
    for verb, body in [
        ("complete", {"result": 1}),
        ("fail", {"error": "x"}),
        ("heartbeat", {}),
        ("progress", {"total": 3}),
    ]:
        response = client.post(
            f"/api/jobs/{job_id}/{verb}", json={"claim_id": old["claim_id"], **body}, headers=WORKER
        )
        assert response.status_code == 409, verb
        assert response.json()["error"]["code"] == "stale_claim"
    job = client.get(f"/api/jobs/{job_id}").json()
    assert (job["status"], job["claim_id"]) == ("running", None)  # a secret of its holder
    assert job["claim_ref"] == new["jobs"][0]["claim_ref"] != old["jobs"][0]["claim_ref"]


def test_reports_on_an_unknown_job_are_404(client: TestClient) -> None:
    response = client.post("/api/jobs/4242/complete", json={"claim_id": "c"}, headers=WORKER)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_completing_twice_is_an_invalid_transition(client: TestClient) -> None:
    _enqueue(client, 1)
    claim = _claim(client)
    path = f"/api/jobs/{claim['jobs'][0]['id']}/complete"
    client.post(path, json={"claim_id": claim["claim_id"]}, headers=WORKER)
    again = client.post(path, json={"claim_id": claim["claim_id"]}, headers=WORKER)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "invalid_transition"


def test_fail_retryable_goes_back_to_pending_then_fails_for_good(client: TestClient) -> None:
    client.post("/api/jobs", json={"task": "t", "max_attempts": 2})
    claim = _claim(client)
    job_id = claim["jobs"][0]["id"]
    body = {"claim_id": claim["claim_id"], "error": "timeout", "delay_seconds": 0}
    retried = client.post(f"/api/jobs/{job_id}/fail", json=body, headers=WORKER).json()
    assert (retried["status"], retried["error"], retried["error_kind"]) == (
        "pending", "timeout", "retryable"
    )  # fmt: skip
    claim = _claim(client)
    body = {"claim_id": claim["claim_id"], "error": "timeout again"}
    final = client.post(f"/api/jobs/{job_id}/fail", json=body, headers=WORKER).json()
    assert (final["status"], final["attempts"]) == ("failed", 2)


def test_fail_terminal_is_final_at_once(client: TestClient) -> None:
    _enqueue(client, 1)
    claim = _claim(client)
    job_id = claim["jobs"][0]["id"]
    body = {"claim_id": claim["claim_id"], "error": "bad input", "retryable": False}
    job = client.post(f"/api/jobs/{job_id}/fail", json=body, headers=WORKER).json()
    assert (job["status"], job["error_kind"]) == ("failed", "terminal")


def test_heartbeat_extends_the_lease(client: TestClient) -> None:
    _enqueue(client, 1)
    claim = _claim(client, lease_seconds=5)
    job = claim["jobs"][0]
    beat = client.post(
        f"/api/jobs/{job['id']}/heartbeat",
        json={"claim_id": claim["claim_id"], "extend_seconds": 3600},
        headers=WORKER,
    ).json()
    assert beat["lease_expires_at"] > job["lease_expires_at"]
    assert beat["heartbeat_at"] is not None


def test_progress_records_absolute_values_and_keeps_unsent_fields(client: TestClient) -> None:
    _enqueue(client, 1)
    claim = _claim(client)
    path = f"/api/jobs/{claim['jobs'][0]['id']}/progress"
    first = {"claim_id": claim["claim_id"], "total": 300, "completed": 10, "checkpoint": "p10"}
    client.post(path, json=first, headers=WORKER)
    job = client.post(
        path, json={"claim_id": claim["claim_id"], "completed": 11, "detail": {"page": 11}},
        headers=WORKER,
    ).json()  # fmt: skip
    assert job["progress"] == {
        "total": 300, "completed": 11, "failed": None, "current": None,
        "checkpoint": "p10", "detail": {"page": 11},
    }  # fmt: skip


def test_batch_complete_fail_and_heartbeat_leave_out_stale_items(client: TestClient) -> None:
    _enqueue(client, 4)
    claim = _claim(client, limit=4)
    cid = claim["claim_id"]
    a, b, c, d = (j["id"] for j in claim["jobs"])
    beats = client.post(
        "/api/batch/heartbeat",
        json={"items": [{"job_id": a, "claim_id": cid}, {"job_id": b, "claim_id": "nope"}]},
        headers=WORKER,
    ).json()["jobs"]
    assert [j["id"] for j in beats] == [a]
    done = client.post(
        "/api/batch/complete",
        json={"items": [{"job_id": a, "claim_id": cid, "result": 1},
                        {"job_id": b, "claim_id": cid, "result": 2},
                        {"job_id": c, "claim_id": "stale", "result": 3}]},
        headers=WORKER,
    ).json()["jobs"]  # fmt: skip
    assert sorted((j["id"], j["result"]) for j in done) == [(a, 1), (b, 2)]
    failed = client.post(
        "/api/batch/fail",
        json={"items": [{"job_id": c, "claim_id": cid, "error": "e", "retryable": False},
                        {"job_id": a, "claim_id": cid, "error": "late"}]},
        headers=WORKER,
    ).json()["jobs"]  # fmt: skip
    assert [(j["id"], j["status"]) for j in failed] == [(c, "failed")]
    assert client.get(f"/api/jobs/{d}").json()["status"] == "running"


def test_ack_completes_every_running_job_of_a_claim(client: TestClient) -> None:
    _enqueue(client, 3)
    claim = _claim(client, limit=3)
    acked = client.post(f"/api/claims/{claim['claim_id']}/ack", headers=WORKER)
    assert acked.json() == {"acked_count": 3}
    assert client.get("/api/stats").json()["completed"] == 3


def test_release_puts_a_claims_jobs_back_to_pending(client: TestClient) -> None:
    _enqueue(client, 2)
    claim = _claim(client, limit=2)
    released = client.delete(f"/api/claims/{claim['claim_id']}")
    assert released.json() == {"reset_count": 2}
    assert client.delete(f"/api/claims/{claim['claim_id']}").json() == {"reset_count": 0}
    stats = client.get("/api/stats").json()
    assert (stats["pending"], stats["running"]) == (2, 0)


def test_claim_ids_with_url_characters_are_path_segments(client: TestClient) -> None:
    assert client.delete("/api/claims/a%3Fb%23c").json() == {"reset_count": 0}
    assert client.post("/api/claims/%20/ack", headers=WORKER).json() == {"acked_count": 0}
    # The router decodes %2F before matching: such an id names no route (no claim id
    # conveyor issues contains a slash).
    slash = client.delete("/api/claims/a%2Fb")
    assert (slash.status_code, slash.json()["error"]["code"]) == (404, "not_found")
