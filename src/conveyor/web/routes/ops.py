"""Watching the service: statistics, Prometheus metrics, health."""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from conveyor.job import sum_stats
from conveyor.web.answers import answer
from conveyor.web.envelope import error_response
from conveyor.web.router import Router, route
from conveyor.web.routes.common import QueueQuery
from conveyor.web.state import State

router = Router(tags=["operations"])


@route(router, "stats")
def stats(state: State, queue: QueueQuery = None) -> dict[str, Any]:
    """Of one queue, or of all of them."""
    return state.queue.stats(queue).to_dict()


@route(router, "queue_stats")
def queues(state: State) -> dict[str, Any]:
    per_queue = state.queue.queue_stats()
    return {
        "queues": {name: s.to_dict() for name, s in per_queue.items()},
        "total": sum_stats(per_queue.values()).to_dict(),
    }


@route(router, "task_stats")
def task_stats(state: State, queue: QueueQuery = None) -> dict[str, Any]:
    """Counts per status for every task with jobs (of one queue, or of all), from the
    counts kept per queue, status and task."""
    per_task = state.queue.task_stats(queue)
    return {"tasks": {name: s.to_dict() for name, s in per_task.items()}}


@route(router, "metrics")
def metrics(state: State) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


def healthz(state: State) -> Response:
    """No token needed: for load balancers and orchestrators. 503 when the database
    does not answer, or its schema is missing or older than this server's (run
    `conveyor migrate`)."""
    queue = state.queue
    version = queue.schema_version()
    if version < queue.latest_schema_version:
        found = "no conveyor schema" if version == 0 else f"schema version {version}"
        message = (
            f"the database has {found}; this server needs version "
            f"{queue.latest_schema_version} (run conveyor migrate)"
        )
        return error_response(503, "schema_out_of_date", message, headers={"Retry-After": "5"})
    now = queue.now()
    return answer({"status": "ok", "time": now.isoformat(), "schema_version": version})


# A load balancer may ask with HEAD: the same route under each method, each with an
# operation id of its own.
for _method in ("GET", "HEAD"):
    route(router, "now", method=_method, operation_id=f"healthz_{_method.lower()}")(healthz)
