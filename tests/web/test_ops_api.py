"""Statistics, metrics, health, dashboard and the OpenAPI document."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

import conveyor
from tests.web.conftest import bearer


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_stats_of_all_queues_and_of_one(client: TestClient, queue: conveyor.Queue) -> None:
    client.post("/api/jobs", json={"task": "t", "queue": "a"})
    client.post("/api/jobs", json={"task": "t", "queue": "b"})
    queue.claim("a")
    total = client.get("/api/stats").json()
    assert (total["pending"], total["running"], total["total"]) == (1, 1, 2)
    assert total["oldest_pending_at"] is not None
    only_b = client.get("/api/stats", params={"queue": "b"}).json()
    assert (only_b["pending"], only_b["running"]) == (1, 0)
    answer = client.get("/api/queues").json()
    queues = answer["queues"]
    assert set(queues) == {"a", "b"}
    assert queues["a"]["running"] == 1
    assert answer["total"]["total"] == 2


def test_metrics_count_what_went_through_the_server(client: TestClient) -> None:
    client.post("/api/jobs/batch", json={"jobs": [{"task": "t"}] * 3, "queue": "q"})
    claim = client.post("/api/queues/q/claim", json={"limit": 3}).json()
    a, b, c = (j["id"] for j in claim["jobs"])
    cid = claim["claim_id"]
    client.post(f"/api/jobs/{a}/complete", json={"claim_id": cid})
    client.post(f"/api/jobs/{b}/fail", json={"claim_id": cid, "error": "x", "retryable": False})
    client.post(f"/api/jobs/{c}/fail", json={"claim_id": cid, "error": "x", "delay_seconds": 0})
    response = client.get("/metrics", headers=bearer("reader"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)
    q = (("queue", "q"),)
    assert samples[("conveyor_jobs_enqueued_total", q)] == 3
    assert samples[("conveyor_jobs_claimed_total", q)] == 3
    assert samples[("conveyor_jobs_completed_total", q)] == 1
    assert samples[("conveyor_jobs_failed_total", q)] == 1
    assert samples[("conveyor_jobs_retried_total", q)] == 1
    assert samples[("conveyor_claim_latency_seconds_count", q)] == 3
    assert samples[("conveyor_end_to_end_latency_seconds_count",
                    (("queue", "q"), ("status", "completed")))] == 1  # fmt: skip
    assert samples[("conveyor_jobs", (("queue", "q"), ("status", "pending")))] == 1
    assert samples[("conveyor_jobs", (("queue", "q"), ("status", "failed")))] == 1
    assert samples[("conveyor_database_up", ())] == 1


def test_healthz_needs_no_token_and_reports_the_database_clock(app: FastAPI) -> None:
    with TestClient(app) as anonymous:
        response = anonymous.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_healthz_is_503_when_the_database_is_gone(
    app: FastAPI, queue: conveyor.Queue, caplog: pytest.LogCaptureFixture
) -> None:
    queue.close()
    with caplog.at_level(logging.WARNING, "conveyor.web"), TestClient(app) as anonymous:
        response = anonymous.get("/healthz")
        metrics = anonymous.get("/metrics", headers=bearer("reader"))
    assert response.status_code == 503
    assert response.json()["error"] == {
        "code": "database_error",
        "message": "the database is unavailable; try again later",
    }
    assert _samples(metrics.text)[("conveyor_database_up", ())] == 0
    assert any("database error on GET /healthz" in r.getMessage() for r in caplog.records)


def test_dashboard_is_a_self_contained_page(app: FastAPI) -> None:
    with TestClient(app) as anonymous:
        page = anonymous.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "/api/queues" in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no external assets


def test_openapi_documents_every_design_endpoint(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    routes = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    expected = {
        ("POST", "/api/jobs"), ("POST", "/api/jobs/batch"), ("GET", "/api/jobs"),
        ("GET", "/api/jobs/latest"), ("GET", "/api/jobs/{job_id}"),
        ("GET", "/api/jobs/{job_id}/wait"), ("POST", "/api/queues/{queue}/claim"),
        ("POST", "/api/jobs/{job_id}/complete"), ("POST", "/api/jobs/{job_id}/fail"),
        ("POST", "/api/jobs/{job_id}/heartbeat"), ("POST", "/api/jobs/{job_id}/progress"),
        ("POST", "/api/jobs/{job_id}/retry"), ("POST", "/api/jobs/{job_id}/cancel"),
        ("DELETE", "/api/claims/{claim_id}"), ("POST", "/api/claims/reset"),
        ("POST", "/api/prune"), ("GET", "/api/stats"), ("GET", "/metrics"),
        ("GET", "/healthz"), ("GET", "/"),
        # batches for workers, and more of the Python API
        ("POST", "/api/batch/complete"), ("POST", "/api/batch/fail"),
        ("POST", "/api/batch/heartbeat"), ("POST", "/api/claims/{claim_id}/ack"),
        ("POST", "/api/recover"), ("POST", "/api/queues/{queue}/complete-by-key"),
        ("GET", "/api/queues"), ("GET", "/api/jobs/{job_id}/subscribers"),
        ("POST", "/api/notifications/take"), ("POST", "/api/notifications/mark"),
    }  # fmt: skip
    assert expected <= routes  # every route is listed with its role in test_auth.py
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    assert client.get("/docs").status_code == 200


def test_an_unexpected_failure_is_logged_not_returned(
    app: FastAPI, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("secret internal detail")

    app.add_api_route("/broken", broken)
    with TestClient(app, raise_server_exceptions=False) as anonymous:
        response = anonymous.get("/broken")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"code": "internal_error", "message": "the server failed; see its log"}
    }
    assert "secret internal detail" not in response.text
    logged = [r for r in caplog.records if r.exc_info and "unhandled error" in r.getMessage()]
    assert logged and "secret internal detail" in str(logged[0].exc_info[1])  # type: ignore[index]
