"""Flow control over HTTP as an operator's script would use it: admins pause, resume and
set limits; readers see settings and schedules; bad input is a JSON 4xx, never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

import conveyor
from conveyor.maintenance import Scheduler
from conveyor.web import create_app
from tests.web.conftest import TOKENS, bearer


@pytest.fixture
def http(q: conveyor.Queue) -> Iterator[TestClient]:
    with TestClient(create_app(q, tokens=TOKENS)) as client:
        yield client


def test_admins_pause_resume_and_limit_a_queue(http: TestClient, q: conveyor.Queue) -> None:
    q.enqueue("t", queue="mail")
    paused = http.post("/api/queues/mail/pause", headers=bearer("admin"))
    assert paused.status_code == 200 and paused.json()["paused"] is True
    assert q.claim("mail").jobs == []  # every worker's next claim sees it
    limits = {"max_running": 2, "rate": {"limit": 10, "per": 1}, "group_rate": {"limit": 3}}
    put = http.put("/api/queues/mail/limits", json=limits, headers=bearer("admin"))
    assert put.status_code == 200
    body = put.json()
    assert body["paused"] is True and body["max_running"] == 2  # pausing kept, limits set
    assert body["rate"] == {"limit": 10, "per": 1.0} and body["group_rate"]["per"] == 1.0
    shown = http.get("/api/queues/settings", headers=bearer("reader")).json()["queues"]
    assert shown["mail"]["max_running"] == 2
    resumed = http.post("/api/queues/mail/resume", headers=bearer("admin"))
    assert resumed.json()["paused"] is False and len(q.claim("mail").jobs) == 1


@pytest.mark.parametrize("role", ["worker", "reader"])
def test_only_admins_change_flow_control(http: TestClient, q: conveyor.Queue, role: str) -> None:
    for method, path in (("POST", "/api/queues/mail/pause"), ("PUT", "/api/queues/mail/limits")):
        response = http.request(method, path, json={}, headers=bearer(role))
        assert response.status_code == 403 and response.json()["error"]["code"]
    assert http.post("/api/queues/mail/pause").status_code == 401
    assert q.queue_settings() == {}


@pytest.mark.parametrize(
    "body",
    [
        {"max_running": 0},
        {"max_running": "3"},
        {"rate": {"limit": 0}},
        {"rate": {"limit": 5, "per": -1}},
        {"rate": "10/s"},
        {"group_max_running": 10**9},
        {"surprise": 1},
    ],
)
def test_bad_limits_are_refused_and_change_nothing(
    http: TestClient, q: conveyor.Queue, body: object
) -> None:
    response = http.put("/api/queues/mail/limits", json=body, headers=bearer("admin"))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] and error["message"]
    assert q.queue_settings() == {}


def test_readers_list_the_schedules_workers_declared(http: TestClient, q: conveyor.Queue) -> None:
    app = conveyor.App(q)
    app.periodic(every=timedelta(minutes=5), name="digest")(app.task(name="mail.digest")(
        lambda ctx: None
    ))  # fmt: skip
    Scheduler(q, app.schedules.values()).run_once()
    response = http.get("/api/schedules", headers=bearer("reader"))
    assert response.status_code == 200
    [digest] = response.json()["schedules"]
    assert digest["name"] == "digest" and digest["spec"] == "every 5m"
    assert digest["task"] == "mail.digest" and digest["next_slot"] > digest["last_slot"]
