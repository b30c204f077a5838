"""Attacks on ``conveyor serve`` found by an outside audit, each sent as the audit sent
it (scaled down where only the bound matters), through the app in process: on SQLite
and PostgreSQL where the database is involved. The attacks that need real sockets are
in ``test_serve_hostile.py``."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute, Mount, Route

import conveyor
from conveyor.web import Limits, create_app
from conveyor.web.guard import DISCARDED_BODY_BYTES
from tests.web.conftest import TOKENS, bearer, snapshot

ROOT = Path(__file__).resolve().parents[2]
JSON = {"Content-Type": "application/json"}
WRONG = {"Authorization": "Bearer guess-guess-0001"}
OTHER_WORKER = "worker-secret-0002"
WORKER_ENTRY = {"host": "h", "pid": 1, "queues": ["q"], "concurrency": 1, "version": "1",
                "running": 0, "ttl_seconds": 60}  # fmt: skip


def _app(db_url: str, **limits: int | float) -> FastAPI:
    tokens = {**TOKENS, OTHER_WORKER: "worker"}
    return create_app(db_url, tokens=tokens, limits=Limits(**limits))  # type: ignore[arg-type]


def _error(answer: object) -> str:
    return str(answer.json()["error"]["code"])  # type: ignore[attr-defined]


# -- 1. wrong tokens -------------------------------------------------------------------
def test_wrong_tokens_on_whoami_are_locked_out(db_url: str) -> None:
    with TestClient(_app(db_url)) as c:
        statuses = [c.get("/api/whoami", headers=WRONG).status_code for _ in range(8)]
        assert statuses[:5] == [401] * 5
        assert statuses[-1] == 429
        assert c.get("/api/whoami", headers=bearer("reader")).status_code == 429


def test_once_locked_out_every_route_that_takes_a_token_refuses(db_url: str) -> None:
    """Locked out by guesses on one route, the address gets 429 on every other route
    that needs a token, whatever the token: no route is left to guess on."""
    app = _app(db_url)
    with TestClient(app) as c:
        while c.get("/api/whoami", headers=WRONG).status_code != 429:
            pass
        open_routes = []
        for route in _every_route(app.routes):
            if not isinstance(route, Route) or route.path in ("/healthz",):
                continue
            path = re.sub(r"{(\w+):?\w*}", "1", route.path)
            for method in route.methods or ():
                answer = c.request(method, path, headers={**WRONG, **JSON})
                if answer.status_code != 429 and _needs_token(app, method, path):
                    open_routes.append(f"{method} {route.path}: {answer.status_code}")
        assert open_routes == []


def _needs_token(app: FastAPI, method: str, path: str) -> bool:
    """Whether a fresh address gets 401 for this request without a token."""
    with TestClient(app) as fresh:
        fresh.headers.pop("authorization", None)
        return fresh.request(method, path, headers=JSON).status_code == 401


# -- 2. listings without limits ---------------------------------------------------------
def test_a_worker_entry_is_bounded_where_workers_register(client: TestClient) -> None:
    fat = {**WORKER_ENTRY, "queues": [f"{n:04d}" + "q" * 195 for n in range(1000)]}  # 200 KB
    answer = client.put("/api/workers/w", json=fat, headers=bearer("worker"))
    assert answer.status_code == 422 and "at most 100 queues" in answer.text
    many = {**WORKER_ENTRY, "queues": [f"q{n}" for n in range(101)]}
    assert client.put("/api/workers/w", json=many, headers=bearer("worker")).status_code == 422
    heavy = {**WORKER_ENTRY, "queues": [f"{n:02d}" + "q" * 198 for n in range(90)]}  # 18 KB
    answer = client.put("/api/workers/w", json=heavy, headers=bearer("worker"))
    assert answer.status_code == 422 and "weigh at most 16384 bytes" in answer.text
    fine = {**WORKER_ENTRY, "queues": [f"q{n}" for n in range(100)]}
    assert client.put("/api/workers/w", json=fine, headers=bearer("worker")).status_code == 204


def test_workers_are_listed_a_page_at_a_time(client: TestClient, queue: conveyor.Queue) -> None:
    names = [f"w{n:03d}" for n in range(250)]
    for name in names:
        queue.worker_seen(name, host="h", pid=1, queues=["q"], concurrency=1, version="1",
                          running=0, ttl=60)  # fmt: skip
    first = client.get("/api/workers").json()
    assert len(first["workers"]) == 100 and first["next_after"] == "w099"
    seen, after = [], None
    while True:
        params = {"limit": 70} if after is None else {"limit": 70, "after": after}
        page = client.get("/api/workers", params=params).json()
        seen += [w["name"] for w in page["workers"]]
        after = page["next_after"]
        if after is None:
            break
    assert seen == names
    assert client.get("/api/workers", params={"limit": 1001}).status_code == 422


def test_metrics_label_a_bounded_number_of_queues(db_url: str) -> None:
    app = _app(db_url, max_metric_queues=5)
    with TestClient(app, headers=bearer("admin")) as c:
        for n in range(12):
            for _ in range(12 - n):  # q00 has the most jobs, q11 the fewest
                assert c.post("/api/jobs", json={"task": "t", "queue": f"q{n:02d}"}).is_success
        text = c.get("/metrics").text
    labels = set(re.findall(r'^conveyor_jobs\{queue="([^"]+)"', text, re.M))
    assert labels == {"q00", "q01", "q02", "q03", "q04", "_other"}
    pending = dict(
        re.findall(r'^conveyor_jobs\{queue="([^"]+)",status="pending"} (\S+)', text, re.M)
    )
    assert float(pending["_other"]) == sum(12 - n for n in range(5, 12))
    counted = set(re.findall(r'^conveyor_jobs_enqueued_total\{queue="([^"]+)"', text, re.M))
    assert counted == {"q00", "q01", "q02", "q03", "q04", "_other"}


def test_subscribers_are_bounded_per_job(db_url: str) -> None:
    app = _app(db_url, max_subscribers=5)
    with TestClient(app, headers=bearer("worker")) as c:
        job = {"task": "t", "key": "k"}
        answers = [c.post("/api/jobs", json={**job, "subscriber": f"s{n}"}) for n in range(8)]
        assert [a.status_code for a in answers] == [201, 200, 200, 200, 200, 422, 422, 422]
        assert _error(answers[-1]) == "too_many_subscribers"
        again = c.post("/api/jobs", json={**job, "subscriber": "s0"})  # already one: fine
        assert again.status_code == 200
        batch = {"jobs": [{**job, "subscriber": f"b{n}"} for n in range(2)]}
        assert c.post("/api/jobs/batch", json=batch).status_code == 422
        job_id = answers[0].json()["id"]
        listed = c.get(f"/api/jobs/{job_id}/subscribers").json()
        assert listed == {"subscribers": ["s0", "s1", "s2", "s3", "s4"], "truncated": False}
        queue: conveyor.Queue = app.state.conveyor.queue
        for n in range(5, 9):  # the library takes up to MAX_SUBSCRIBERS: the list is cut
            queue.enqueue("t", key="k", subscriber=f"s{n}")
        listed = c.get(f"/api/jobs/{job_id}/subscribers").json()
        assert len(listed["subscribers"]) == 5 and listed["truncated"] is True


# -- 4. bodies the server would only read to throw away ------------------------------------
def test_bodies_to_public_or_unknown_paths_are_refused_from_the_head(client: TestClient) -> None:
    deep = b"[" * 100_000  # what the depth check would scan, and refuse with 422
    anonymous = {**JSON, "Authorization": ""}
    assert client.post("/nowhere", content=deep, headers=anonymous).status_code == 404
    assert client.post("/api/nowhere", content=deep, headers=anonymous).status_code == 404
    past_drain = b"[" * (DISCARDED_BODY_BYTES + 1)
    for path in ("/healthz", "/", "/docs", "/openapi.json"):
        answer = client.post(path, content=deep, headers=anonymous)
        assert answer.status_code == 413, path
        assert "connection" not in answer.headers  # read to its end and dropped: kept open
        answer = client.post(path, content=past_drain, headers=anonymous)
        assert answer.status_code == 413, path
        assert answer.headers["connection"] == "close"
    # A route that needs a token: 401, also before the body.
    assert client.post("/api/jobs", content=deep, headers=anonymous).status_code == 401


# -- 5. shared records ------------------------------------------------------------------
def _schedule(c: TestClient, name: str, headers: dict[str, str], **fields: object) -> int:
    body = {"task": "t", "queue": "default", "spec": "every 60s", **fields}
    return c.put(f"/api/schedules/{name}", json=body, headers=headers).status_code


def test_a_slot_far_ahead_cannot_stop_a_schedule(db_url: str) -> None:
    app = _app(db_url)
    queue: conveyor.Queue = app.state.conveyor.queue
    with TestClient(app, headers=bearer("worker")) as c:
        assert _schedule(c, "nightly", {}) == 200
        far = {"task": "t", "slot": "9999-01-01T00:00:00+00:00"}
        answer = c.post("/api/schedules/nightly/run", json=far)
        assert answer.status_code == 422 and _error(answer) == "invalid_argument"
        past = {"task": "t", "slot": "2001-01-01T00:00:00+00:00"}
        assert c.post("/api/schedules/nightly/run", json=past).status_code == 422
        ahead = (queue.now() + timedelta(days=2)).isoformat()
        bad_next = {
            "task": "t",
            "slot": queue.now().isoformat(),
            "next_slot": "9999-01-01T00:00:00Z",
        }
        assert c.post("/api/schedules/nightly/run", json=bad_next).status_code == 422
        assert (
            c.post("/api/schedules/nightly/run", json={"task": "t", "slot": ahead}).status_code
            == 422
        )
        # The schedule still runs its slots.
        now = queue.now().isoformat()
        ran = c.post("/api/schedules/nightly/run", json={"task": "t", "slot": now})
        assert ran.status_code == 200 and ran.json()["job"] is not None
        assert queue.stats().total == 1


def test_a_worker_may_not_rewrite_a_schedule(db_url: str) -> None:
    with TestClient(_app(db_url)) as c:
        assert _schedule(c, "s", bearer("worker")) == 200
        assert _schedule(c, "s", bearer("worker")) == 200  # the same declaration, again
        assert _schedule(c, "s", bearer("worker"), task="other") == 403
        assert _schedule(c, "s", bearer("worker"), spec="every 1s") == 403
        assert _schedule(c, "s", bearer("worker"), next_slot="9999-01-01T00:00:00Z") == 422
        assert _schedule(c, "s", bearer("admin"), task="other") == 200
        listed = c.get("/api/schedules", headers=bearer("reader")).json()["schedules"]
        assert [(s["name"], s["task"]) for s in listed] == [("s", "other")]


def test_a_worker_removes_only_the_entries_it_registered(db_url: str) -> None:
    other = {"Authorization": f"Bearer {OTHER_WORKER}"}
    app = _app(db_url)
    queue: conveyor.Queue = app.state.conveyor.queue
    with TestClient(app) as c:
        assert (
            c.put("/api/workers/mine", json=WORKER_ENTRY, headers=bearer("worker")).status_code
            == 204
        )
        queue.worker_seen("direct", host="h", pid=2, queues=["q"], concurrency=1, version="1",
                          running=0, ttl=60)  # fmt: skip
        # Another worker token: neither refresh nor remove it.
        assert c.delete("/api/workers/mine", headers=other).status_code == 403
        assert c.put("/api/workers/mine", json=WORKER_ENTRY, headers=other).status_code == 403
        # An entry this server never saw registered: an admin's to remove.
        assert c.delete("/api/workers/direct", headers=bearer("worker")).status_code == 403
        assert sorted(w.name for w in queue.workers()) == ["direct", "mine"]
        assert c.delete("/api/workers/mine", headers=bearer("worker")).status_code == 204
        assert c.delete("/api/workers/direct", headers=bearer("admin")).status_code == 204
        assert queue.workers() == []


@pytest.mark.parametrize(
    ("rate", "allowed"),
    [
        ({"limit": 1, "per": 1e-300}, False),
        ({"limit": 1, "per": 0.0009}, False),
        ({"limit": 2_000_000, "per": 1}, False),
        ({"limit": 1, "per": 0.001}, True),
        ({"limit": 1_000_000, "per": 1}, True),
    ],
)
def test_rates_are_bounded(client: TestClient, rate: dict[str, float], allowed: bool) -> None:
    for field in ("rate", "group_rate"):
        answer = client.put("/api/queues/q/limits", json={field: rate})
        assert answer.status_code == (200 if allowed else 422), answer.text


# -- 6. dependency links ----------------------------------------------------------------
def test_dependency_links_per_request_are_bounded(
    client: TestClient, queue: conveyor.Queue
) -> None:
    first = queue.enqueue("t").id
    jobs = [{"task": "t", "after": [first] * 1000} for _ in range(11)]  # 11,000 links
    before = snapshot(queue)
    answer = client.post("/api/jobs/batch", json={"jobs": jobs}, headers=bearer("worker"))
    assert answer.status_code == 422
    assert "at most 10000 dependency links" in answer.json()["error"]["message"]
    assert snapshot(queue) == before
    fits = [{"task": "t", "after": [first]} for _ in range(10)]
    assert client.post("/api/jobs/batch", json={"jobs": fits}).status_code == 201


# -- 7. smaller findings -----------------------------------------------------------------
def test_a_slash_redirect_is_relative_whatever_the_host(client: TestClient) -> None:
    answer = client.get(
        "/api/stats/", params={"queue": "q"}, headers={"Host": "evil.example"},
        follow_redirects=False,
    )  # fmt: skip
    assert answer.status_code == 307
    assert answer.headers["location"] == "/api/stats?queue=q"
    answer = client.get("//evil.example/", follow_redirects=False)
    assert not answer.headers.get("location", "/").startswith("//")


def test_head_is_answered_like_get_without_a_body(client: TestClient) -> None:
    for path in ("/", "/jobs", "/healthz", "/api/stats", "/docs"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]


def test_the_origin_check_compares_the_port_too(client: TestClient) -> None:
    """Behind a proxy that keeps the port in Host ($http_host), the console's own
    requests pass; one that drops it ($host) makes every console action cross-site."""
    origin = {"Origin": "https://queue.example:8443"}
    kept = client.post("/api/queues/q/pause", headers={**origin, "Host": "queue.example:8443"})
    assert kept.status_code == 200
    dropped = client.post("/api/queues/q/pause", headers={**origin, "Host": "queue.example"})
    assert dropped.status_code == 403 and _error(dropped) == "cross_site"
    deployment = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert "proxy_set_header Host $http_host;" in deployment
    assert "proxy_set_header Host $host;" not in deployment


def _documented(route: BaseRoute) -> list[str]:
    if isinstance(route, Mount):
        return [f"`{route.path}/…`"]
    assert isinstance(route, Route)
    path = re.sub(r"{(\w+):?\w*}", "{}", route.path)
    return [f"`{method} {path}" for method in sorted(route.methods or ()) if method != "HEAD"]


def _every_route(routes: list[BaseRoute]) -> list[BaseRoute]:
    """The app's routes, with those of the routers it includes."""
    found: list[BaseRoute] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        found += _every_route(included.routes) if included is not None else [route]
    return found


def test_every_route_of_the_app_is_in_the_docs(app: FastAPI) -> None:
    text = re.sub(r"{[^}`]*}", "{}", (ROOT / "docs" / "http.md").read_text(encoding="utf-8"))
    routes = _every_route(app.routes)
    assert len(routes) > 60
    missing = [entry for route in routes for entry in _documented(route) if entry not in text]
    assert missing == []
    for name in ("/dashboard.js", "/dashboard.css"):
        assert name not in text
