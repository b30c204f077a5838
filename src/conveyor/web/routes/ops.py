"""Watching the service: statistics, Prometheus metrics, health, the dashboard."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from conveyor.job import sum_stats
from conveyor.web.auth import Role, require
from conveyor.web.dashboard import PAGE
from conveyor.web.models import HealthOut, QueuesOut, StatsOut
from conveyor.web.routes.common import QueueQuery, errors
from conveyor.web.state import State

router = APIRouter(tags=["operations"])
reader = [require(Role.READER)]


@router.get(
    "/api/stats",
    response_model=StatsOut,
    dependencies=reader,
    responses=errors(),
    summary="Counts per status",
)
def stats(state: State, queue: QueueQuery = None) -> dict[str, Any]:
    """Of one queue, or of all of them."""
    return state.queue.stats(queue).to_dict()


@router.get(
    "/api/queues",
    response_model=QueuesOut,
    dependencies=reader,
    responses=errors(),
    summary="Counts per queue and status",
)
def queues(state: State) -> dict[str, Any]:
    per_queue = state.queue.queue_stats()
    return {
        "queues": {name: s.to_dict() for name, s in per_queue.items()},
        "total": sum_stats(per_queue.values()).to_dict(),
    }


@router.get(
    "/metrics",
    dependencies=reader,
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}}, "description": "Prometheus text format"},
        **errors(),
    },
    summary="Prometheus metrics",
)
def metrics(state: State) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.get(
    "/healthz",
    response_model=HealthOut,
    responses={503: errors()[503]},
    summary="Whether the database answers",
)
def healthz(state: State) -> dict[str, Any]:
    """No token needed: for load balancers and orchestrators."""
    return {"status": "ok", "time": state.queue.now()}


@router.get("/", response_class=HTMLResponse, summary="The dashboard")
def dashboard() -> HTMLResponse:
    """A page that polls `/api/queues` and `/api/jobs`; it asks for a token when the
    server wants one and keeps it in the browser's session storage."""
    return HTMLResponse(PAGE)
