"""Adding jobs and reading them: enqueue, list, get, latest, wait, subscribers."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import Query, Request, Response

from conveyor.aio.queue import AsyncQueue
from conveyor.errors import InvalidArgument, JobNotFound, TooManySubscribers
from conveyor.job import Job, Status
from conveyor.ops.defaults import MAX_JOB_ID
from conveyor.ops.enqueue import enqueue as enqueue_call
from conveyor.ops.enqueue import enqueue_ids as enqueue_ids_call
from conveyor.ops.enqueue import enqueue_many as enqueue_many_call
from conveyor.ops.idempotency import check_key
from conveyor.ops.reading import MAX_DEFERRED, MAX_SCAN
from conveyor.queue import MAX_LIST, Queue
from conveyor.web import idempotency
from conveyor.web.answers import Budget, answer, job_answer, job_json, parse_include, trimmed
from conveyor.web.envelope import error_response
from conveyor.web.idempotency import IdempotencyKey
from conveyor.web.limits import check_links
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
from conveyor.web.state import ServerState, State

router = Router(tags=["jobs"])

_REREAD = 1.0
_DEFAULT_WAIT = 30.0
# Pages a list reads from the database while it fills its byte budget: the first
# small, the next sized by what the first ones weighed.
_FIRST_PAGE = 16
_MAX_PAGE = 256


@route(router, "enqueue")
def enqueue(
    body: EnqueueRequest, state: State, request: Request, idempotency_key: IdempotencyKey = None
) -> Response:
    """Add a job. With a `key`, an active job with that key is returned (200) instead of
    a new one (201), or refused (409) with `on_active="raise"`. A `subscriber` joins
    the active job's subscribers only while it has fewer than `max_subscribers` (422
    `too_many_subscribers`). With an `Idempotency-Key` header, the same request sent
    again gets the first answer (`Idempotent-Replayed: true`) and adds nothing."""
    options = enqueue_options(body)
    check_links(len(options.get("after") or ()), state.limits)
    key, subscriber = options.get("key"), options.get("subscriber")
    if idempotency_key is not None:
        check_key(idempotency_key)
    if subscriber is not None and key is not None:
        _check_subscribers(state, [(options.get("queue") or "default", key, subscriber)])

    def render(job: Job) -> Response:
        return job_answer(job, status_code=200 if job.deduplicated else 201)

    def created(job: Job) -> None:
        state.metrics.enqueued_jobs([job])

    if idempotency_key is None:
        job = state.queue.enqueue(body.task, body.payload, **options)
        created(job)
        return render(job)
    queue = str(options.get("queue") or "default")
    return idempotency.run(
        state, request, idempotency_key, body,
        lambda: enqueue_call(state.queue.defaults, body.task, body.payload, **options),
        render, sent=("send", queue, 1, lambda job: [job.id]), created=created,
    )  # fmt: skip


@route(router, "enqueue_many")
def enqueue_many(
    body: BatchEnqueueRequest,
    state: State,
    request: Request,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Every job, in the order sent (an item whose key was active gives that job).
    Past the byte budget the jobs come without payload and result (`truncated`). The
    `after` ids of all the jobs together are at most `max_dependency_links` (422), and
    subscribers join active jobs as `POST /api/jobs` lets them. With an
    `Idempotency-Key` header, the same request sent again gets the first answer
    (`Idempotent-Replayed: true`) and adds nothing: the way to retry an `ids_only` load
    safely."""
    items = [
        {"task": item.task, "payload": item.payload, **enqueue_options(item)} for item in body.jobs
    ]
    check_links(sum(len(i.get("after") or ()) for i in items), state.limits)
    if idempotency_key is not None:
        check_key(idempotency_key)
    default = body.queue or "default"
    joining = [(i.get("queue") or default, i["key"], i["subscriber"]) for i in items
               if i.get("key") is not None and i.get("subscriber") is not None]  # fmt: skip
    if joining:
        _check_subscribers(state, joining)
    if body.ids_only:

        def render_ids(ids: list[int]) -> Response:
            return answer({"ids": ids}, 201)

        if idempotency_key is None:
            return render_ids(state.queue.enqueue_ids(items, queue=body.queue))
        return idempotency.run(
            state, request, idempotency_key, body,
            lambda: enqueue_ids_call(state.queue.defaults, items, queue=body.queue),
            render_ids, sent=("publish", default, len(items), list),
        )  # fmt: skip

    def render(jobs: list[Job]) -> Response:
        rendered = trimmed(jobs, state.limits.max_response_bytes).render()
        rendered.status_code = 201
        return rendered

    if idempotency_key is None:
        jobs = state.queue.enqueue_many(items, queue=body.queue)
        state.metrics.enqueued_jobs(jobs)
        return render(jobs)
    return idempotency.run(
        state, request, idempotency_key, body,
        lambda: enqueue_many_call(state.queue.defaults, items, queue=body.queue),
        render, sent=("publish", default, len(items), lambda jobs: [j.id for j in jobs]),
        created=state.metrics.enqueued_jobs,
    )  # fmt: skip


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


@route(router, "search_payload")
def search_payload(
    state: State,
    field: Annotated[str, Query(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")],
    value: Annotated[str, Query(max_length=1000)],
    queue: QueueQuery = None,
    status: Status | None = None,
    task: TaskQuery = None,
    before: Annotated[int | None, Query(ge=1, le=MAX_JOB_ID, description="go on below")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 50,
    scan: Annotated[int, Query(ge=1, le=MAX_SCAN, description="jobs walked at most")] = 10_000,
    include: IncludeQuery = None,
) -> Response:
    """Jobs whose payload's top-level `field` reads `value` (as text), newest first,
    among the `scan` newest jobs below id `before` matching the other filters: a bounded
    walk, so a search costs the same at a thousand jobs or a million. `next_before`: go
    on from there; null once every job was walked."""
    fields = parse_include(include)
    found = state.queue.search_payload(
        field, value, queue=queue, status=status, task=task, before=before, limit=limit,
        scan=scan,
    )  # fmt: skip
    budget = Budget(state.limits.max_response_bytes)
    more = found.next_before
    for job in found.jobs:
        if not budget.add(job_json(job, include=fields)):
            more = found.jobs[len(budget.parts) - 1].id  # go on below the last one sent
            break
    return budget.render(next_before=more)


@route(router, "deferred")
def deferred(
    state: State,
    queue: QueueQuery = None,
    task: TaskQuery = None,
    kind: Annotated[
        Literal["scheduled", "retrying"] | None,
        Query(description="scheduled: never tried; retrying: an attempt failed; none: both"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_DEFERRED)] = 100,
    include: IncludeQuery = None,
) -> Response:
    """Pending jobs not yet due, soonest first: scheduled for later, or waiting out the
    back-off after a failed attempt. Read from an index that holds only such jobs."""
    fields = parse_include(include)
    budget = Budget(state.limits.max_response_bytes)
    for job in state.queue.deferred(queue=queue, task=task, kind=kind, limit=limit):
        if not budget.add(job_json(job, include=fields)):
            break
    return budget.render()


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
    """At most `max_subscribers` of them (`truncated` says when there are more)."""
    found = state.queue.subscribers(job_id)
    cap = state.limits.max_subscribers
    return {"subscribers": found[:cap], "truncated": len(found) > cap}


def _check_subscribers(state: ServerState, joining: list[tuple[str, str, str]]) -> None:
    """Refuse subscribers that would take an active job past ``max_subscribers``.

    Checked here, before the enqueue, for a server's own ``max_subscribers`` from what
    the database holds now; the library's cap (``MAX_SUBSCRIBERS``) is the enqueue's
    own guarded write, which requests at once cannot pass."""
    cap = state.limits.max_subscribers
    if len(joining) > cap:
        raise TooManySubscribers(
            f"subscribers: expected at most {cap} items with a key and a subscriber in one "
            f"request, got {len(joining)}"
        )
    wanted: dict[tuple[str, str], set[str]] = {}
    for queue, key, subscriber in joining:
        wanted.setdefault((queue, key), set()).add(subscriber)
    for (queue, key), new in wanted.items():
        active = state.queue.latest(key, queue=queue)
        if active is None or active.status not in (Status.PENDING, Status.RUNNING):
            continue
        present = set(state.queue.subscribers(active.id))
        if len(present | new) > cap and not new <= present:
            raise TooManySubscribers(
                f"subscriber: job {active.id} has {len(present)} subscribers already; "
                f"a job takes at most {cap}"
            )


def _existing(queue: Queue, job_id: int) -> Job:
    job = queue.get(job_id)
    if job is None:
        raise JobNotFound(f"job {job_id} does not exist")
    return job
