"""Adding jobs and reading them: enqueue, list, get, latest, wait, subscribers."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Query, Request, Response

from conveyor.aio.queue import AsyncQueue
from conveyor.errors import InvalidArgument, JobNotFound
from conveyor.job import Job, Status
from conveyor.ops.defaults import MAX_JOB_ID
from conveyor.queue import MAX_LIST, Queue
from conveyor.web.answers import Budget, answer, job_answer, job_json, parse_include, trimmed
from conveyor.web.envelope import error_response
from conveyor.web.models import (
    BatchEnqueueRequest,
    EnqueueRequest,
    WhenQuery,
    enqueue_options,
)
from conveyor.web.router import Router, route
from conveyor.web.routes.common import (
    KEY,
    QUEUE,
    IncludeQuery,
    JobIdPath,
    KeyQuery,
    QueueQuery,
    TaskQuery,
)
from conveyor.web.state import State

router = Router(tags=["jobs"])

_REREAD = 1.0
_DEFAULT_WAIT = 30.0
# Pages a list reads from the database while it fills its byte budget: the first
# small, the next sized by what the first ones weighed.
_FIRST_PAGE = 16
_MAX_PAGE = 256


@route(router, "enqueue")
def enqueue(body: EnqueueRequest, state: State) -> Response:
    """Add a job. With a `key`, an active job with that key is returned (200) instead of
    a new one (201), or refused (409) with `on_active="raise"`."""
    options = enqueue_options(body)
    job = state.queue.enqueue(body.task, body.payload, **options)
    state.metrics.enqueued_jobs([job])
    return job_answer(job, status_code=200 if job.deduplicated else 201)


@route(router, "enqueue_many")
def enqueue_many(body: BatchEnqueueRequest, state: State) -> Response:
    """Every job, in the order sent (an item whose key was active gives that job).
    Past the byte budget the jobs come without payload and result (`truncated`)."""
    items = [
        {"task": item.task, "payload": item.payload, **enqueue_options(item)} for item in body.jobs
    ]
    if body.ids_only:
        return answer({"ids": state.queue.enqueue_ids(items, queue=body.queue)}, 201)
    jobs = state.queue.enqueue_many(items, queue=body.queue)
    state.metrics.enqueued_jobs(jobs)
    rendered = trimmed(jobs, state.limits.max_response_bytes).render()
    rendered.status_code = 201
    return rendered


@route(router, "jobs")
def list_jobs(
    state: State,
    queue: QueueQuery = None,
    status: Status | None = None,
    key: KeyQuery = None,
    task: TaskQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 100,
    after: Annotated[int | None, Query(ge=0, le=MAX_JOB_ID, description="last id seen")] = None,
    newest_first: bool = False,
    created_after: Annotated[WhenQuery | None, Query()] = None,
    created_before: Annotated[WhenQuery | None, Query()] = None,
    include: IncludeQuery = None,
) -> Response:
    """Jobs in id order, `limit` at a time; page with `after` = the last id seen.
    `newest_first`: descending ids, where `after` means ids below it. Jobs come without
    `payload` and `result` unless `include` names them. The page stops early when it
    reaches the server's byte budget (`truncated`: page on from its last id)."""
    if limit > state.limits.max_list:
        raise InvalidArgument(f"limit: expected at most {state.limits.max_list}, got {limit}")
    fields = parse_include(include)
    budget = Budget(state.limits.max_response_bytes)
    cursor, left, page = after, limit, min(limit, _FIRST_PAGE)
    while left > 0 and not budget.spent:
        jobs = state.queue.jobs(
            queue=queue, status=status, key=key, task=task, limit=min(page, left),
            after=cursor, newest_first=newest_first, created_after=created_after,
            created_before=created_before,
        )  # fmt: skip
        for job in jobs:
            if not budget.add(job_json(job, include=fields)):
                break
        if len(jobs) < min(page, left):
            break
        left -= len(jobs)
        cursor = jobs[-1].id
        page = _next_page(budget)
    return budget.render()


def _next_page(budget: Budget) -> int:
    """As many jobs as would fit in what is left of the budget, at their size so far."""
    average = budget.size / max(1, len(budget.parts))
    return max(1, min(_MAX_PAGE, int(budget.room / max(1.0, average)) + 1))


@route(router, "latest")
def latest(
    state: State,
    key: Annotated[str, KEY],
    queue: Annotated[str, QUEUE] = "default",
    task: TaskQuery = None,
) -> Response:
    job = state.queue.latest(key, queue=queue, task=task)
    if job is None:
        raise JobNotFound(f"no job has key {key!r} in queue {queue!r}")
    return job_answer(job)


@route(router, "get")
def get_job(job_id: JobIdPath, state: State) -> Response:
    return job_answer(_existing(state.queue, job_id))


@route(router, "wait")
async def wait(
    job_id: JobIdPath,
    state: State,
    request: Request,
    timeout: Annotated[float | None, Query(ge=0, le=3600, allow_inf_nan=False)] = None,
) -> Response:
    """Answers as soon as the job is completed, failed or cancelled, or after `timeout`
    seconds (default 30, or the server's maximum if lower) with the job as it is then
    (check its `status`). At most `max_waits` long polls wait at once: past that, 503
    with `Retry-After`."""
    if timeout is None:
        timeout = min(_DEFAULT_WAIT, state.limits.max_wait_seconds)
    if timeout > state.limits.max_wait_seconds:
        raise InvalidArgument(
            f"timeout: expected at most {state.limits.max_wait_seconds} seconds, got {timeout}"
        )
    if state.waits.active >= state.limits.max_waits:
        message = f"{state.limits.max_waits} long polls are waiting already; try again shortly"
        return error_response(503, "too_many_waits", message, headers={"Retry-After": "1"})
    state.waits.active += 1
    # Queue.wait as a coroutine: while it waits it holds no thread, and it is woken by
    # the queue's changes (re-reading every _REREAD s for other processes' on SQLite).
    waiting = asyncio.ensure_future(AsyncQueue(state.queue).wait(job_id, timeout, poll=_REREAD))
    try:
        while not waiting.done():
            await asyncio.wait({waiting}, timeout=_REREAD)
            if not waiting.done() and await request.is_disconnected():
                return Response(status_code=204)  # nobody is left to answer
        return job_answer(waiting.result())
    finally:
        waiting.cancel()
        state.waits.active -= 1


@route(router, "subscribers")
def subscribers(job_id: JobIdPath, state: State) -> dict[str, Any]:
    return {"subscribers": state.queue.subscribers(job_id)}


def _existing(queue: Queue, job_id: int) -> Job:
    job = queue.get(job_id)
    if job is None:
        raise JobNotFound(f"job {job_id} does not exist")
    return job
