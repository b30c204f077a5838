"""Bearer tokens and roles: a route-by-role matrix over every route of the app, and the
configuration of tokens."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.routing import Route

from conveyor.errors import ConfigurationError
from conveyor.web import create_app, parse_tokens, tokens_from_env
from conveyor.web.app import ROUTES, check_bind_address
from tests.web.conftest import LOCAL, ROLES, bearer

PUBLIC, READER, WORKER, ADMIN = "public", "reader", "worker", "admin"
NEEDED = {
    ("GET", "/"): PUBLIC,
    ("GET", "/healthz"): PUBLIC,
    ("HEAD", "/healthz"): PUBLIC,
    ("GET", "/openapi.json"): PUBLIC,
    ("GET", "/docs"): PUBLIC,
    ("GET", "/api/jobs"): READER,
    ("GET", "/api/jobs/latest"): READER,
    ("GET", "/api/jobs/{job_id}"): READER,
    ("GET", "/api/jobs/{job_id}/wait"): READER,
    ("GET", "/api/jobs/{job_id}/subscribers"): READER,
    ("GET", "/api/stats"): READER,
    ("GET", "/api/queues"): READER,
    ("GET", "/metrics"): READER,
    ("POST", "/api/jobs"): WORKER,
    ("POST", "/api/jobs/batch"): WORKER,
    ("POST", "/api/queues/{queue}/claim"): WORKER,
    ("POST", "/api/jobs/{job_id}/complete"): WORKER,
    ("POST", "/api/jobs/{job_id}/fail"): WORKER,
    ("POST", "/api/jobs/{job_id}/heartbeat"): WORKER,
    ("POST", "/api/jobs/{job_id}/progress"): WORKER,
    ("POST", "/api/batch/complete"): WORKER,
    ("POST", "/api/batch/fail"): WORKER,
    ("POST", "/api/batch/heartbeat"): WORKER,
    ("POST", "/api/notifications/take"): WORKER,
    ("POST", "/api/notifications/mark"): WORKER,
    ("POST", "/api/claims/{claim_id}/ack"): WORKER,
    ("DELETE", "/api/claims/{claim_id}"): WORKER,
    ("POST", "/api/recover"): WORKER,
    ("POST", "/api/jobs/{job_id}/retry"): ADMIN,
    ("POST", "/api/jobs/{job_id}/cancel"): ADMIN,
    ("POST", "/api/claims/reset"): ADMIN,
    ("POST", "/api/prune"): ADMIN,
    ("POST", "/api/queues/{queue}/complete-by-key"): ADMIN,
    ("POST", "/api/queues/{queue}/cancel-by-key"): ADMIN,
    ("POST", "/api/queues/{queue}/fail-by-key"): ADMIN,
    ("GET", "/api/tasks/stats"): READER,
    ("GET", "/api/jobs/{job_id}/dependents"): READER,
    ("GET", "/api/jobs/{job_id}/parents"): READER,
    ("GET", "/api/jobs/search"): READER,
    ("GET", "/api/jobs/deferred"): READER,
    ("POST", "/api/jobs/{job_id}/run-now"): ADMIN,
    ("POST", "/api/jobs/bulk/run-now"): ADMIN,
    ("DELETE", "/api/jobs/{job_id}"): ADMIN,
    ("GET", "/api/tasks/timings"): READER,
    ("GET", "/api/throughput/hours"): READER,
    ("POST", "/api/throughput/roll-up"): WORKER,
    ("POST", "/api/workflows"): WORKER,
    ("GET", "/api/workflows"): READER,
    ("GET", "/api/workflows/{workflow_id}"): READER,
    ("POST", "/api/workflows/{workflow_id}/cancel"): ADMIN,
    ("POST", "/api/workflows/{workflow_id}/retry"): ADMIN,
    ("GET", "/api/queues/settings"): READER,
    ("GET", "/api/workers"): READER,
    ("GET", "/api/schedules"): READER,
    ("GET", "/api/throughput"): READER,
    ("POST", "/api/jobs/{job_id}/claim"): WORKER,
    ("POST", "/api/jobs/{job_id}/snooze"): WORKER,
    ("POST", "/api/batch/report"): WORKER,
    ("POST", "/api/batch/renew"): WORKER,
    ("POST", "/api/notifications/retry"): WORKER,
    ("PUT", "/api/workers/{name}"): WORKER,
    ("DELETE", "/api/workers/{name}"): WORKER,
    ("DELETE", "/api/workers"): WORKER,
    ("PUT", "/api/schedules/{name}"): WORKER,
    ("POST", "/api/schedules/{name}/run"): WORKER,
    ("POST", "/api/counts/fold"): WORKER,
    ("POST", "/api/jobs/{job_id}/release"): ADMIN,
    ("POST", "/api/queues/{queue}/pause"): ADMIN,
    ("POST", "/api/queues/{queue}/resume"): ADMIN,
    ("PUT", "/api/queues/{queue}/limits"): ADMIN,
    ("PUT", "/api/retention"): ADMIN,
    ("GET", "/api/retention"): READER,
    ("POST", "/api/retention/clear"): ADMIN,
    ("GET", "/api/retention/expired"): ADMIN,
    ("POST", "/api/retention/prune"): ADMIN,
    ("GET", "/api/whoami"): READER,
    ("POST", "/api/jobs/bulk/retry"): ADMIN,
    ("POST", "/api/jobs/bulk/cancel"): ADMIN,
}
RANK = {PUBLIC: -1, READER: 0, WORKER: 1, ADMIN: 2}
# Routes where a worker token acts on what it registered only (here: nothing, so 403).
OWN_ONLY = {("DELETE", "/api/workers/{name}")}


def _routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every route: the documented ones, the undocumented ones of the API's routers
    and the documentation's own pages."""
    found = {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }
    routes = [*app.routes, *(r for module in ROUTES for r in module.router.routes)]
    for route in routes:
        if isinstance(route, Route):
            path = re.sub(r"{(\w+):\w+}", r"{\1}", route.path)  # {job_id:job_id} -> {job_id}
            found.update((m, path) for m in route.methods or () if m != "HEAD")
    return found


def _call(client: TestClient, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    url = path.format(job_id=1, queue="default", claim_id="c0ffee", name="w", workflow_id=1)
    params = {"timeout": 0} if url.endswith("/wait") else None
    body = {} if method in ("POST", "PUT") else None
    return client.request(method, url, json=body, params=params, headers=headers)


def test_every_route_is_in_the_matrix(app: FastAPI) -> None:
    assert _routes(app) == set(NEEDED)


@pytest.mark.parametrize("role", [None, "bogus", *ROLES])
def test_route_role_matrix(client: TestClient, role: str | None) -> None:
    if role is None:
        headers = {"Authorization": ""}  # the client's default admin header, removed
    elif role == "bogus":
        headers = {"Authorization": "Bearer not-a-known-token"}
    else:
        headers = bearer(role)
    rank = RANK.get(role or "", -2)
    wrong: list[str] = []
    for (method, path), needed in sorted(NEEDED.items()):
        answer = _call(client, method, path, headers)
        status = answer.status_code
        if role == WORKER and (method, path) in OWN_ONLY:
            ok = status == 403 and "registered" in answer.json()["error"]["message"]
        elif needed == PUBLIC or rank >= RANK[needed]:
            ok = status not in (401, 403)
        elif rank == -2:
            # A wrong token, again and again: after a few, the address is locked out.
            ok = status == 401 or (role == "bogus" and status == 429)
        else:
            ok = status == 403
        if not ok:
            wrong.append(f"{method} {path} as {role}: {status} (needs {needed})")
    assert wrong == []


def test_401_asks_for_a_bearer_token(client: TestClient) -> None:
    response = client.get("/api/stats", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"


def test_403_names_the_role_needed(client: TestClient) -> None:
    response = client.post("/api/prune", json={}, headers=bearer("worker"))
    assert response.json()["error"] == {
        "code": "forbidden",
        "message": "this route needs the admin role; the token grants worker",
    }


def test_without_tokens_every_caller_is_an_admin(db_url: str) -> None:
    with TestClient(create_app(db_url, tokens={}), base_url=LOCAL) as open_client:
        assert open_client.post("/api/recover", json={}).status_code == 200


def test_tokens_come_from_the_environment_and_a_file(tmp_path: Path) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text("# the operators\nadmin:file-admin-secret\n\nreader:file-reader-1\n")
    env = {"CONVEYOR_TOKENS_FILE": str(token_file), "CONVEYOR_TOKENS": "worker:env-worker-1"}
    assert tokens_from_env(env) == {
        "file-admin-secret": "admin",
        "file-reader-1": "reader",
        "env-worker-1": "worker",
    }
    assert tokens_from_env({}) == {}


@pytest.mark.parametrize(
    "text",
    ["admin", "root:long-enough-secret", "admin:short", "admin:has space inside"],
)
def test_bad_token_configuration_is_refused(text: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_tokens(text)


def test_missing_token_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        tokens_from_env({"CONVEYOR_TOKENS_FILE": str(tmp_path / "absent")})


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"])
def test_loopback_may_serve_without_tokens(host: str) -> None:
    check_bind_address(host, {})


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.internal"])
def test_other_addresses_need_tokens(host: str) -> None:
    with pytest.raises(ConfigurationError, match="without tokens"):
        check_bind_address(host, {})
    check_bind_address(host, {"admin-secret-1": "admin"})
