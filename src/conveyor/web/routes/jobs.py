"""Adding jobs and reading them: enqueue, list, get, latest, wait, subscribers."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from conveyor.errors import InvalidArgument, JobNotFound
from conveyor.job import Job, Status
from conveyor.queue import MAX_LIST
from conveyor.web.auth import Role, require
from conveyor.web.models import (
    BatchEnqueueRequest,
    EnqueueRequest,
    IdsOut,
    JobList,
    JobOut,
    SubscribersOut,
    WhenQuery,
)
from conveyor.web.routes.common import (
    KEY,
    QUEUE,
    JobIdPath,
    KeyQuery,
    QueueQuery,
    TaskQuery,
    errors,
)
from conveyor.web.state import State, job_out

router = APIRouter(tags=["jobs"])
reader = [require(Role.READER)]
worker = [require(Role.WORKER)]

# While a long poll waits it holds no thread: it watches the backend's change counter
# and re-reads the job when it moves, or every _REREAD seconds (changes made by other
# processes on SQLite are not announced).
_WATCH = 0.05
_REREAD = 1.0
_DEFAULT_WAIT = 30.0


@router.post(
    "/api/jobs",
    response_model=JobOut,
    status_code=201,
    dependencies=worker,
    responses={
        200: {"model": JobOut, "description": "An active job already has the key"},
        **errors(409),
    },
    summary="Enqueue a job",
)
def enqueue(body: EnqueueRequest, state: State, response: Response) -> dict[str, Any]:
    """Add a job. With a `key`, an active job with that key is returned (200) instead of
    a new one (201), or refused (409) with `on_active="raise"`."""
    job = state.queue.enqueue(
        body.task,
        body.payload,
        queue=body.queue or "default",
        key=body.key,
        priority=body.priority,
        run_at=body.run_at,
        max_attempts=body.max_attempts,
        subscriber=body.subscriber,
        on_active=body.on_active,
        cache_ttl=body.cache_ttl_seconds,
        on_failed=body.on_failed,
        on_completed=body.on_completed,
        group=body.group,
        after=body.after,
        on_dependency_failure=body.on_dependency_failure,
    )
    if job.deduplicated:
        response.status_code = 200
    state.metrics.enqueued_jobs([job])
    return job_out(job)


@router.post(
    "/api/jobs/batch",
    response_model=JobList | IdsOut,
    status_code=201,
    dependencies=worker,
    responses=errors(409),
    summary="Enqueue many jobs in one transaction",
)
def enqueue_many(body: BatchEnqueueRequest, state: State) -> dict[str, Any]:
    items = [item.model_dump(exclude_unset=True, exclude_none=True) for item in body.jobs]
    if body.ids_only:
        return {"ids": state.queue.enqueue_ids(items, queue=body.queue)}
    jobs = state.queue.enqueue_many(items, queue=body.queue)
    state.metrics.enqueued_jobs(jobs)
    return {"jobs": [job_out(j) for j in jobs]}


@router.get(
    "/api/jobs",
    response_model=JobList,
    dependencies=reader,
    responses=errors(),
    summary="List jobs",
)
def list_jobs(
    state: State,
    queue: QueueQuery = None,
    status: Status | None = None,
    key: KeyQuery = None,
    task: TaskQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 100,
    after: Annotated[int | None, Query(ge=0, le=2**63 - 1, description="last id seen")] = None,
    newest_first: bool = False,
    created_after: Annotated[WhenQuery | None, Query()] = None,
    created_before: Annotated[WhenQuery | None, Query()] = None,
) -> dict[str, Any]:
    """Jobs in id order, `limit` at a time; page with `after` = the last id seen.
    `newest_first`: descending ids, where `after` means ids below it."""
    if limit > state.limits.max_list:
        raise InvalidArgument(f"limit: expected at most {state.limits.max_list}, got {limit}")
    jobs = state.queue.jobs(
        queue=queue, status=status, key=key, task=task, limit=limit, after=after,
        newest_first=newest_first, created_after=created_after, created_before=created_before,
    )  # fmt: skip
    return {"jobs": [job_out(j) for j in jobs]}


@router.get(
    "/api/jobs/latest",
    response_model=JobOut,
    dependencies=reader,
    responses=errors(404),
    summary="The newest job with a key",
)
def latest(
    state: State,
    key: Annotated[str, KEY],
    queue: Annotated[str, QUEUE] = "default",
    task: TaskQuery = None,
) -> dict[str, Any]:
    job = state.queue.latest(key, queue=queue, task=task)
    if job is None:
        raise JobNotFound(f"no job has key {key!r} in queue {queue!r}")
    return job_out(job)


@router.get(
    "/api/jobs/{job_id:int}",
    response_model=JobOut,
    dependencies=reader,
    responses=errors(404),
    summary="A job",
)
def get_job(job_id: JobIdPath, state: State) -> dict[str, Any]:
    return job_out(_existing(state, job_id))


@router.get(
    "/api/jobs/{job_id:int}/wait",
    response_model=JobOut,
    dependencies=reader,
    responses=errors(404),
    summary="Long poll until the job is final",
)
async def wait(
    job_id: JobIdPath,
    state: State,
    request: Request,
    timeout: Annotated[float | None, Query(ge=0, le=3600, allow_inf_nan=False)] = None,
) -> dict[str, Any]:
    """Answers as soon as the job is completed, failed or cancelled, or after `timeout`
    seconds (default 30, or the server's maximum if lower) with the job as it is then
    (check its `status`)."""
    if timeout is None:
        timeout = min(_DEFAULT_WAIT, state.limits.max_wait_seconds)
    if timeout > state.limits.max_wait_seconds:
        raise InvalidArgument(
            f"timeout: expected at most {state.limits.max_wait_seconds} seconds, got {timeout}"
        )
    backend = state.queue.backend
    deadline = time.monotonic() + timeout
    if backend.supports_listen_notify:  # starts the listener, so other processes wake us
        await run_in_threadpool(backend.wait_for_change, backend.generation(), 0)
    while True:
        seen = backend.generation()
        job = await run_in_threadpool(_existing, state, job_id)
        left = deadline - time.monotonic()
        if job.is_final or left <= 0 or await request.is_disconnected():
            return job_out(job)
        reread_at = time.monotonic() + min(left, _REREAD)
        while backend.generation() == seen and time.monotonic() < reread_at:
            await asyncio.sleep(_WATCH)


@router.get(
    "/api/jobs/{job_id:int}/subscribers",
    response_model=SubscribersOut,
    dependencies=reader,
    responses=errors(),
    summary="Who asked to hear of the job's end",
)
def subscribers(job_id: JobIdPath, state: State) -> dict[str, Any]:
    return {"subscribers": state.queue.subscribers(job_id)}


def _existing(state: State, job_id: int) -> Job:
    job = state.queue.get(job_id)
    if job is None:
        raise JobNotFound(f"job {job_id} does not exist")
    return job
