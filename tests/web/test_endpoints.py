"""The endpoint table (``conveyor.endpoints``) is the one declaration of the HTTP API:
the server's routes are exactly its entries, each as declared, and every operation a
queue runs has an entry the remote queues can send."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

import conveyor
from conveyor.endpoints import ENDPOINTS, Endpoint, markdown
from conveyor.web import create_app, models
from conveyor.web.auth import Role
from conveyor.web.models import ClaimRequest, CompleteRequest
from conveyor.web.router import Router, needed_role, route

OPS = Path(conveyor.__file__).parent / "ops"


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(conveyor.connect("sqlite:///:memory:"), tokens={})


def _api_routes() -> list[APIRoute]:
    """The routes of the API's routers (``create_app`` includes every one)."""
    return [r for router in _routers() for r in router.routes if isinstance(r, APIRoute)]


def _server_routes() -> set[tuple[str, str]]:
    return {(method, r.path) for r in _api_routes() for method in r.methods}


def test_the_server_serves_exactly_the_table(app: FastAPI) -> None:
    declared = {(e.method, e.path) for e in ENDPOINTS.values()} | {("HEAD", "/healthz")}
    assert _server_routes() == declared
    documented = {
        (method.upper(), path)
        for path, item in app.openapi()["paths"].items()
        for method in item
        if path.startswith(("/api/", "/healthz", "/metrics"))
    }
    assert documented == {(m, re.sub(r":\w+}", "}", p)) for m, p in declared}


def test_each_route_is_registered_as_its_entry_declares(app: FastAPI) -> None:
    routes = {(method, r.path): r for r in _api_routes() for method in r.methods}
    for op, e in ENDPOINTS.items():
        r = routes[(e.method, e.path)]
        if e.served_by is not None:
            assert ENDPOINTS[e.served_by].path == e.path, op
            continue
        assert r.summary == e.summary, op
        assert r.status_code == (None if e.status == 200 else e.status), op
        documented = {int(code) for code in r.responses}
        assert set(e.errors) <= documented, op
        operation = app.openapi()["paths"][re.sub(r":\w+}", "}", e.path)][e.method.lower()]
        if e.request is None:
            assert "requestBody" not in operation, op
        else:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            assert schema["$ref"].rpartition("/")[2] == e.request, op


def test_each_route_needs_the_role_its_entry_names(app: FastAPI) -> None:
    roles = [role for module_router in _routers() for role in module_router.roles]
    for op, e in ENDPOINTS.items():
        path = re.sub(r"\{\w+(:\w+)?\}", "1", e.path)
        expected = None if e.role is None else Role(e.role)
        assert needed_role(roles, e.method, path) == expected, op


def _routers() -> list[Router]:
    from conveyor.web.app import ROUTES

    return [module.router for module in ROUTES]


def test_every_operation_a_queue_runs_can_be_sent() -> None:
    """Each ``Call`` of ``conveyor.ops`` names an operation the table can send and read:
    a remote queue runs all of them."""
    names = {
        m.group(1)
        for path in OPS.glob("*.py")
        for m in re.finditer(r'Call\(\s*"(\w+)"', path.read_text(encoding="utf-8"))
    }
    assert len(names) > 40
    unsendable = sorted(n for n in names if n not in ENDPOINTS or ENDPOINTS[n].send is None)
    assert unsendable == []
    assert all(ENDPOINTS[n].read is not None for n in names)


def test_a_path_is_filled_from_the_calls_arguments() -> None:
    e = ENDPOINTS["claim"]
    assert e.url({"queue": "a/b c"}) == "/api/queues/a%2Fb%20c/claim"
    assert ENDPOINTS["complete"].url({"job_id": 12}) == "/api/jobs/12/complete"
    with pytest.raises(conveyor.InvalidArgument, match="schedule: a remote queue cannot"):
        ENDPOINTS["run_schedule_slot"].url({"name": "a/b"})
    with pytest.raises(conveyor.InvalidArgument, match="claim_id: a remote queue cannot"):
        ENDPOINTS["ack"].url({"claim_id": "a/b"})


def test_a_route_whose_body_is_not_the_tables_is_refused() -> None:
    router = Router()

    def claim(queue: str, body: CompleteRequest) -> Any: ...

    with pytest.raises(TypeError, match="route claim: its body"):
        route(router, "claim")(claim)

    def ack(claim_id: str, body: ClaimRequest) -> Any: ...

    with pytest.raises(TypeError, match="route ack: its body"):
        route(router, "ack")(ack)
    assert router.routes == []

    def right(queue: str, body: ClaimRequest) -> Any: ...

    route(router, "claim")(right)
    assert [r.path for r in router.routes] == ["/api/queues/{queue:name}/claim"]  # type: ignore[attr-defined]


def test_a_new_entry_is_one_declaration() -> None:
    """What an entry holds is what both sides read: nothing else keys on the name."""
    fields = set(Endpoint.__dataclass_fields__)
    assert {"method", "path", "request", "response", "role", "send", "read"} <= fields
    for op, e in ENDPOINTS.items():
        for name in (e.request, e.response):
            if name is not None:
                for part in name.split("|"):
                    model = getattr(models, part.strip())
                    assert isinstance(model, type), op
                    assert issubclass(model, BaseModel) or hasattr(model, "__dataclass_fields__")


def test_the_docs_list_every_route() -> None:
    """docs/http.md lists the routes as the table declares them (regenerate the block
    between its ``routes`` markers from ``conveyor.endpoints.markdown()``)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text(encoding="utf-8")
    start = "<!-- routes: generated from conveyor.endpoints.markdown() -->\n"
    listed = text[text.index(start) + len(start) : text.index("<!-- /routes -->")]
    assert listed == markdown()
