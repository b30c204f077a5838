"""Flow control over HTTP: pause and resume queues, set their limits; and what readers
see of queues, workers, schedules, dependencies and throughput."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from conveyor.codec import to_json
from conveyor.errors import InvalidArgument
from conveyor.info import Rate
from conveyor.ops.defaults import MAX_JOB_ID
from conveyor.ops.reading import MAX_SAMPLE, MAX_THROUGHPUT_HOURS, MAX_TIMING_HOURS
from conveyor.validation import MAX_NAME_LENGTH
from conveyor.web.limits import Limits
from conveyor.web.models import (
    ClearRetentionRequest,
    LimitsRequest,
    PruneExpiredRequest,
    RateIn,
    RetentionRequest,
)
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
    """Replaces every limit: a field left out or null removes that limit. A rate's `per`
    is at least `min_rate_period_seconds` (default 1 ms) and `limit / per` at most
    `max_rate_per_second` (default 1,000,000); 422 otherwise."""
    settings = state.queue.set_limits(
        queue,
        max_running=body.max_running,
        group_max_running=body.group_max_running,
        rate=_rate(body.rate, state.limits, "rate"),
        group_rate=_rate(body.group_rate, state.limits, "group_rate"),
    )
    return to_json(settings)


def _rate(value: RateIn | None, limits: Limits, what: str) -> Rate | None:
    if value is None:
        return None
    if value.per < limits.min_rate_period_seconds:
        raise InvalidArgument(
            f"{what}.per: expected at least {limits.min_rate_period_seconds:g} seconds, "
            f"got {value.per:g}"
        )
    if value.limit / value.per > limits.max_rate_per_second:
        raise InvalidArgument(
            f"{what}: expected at most {limits.max_rate_per_second:g} jobs per second, got "
            f"{value.limit} per {value.per:g} s"
        )
    return Rate(value.limit, value.per)


@route(router, "set_retention")
def set_retention(body: RetentionRequest, state: State) -> Any:
    """Writes the policy for (`status`, `queue`, `task`), replacing the one there was. The
    most specific policy of a job wins: queue and task, then task, then queue, then the
    status's default. `keep_seconds` null keeps the jobs for ever. A `file:` archive
    names a path on the workers' machines: it is set with a direct connection to the
    database, never over HTTP (422)."""
    if body.archive is not None and body.archive.startswith("file:"):
        raise InvalidArgument(
            "archive: a file archive names a path on the workers' machines; set it with "
            "a direct connection to the database (Python or the command line), not over HTTP"
        )
    policy = state.queue.set_retention(
        body.status, body.keep_seconds, queue=body.queue, task=body.task,
        archive=body.archive, retire_keys=body.retire_keys,
    )  # fmt: skip
    return to_json(policy)


@route(router, "retention_policies")
def retention_policies(state: State) -> dict[str, Any]:
    return {"policies": to_json(state.queue.retention_policies())}


@route(router, "clear_retention")
def clear_retention(body: ClearRetentionRequest, state: State) -> dict[str, Any]:
    """Deletes the policy for (`status`, `queue`, `task`); with `status` null, those of
    every status."""
    removed = state.queue.clear_retention(status=body.status, queue=body.queue, task=body.task)
    return {"removed_count": removed}


@route(router, "expired_jobs")
def expired_jobs(
    state: State,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
    archive: Annotated[str | None, Query(min_length=1, max_length=1000)] = None,
    after: Annotated[int | None, Query(ge=1, le=MAX_JOB_ID)] = None,
) -> dict[str, Any]:
    """Final jobs their retention policy lets go now, whole, by id (above `after`), with
    their policy and archive (read only)."""
    found = state.queue.expired_jobs(limit=limit, archive=archive, after=after)
    return {"expired": to_json(found)}


@route(router, "prune_expired")
def prune_expired(body: PruneExpiredRequest, state: State) -> dict[str, Any]:
    """Deletes those of `ids` their policy still lets go, in one transaction (keys
    retired, archive task's jobs enqueued with it)."""
    return {"removed_count": state.queue.prune_expired(body.ids, archive=body.archive)}


@route(router, "queue_settings")
def queue_settings(state: State, queue: QueueQuery = None) -> dict[str, Any]:
    return {"queues": to_json(state.queue.queue_settings(queue))}


@route(router, "workers")
def workers(
    state: State,
    limit: Annotated[int, Query(ge=1, le=1_000_000)] = 100,
    after: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_NAME_LENGTH, description="the last name seen"),
    ] = None,
) -> dict[str, Any]:
    """In name order, `limit` at a time (at most `max_workers_page`); page with `after`
    = the last name seen, until `next_after` is null."""
    if limit > state.limits.max_workers_page:
        raise InvalidArgument(
            f"limit: expected at most {state.limits.max_workers_page}, got {limit}"
        )
    # The library lists every entry; the page is cut here (entries are small: see
    # max_worker_entry_bytes).
    listed = sorted(state.queue.workers(), key=lambda w: w.name)
    if after is not None:
        listed = [w for w in listed if w.name > after]
    page = listed[:limit]
    more = len(listed) > limit
    return {"workers": to_json(page), "next_after": page[-1].name if more else None}


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
