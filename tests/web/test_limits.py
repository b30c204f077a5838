"""Request limits: body size (also while streaming, on a real server), media type, JSON
depth, claim size, lease and long-poll bounds."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from conveyor.errors import ConfigurationError
from conveyor.web import Limits, create_app
from conveyor.web.limits import json_too_deep
from tests.web.conftest import LOCAL, TOKENS, bearer

JSON = {"Content-Type": "application/json"}


def test_body_larger_than_the_limit_is_413(client: TestClient) -> None:
    body = json.dumps({"task": "t", "payload": "x" * (1024 * 1024)})
    response = client.post("/api/jobs", content=body, headers=JSON)
    assert response.status_code == 413
    assert response.json()["error"] == {
        "code": "payload_too_large",
        "message": "request body: expected at most 1048576 bytes",
    }
    assert client.get("/api/stats").json()["total"] == 0


def test_the_body_limit_is_configurable(db_url: str) -> None:
    app = create_app(db_url, tokens={}, limits=Limits(max_body_bytes=100))
    with TestClient(app, base_url=LOCAL) as small:
        assert small.post("/api/jobs", json={"task": "t", "payload": "x" * 50}).status_code == 201
        assert small.post("/api/jobs", json={"task": "t", "payload": "x" * 100}).status_code == 413


def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    yield b'{"task": "t", "payload": "'
    for _ in range(total // size):
        yield b"x" * size
    yield b'"}'


def test_a_streamed_body_is_cut_off_at_the_limit(server_url: str) -> None:
    """No Content-Length (chunked upload of 8 MiB): the server answers 413 once 1 MiB
    has arrived, without reading the rest."""
    headers = {**JSON, **bearer("admin")}
    with httpx.Client(base_url=server_url, timeout=30) as http:
        try:
            response = http.post("/api/jobs", content=_chunks(8 * 1024 * 1024), headers=headers)
        except httpx.WriteError:  # the server may close before the upload ends
            response = None
        if response is not None:
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "payload_too_large"
        assert http.get("/api/stats", headers=headers).json()["total"] == 0


def test_a_slightly_oversize_body_gets_its_413_not_a_reset(server_url: str) -> None:
    """A client still sending a body a little over the limit must read the answer, not a
    broken connection: the server reads such a body to its end before it refuses it."""
    headers = {**JSON, **bearer("admin")}
    body = b'{"task": "t", "payload": "' + b"x" * (1024 * 1024 + 100_000) + b'"}'
    with httpx.Client(base_url=server_url, timeout=30) as http:
        for _ in range(5):  # the same keep-alive connection, again and again
            response = http.post("/api/jobs", content=body, headers=headers)
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "payload_too_large"
        assert http.get("/api/stats", headers=headers).json()["total"] == 0


def test_a_declared_oversize_body_is_refused_before_it_is_sent(server_url: str) -> None:
    host, port = server_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + next(iter(TOKENS)).encode() + b"\r\n"
            b"Content-Length: 5000000000\r\n\r\n"
        )
        head = sock.recv(65536).decode("latin-1")
    assert head.startswith("HTTP/1.1 413")


def test_bodies_must_be_json(client: TestClient) -> None:
    response = client.post(
        "/api/jobs",
        content=b"task=t",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_json_nested_past_the_limit_is_422(client: TestClient) -> None:
    deep = '{"task": "t", "payload": ' + "[" * 100 + "]" * 100 + "}"
    response = client.post("/api/jobs", content=deep, headers=JSON)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "json_too_deep"


def test_depth_ignores_brackets_inside_strings() -> None:
    assert not json_too_deep(b'{"a": "' + b"[" * 500 + b'"}', 5)
    assert not json_too_deep(b'{"a": "\\"[[[[[[[[[["}', 5)
    assert json_too_deep(b"[" * 6 + b"]" * 6, 5)
    assert not json_too_deep(b"[" * 5 + b"]" * 5, 5)
    assert not json_too_deep(b"[]" * 1000, 1)


def test_claim_limit_and_lease_bounds(db_url: str) -> None:
    limits = Limits(max_claim=10, min_lease_seconds=5, max_lease_seconds=60)
    with TestClient(create_app(db_url, tokens={}, limits=limits), base_url=LOCAL) as c:
        too_many = c.post("/api/queues/q/claim", json={"limit": 11})
        assert too_many.status_code == 422
        assert too_many.json()["error"]["message"] == (
            "limit: expected at most 10 jobs per claim, got 11"
        )
        for lease in (1, 61):
            response = c.post("/api/queues/q/claim", json={"lease_seconds": lease})
            assert response.status_code == 422
            assert "lease_seconds" in response.json()["error"]["message"]
        assert c.post("/api/queues/q/claim", json={"limit": 10, "lease_seconds": 5}).is_success
        assert c.post("/api/queues/q/claim", json={"limit": 0}).status_code == 422


def test_wait_timeout_and_list_limit_bounds(db_url: str) -> None:
    limits = Limits(max_wait_seconds=5, max_list=10)
    with TestClient(create_app(db_url, tokens={}, limits=limits), base_url=LOCAL) as c:
        job = c.post("/api/jobs", json={"task": "t"}).json()
        assert c.get(f"/api/jobs/{job['id']}/wait", params={"timeout": 6}).status_code == 422
        assert c.get("/api/jobs", params={"limit": 11}).status_code == 422
        assert c.get("/api/jobs", params={"limit": 10}).status_code == 200


@pytest.mark.parametrize(
    "fields",
    [{"max_body_bytes": 0}, {"max_claim": -1}, {"min_lease_seconds": 10, "max_lease_seconds": 5}],
)
def test_nonsense_limits_are_a_configuration_error(fields: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        Limits(**fields)  # type: ignore[arg-type]


def test_a_live_server_refuses_anonymous_callers(server_url: str) -> None:
    assert httpx.get(f"{server_url}/api/stats").status_code == 401
