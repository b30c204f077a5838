"""Statistics, metrics, health, dashboard and the OpenAPI document."""

from __future__ import annotations

import logging
import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

import conveyor
from conveyor.web import create_app
from tests.web.conftest import LOCAL, bearer


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
        head = anonymous.head("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["schema_version"] == app.state.conveyor.queue.latest_schema_version
    assert (head.status_code, head.content) == (200, b"")


def test_healthz_is_503_while_the_schema_is_missing_or_behind(db_url: str) -> None:
    queue = conveyor.connect(db_url, migrate=False)
    try:
        with TestClient(create_app(queue, tokens={}), base_url=LOCAL) as c:
            missing = c.get("/healthz")
            assert missing.status_code == 503
            assert missing.json()["error"]["code"] == "schema_out_of_date"
            assert "no conveyor schema" in missing.json()["error"]["message"]
            assert c.head("/healthz").status_code == 503
            queue.migrate(target=2)
            behind = c.get("/healthz")
            assert behind.status_code == 503
            assert "schema version 2" in behind.json()["error"]["message"]
            assert "conveyor migrate" in behind.json()["error"]["message"]
            queue.migrate()
            assert c.get("/healthz").status_code == 200
    finally:
        if queue.schema_version():
            queue.drop_schema()
        queue.close()


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


def test_dashboard_is_a_page_with_its_own_script_and_style(app: FastAPI) -> None:
    with TestClient(app) as anonymous:
        page = anonymous.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/console/app.js' in page.text
    assert "<script>" not in page.text and "<style>" not in page.text  # nothing inline
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


def test_the_docs_page_and_its_files_come_from_the_server_itself(app: FastAPI) -> None:
    """Swagger UI works offline: the page names no other host, and its files are served
    from the package."""
    with TestClient(app) as anonymous:
        page = anonymous.get("/docs")
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all("//" not in source for source in sources)
        assert "<script>" not in page.text and "<style" not in page.text
        for source in sources:
            asset = anonymous.get(f"/{source}")
            assert asset.status_code == 200, source
            assert len(asset.content) > 0
        init = anonymous.get("/docs/assets/init.js").text
        assert '"openapi.json"' in init and "validatorUrl: null" in init


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
    assert response.headers["x-content-type-options"] == "nosniff"  # even on a 500
    assert "secret internal detail" not in response.text
    logged = [r for r in caplog.records if r.exc_info and "unhandled error" in r.getMessage()]
    assert logged and "secret internal detail" in str(logged[0].exc_info[1])  # type: ignore[index]


def test_a_schedule_that_never_ran_has_no_last_run(
    client: TestClient, queue: conveyor.Queue
) -> None:
    from datetime import timedelta

    now = queue.now()
    queue.save_schedule("hourly", task="report", queue="cron", spec="every 1h",
                        first_slot=now, next_slot=now + timedelta(hours=1))  # fmt: skip
    [listed] = client.get("/api/schedules", headers=bearer("reader")).json()["schedules"]
    assert listed["last_slot"] is not None  # the moment it was declared
    assert listed["last_run"] is None
