"""Flow control over HTTP: pause and resume queues, set their limits; and what readers
see of queues, workers, schedules, dependencies and throughput."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from conveyor.codec import to_json
from conveyor.info import Rate
from conveyor.web.models import LimitsRequest, RateIn
from conveyor.web.router import Router, route
from conveyor.web.routes.common import JobIdPath, QueuePath, QueueQuery
from conveyor.web.state import State

router = Router(tags=["flow control"])


@route(router, "pause")
def pause(queue: QueuePath, state: State) -> Any:
    return to_json(state.queue.pause(queue))


@route(router, "resume")
def resume(queue: QueuePath, state: State) -> Any:
    return to_json(state.queue.resume(queue))


@route(router, "set_limits")
def set_limits(queue: QueuePath, body: LimitsRequest, state: State) -> Any:
    """Replaces every limit: a field left out or null removes that limit."""
    settings = state.queue.set_limits(
        queue,
        max_running=body.max_running,
        group_max_running=body.group_max_running,
        rate=_rate(body.rate),
        group_rate=_rate(body.group_rate),
    )
    return to_json(settings)


def _rate(value: RateIn | None) -> Rate | None:
    return None if value is None else Rate(value.limit, value.per)


@route(router, "queue_settings")
def queue_settings(state: State, queue: QueueQuery = None) -> dict[str, Any]:
    return {"queues": to_json(state.queue.queue_settings(queue))}


@route(router, "workers")
def workers(state: State) -> dict[str, Any]:
    return {"workers": to_json(state.queue.workers())}


@route(router, "schedules")
def schedules(state: State) -> dict[str, Any]:
    # last_run: the slot last enqueued, null while the schedule has never run.
    return {
        "schedules": [
            {**to_json(s), "last_run": to_json(s.last_run)} for s in state.queue.schedules()
        ]
    }


@route(router, "throughput")
def throughput(
    state: State,
    queue: QueueQuery = None,
    minutes: Annotated[int, Query(ge=1, le=7 * 24 * 60)] = 60,
) -> dict[str, Any]:
    return {"minutes": to_json(state.queue.throughput(queue=queue, minutes=minutes))}


@route(router, "dependents")
def dependents(job_id: JobIdPath, state: State) -> dict[str, Any]:
    return {"dependents": state.queue.dependents(job_id)}
