"""The guard in front of every route: security headers on every answer, Host names on a
server without tokens, requests from other sites, authentication before a body is
read, and the back-off on wrong tokens."""

from __future__ import annotations

import socket

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from conveyor.web import Limits, create_app
from conveyor.web.backoff import TokenBackoff
from conveyor.web.guard import CONTENT_SECURITY_POLICY
from tests.web.conftest import LOCAL, TOKENS, bearer, snapshot

JSON = {"Content-Type": "application/json"}


def _secured(headers: object) -> bool:
    get = headers.get  # type: ignore[attr-defined]
    return (
        get("content-security-policy") == CONTENT_SECURITY_POLICY
        and get("x-content-type-options") == "nosniff"
        and get("x-frame-options") == "DENY"
        and get("referrer-policy") == "no-referrer"
    )


def test_every_answer_carries_the_security_headers(db_url: str) -> None:
    app = create_app(db_url, tokens=TOKENS, limits=Limits(max_body_bytes=1000))
    with TestClient(app, raise_server_exceptions=False) as c:
        answers = {
            "dashboard": c.get("/"),
            "dashboard script": c.get("/dashboard.js"),
            "docs": c.get("/docs"),
            "docs asset": c.get("/docs/assets/init.js"),
            "openapi": c.get("/openapi.json"),
            "health": c.get("/healthz"),
            "health head": c.head("/healthz"),
            "a job list": c.get("/api/jobs", headers=bearer("reader")),
            "no token (guard)": c.get("/api/stats"),
            "wrong role (guard)": c.post("/api/prune", json={}, headers=bearer("reader")),
            "body too large (body limits)": c.post(
                "/api/jobs", content=b"x" * 2000, headers={**JSON, **bearer("admin")}
            ),
            "bad input (validation)": c.post("/api/jobs", json={}, headers=bearer("admin")),
            "unknown job (library)": c.get("/api/jobs/99", headers=bearer("reader")),
            "no route (router)": c.get("/nowhere", headers=bearer("reader")),
            "wrong method (router)": c.put("/api/jobs", json={}, headers=bearer("admin")),
        }
    wrong = [name for name, answer in answers.items() if not _secured(answer.headers)]
    assert wrong == []
    assert answers["a job list"].headers["cache-control"] == "no-store"


def test_a_server_without_tokens_answers_only_loopback_host_names(db_url: str) -> None:
    """A page whose DNS name was rebound to 127.0.0.1 sends its own name as Host."""
    app = create_app(db_url, tokens={})
    with TestClient(app, base_url=LOCAL) as c:
        for host in ("127.0.0.1:8000", "localhost", "localhost:9", "[::1]:8000", "127.0.0.1"):
            assert c.get("/api/stats", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", "[::2]"):
            for method, path in (("GET", "/api/stats"), ("GET", "/"), ("POST", "/api/recover")):
                response = c.request(method, path, headers={"Host": host, **JSON})
                assert response.status_code == 403, (host, path)
                assert response.json()["error"]["code"] == "forbidden_host"
                assert _secured(response.headers)


def test_a_server_with_tokens_answers_any_host_name(client: TestClient) -> None:
    assert client.get("/api/stats", headers={"Host": "queue.internal:8000"}).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", **JSON},
        {"Origin": "null", **JSON},
        {"Origin": "http://127.0.0.1:1", **JSON},  # another port is another origin
        {"Sec-Fetch-Site": "cross-site", **JSON},
        {"Sec-Fetch-Site": "same-site", **JSON},
        {"Content-Type": "application/x-www-form-urlencoded"},  # a plain HTML form
        {"Content-Type": "text/plain"},  # a no-cors fetch
        {"Content-Type": "multipart/form-data; boundary=x"},
        {},
    ],
)
def test_requests_from_other_sites_change_nothing(db_url: str, headers: dict[str, str]) -> None:
    """On a server without tokens a cross-site page could act as its admin; every
    changing route refuses what a page of another site can send."""
    app = create_app(db_url, tokens={})
    with TestClient(app, base_url=LOCAL) as c:
        q: conveyor.Queue = app.state.conveyor.queue
        job = q.enqueue("t")
        claim = q.claim(lease=1)
        before = snapshot(q)
        for method, path in [
            ("POST", f"/api/jobs/{job.id}/cancel"),
            ("POST", "/api/recover"),
            ("DELETE", f"/api/claims/{claim.id}"),
            ("POST", "/api/queues/default/pause"),
            ("POST", "/api/jobs"),
        ]:
            response = c.request(method, path, headers=headers)
            assert response.status_code in (403, 415), (method, path, response.text)
            assert response.json()["error"]["code"] in ("cross_site", "unsupported_media_type")
        assert snapshot(q) == before
        assert q.queue_settings() == {}


def test_requests_from_the_same_origin_go_through(db_url: str) -> None:
    app = create_app(db_url, tokens={})
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        same = {"Origin": "http://127.0.0.1:8000", "Sec-Fetch-Site": "same-origin", **JSON}
        assert c.post("/api/jobs", json={"task": "t"}, headers=same).status_code == 201
        assert c.post("/api/recover", headers=same).status_code == 200


def test_a_body_less_request_with_a_token_needs_no_content_type(client: TestClient) -> None:
    """A form cannot send an Authorization header either."""
    job = client.post("/api/jobs", json={"task": "t"}).json()
    response = client.post(f"/api/jobs/{job['id']}/cancel", headers={"Content-Type": ""})
    assert response.status_code == 200


def test_tokens_and_roles_are_checked_before_the_body_is_parsed(client: TestClient) -> None:
    broken = b'{"task": '  # would be a 400 once parsed
    no_token = client.post("/api/jobs", content=broken, headers={**JSON, "Authorization": ""})
    assert no_token.status_code == 401
    reader = client.post("/api/jobs", content=broken, headers={**JSON, **bearer("reader")})
    assert reader.status_code == 403
    worker = client.post("/api/prune", content=broken, headers={**JSON, **bearer("worker")})
    assert worker.status_code == 403
    assert client.post("/api/jobs", content=broken, headers=JSON).status_code == 400  # admin


def test_a_refused_token_is_answered_before_the_body_arrives(server_url: str) -> None:
    """The head says a large body follows and none is sent: the 401 comes at once."""
    host, port = server_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer wrong-token-000\r\nContent-Length: 1000000\r\n\r\n"
        )
        head = sock.recv(65536).decode("latin-1")
    assert head.startswith("HTTP/1.1 401")


def test_wrong_tokens_from_one_address_are_locked_out(app: FastAPI) -> None:
    with TestClient(app) as c:
        wrong = {"Authorization": "Bearer not-a-known-token"}
        statuses = [c.get("/api/stats", headers=wrong).status_code for _ in range(6)]
        assert statuses == [401] * 6
        locked = c.get("/api/stats", headers=wrong)
        assert locked.status_code == 429
        assert locked.json()["error"]["code"] == "too_many_failures"
        assert int(locked.headers["retry-after"]) >= 1
        # While locked out, no token is even looked at: the right one waits too.
        assert c.get("/api/stats", headers=bearer("reader")).status_code == 429
        # Public routes stay open.
        assert c.get("/healthz").status_code == 200


def test_the_back_off_doubles_forgets_and_stays_bounded() -> None:
    backoff = TokenBackoff(free=2, base_seconds=1, cap_seconds=8, max_clients=100)
    for _ in range(2):
        backoff.failed("a", now=0)
    assert backoff.locked_for("a", now=0) == 0  # the free guesses
    locks = []
    for _ in range(6):
        backoff.failed("a", now=100)
        locks.append(backoff.locked_for("a", now=100))
    assert locks == [1, 2, 4, 8, 8, 8]
    assert backoff.locked_for("a", now=108) == 0  # the lock runs out; the count stays
    backoff.failed("a", now=108)
    assert backoff.locked_for("a", now=108) == 8
    backoff.failed("b", now=0)
    backoff.failed("b", now=0)
    backoff.failed("b", now=10_000)  # long after: counted afresh, one free guess spent
    assert backoff.locked_for("b", now=10_000) == 0
    for n in range(1000):
        backoff.failed(f"client-{n}", now=0)
    assert len(backoff) == 100  # the stalest addresses forgotten first
    assert backoff.locked_for("b", now=10_000) == 0


def test_a_right_token_does_not_clear_an_address_record(app: FastAPI) -> None:
    """The audit's attack: a caller holding a reader token sends it after every fourth
    guess at another token. The guesses still lock the address out."""
    wrong = {"Authorization": "Bearer guess-guess-0"}
    with TestClient(app) as c:
        statuses = []
        for _ in range(5):
            statuses += [c.get("/api/stats", headers=wrong).status_code for _ in range(4)]
            statuses.append(c.get("/api/stats", headers=bearer("reader")).status_code)
        assert statuses[:5] == [401, 401, 401, 401, 200]
        assert 429 in statuses
        assert c.get("/api/stats", headers=wrong).status_code == 429
        assert len(app.state.conveyor.backoff) == 1
