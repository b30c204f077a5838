"""Flow control over HTTP: pause and resume queues, set their limits; and what readers
see of queues, workers, schedules, dependencies and throughput."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from conveyor.codec import to_json
from conveyor.info import Rate
from conveyor.ops.reading import MAX_SAMPLE, MAX_THROUGHPUT_HOURS, MAX_TIMING_HOURS
from conveyor.web.models import LimitsRequest, RateIn
from conveyor.web.router import Router, route
from conveyor.web.routes.common import JobIdPath, QueuePath, QueueQuery, TaskQuery
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
    return {"schedules": to_json(state.queue.schedules())}


@route(router, "throughput")
def throughput(
    state: State,
    queue: QueueQuery = None,
    minutes: Annotated[int, Query(ge=1, le=7 * 24 * 60)] = 60,
) -> dict[str, Any]:
    return {"minutes": to_json(state.queue.throughput(queue=queue, minutes=minutes))}


@route(router, "task_timings")
def task_timings(
    state: State,
    queue: QueueQuery = None,
    task: TaskQuery = None,
    hours: Annotated[int, Query(ge=1, le=MAX_TIMING_HOURS)] = 24,
    sample: Annotated[int, Query(ge=1, le=MAX_SAMPLE, description="finished jobs read")] = 10_000,
) -> dict[str, Any]:
    """Per task, over the `sample` jobs that finished last within the last `hours`:
    `runs`, `failures`, and `p50_seconds`/`p95_seconds` of the completed runs' run time
    (finished minus started, nearest rank), computed by the database."""
    timings = state.queue.task_timings(queue=queue, task=task, hours=hours, sample=sample)
    return {"tasks": to_json(timings)}


@route(router, "throughput_hours")
def throughput_hours(
    state: State,
    queue: QueueQuery = None,
    hours: Annotated[int, Query(ge=1, le=MAX_THROUGHPUT_HOURS)] = 24,
) -> dict[str, Any]:
    """Per hour: the hourly roll-ups, and the last day's per-minute rows summed."""
    return {"hours": to_json(state.queue.throughput_hours(queue=queue, hours=hours))}


@route(router, "dependents")
def dependents(job_id: JobIdPath, state: State) -> dict[str, Any]:
    return {"dependents": state.queue.dependents(job_id)}
