"""What worker runtimes use beside the basic claim-and-report routes: claiming one job
by id, snoozing, writing many endings at once, renewing leases, the worker registry,
periodic schedules and failed notification deliveries."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Response

from conveyor.codec import to_json
from conveyor.web.answers import answer, job_answer, job_json
from conveyor.web.auth import Caller
from conveyor.web.models import (
    TEN_YEARS,
    ClaimJobRequest,
    HeartbeatManyRequest,
    ReportRequest,
    RetryNotificationsRequest,
    RunSlotRequest,
    ScheduleRequest,
    SnoozeRequest,
    WorkerRequest,
    enqueue_options,
)
from conveyor.web.router import Router, route
from conveyor.web.routes.common import JobIdPath, NamePath
from conveyor.web.routes.work import caller_name, check_lease, claim_answer, endings
from conveyor.web.state import State

router = Router(tags=["work"])


@route(router, "claim_job")
def claim_job(job_id: JobIdPath, body: ClaimJobRequest, state: State, role: Caller) -> Response:
    """The job must be pending with its dependencies met (409 otherwise). Its queue's
    pause and limits do not apply: the caller chose this job."""
    check_lease(body.lease_seconds, state.limits)
    worker = body.worker or caller_name(role)
    taken = state.queue.claim_job(job_id, lease=body.lease_seconds, worker=worker)
    return claim_answer(state, taken)


@route(router, "snooze")
def snooze(job_id: JobIdPath, body: SnoozeRequest, state: State) -> Response:
    job = state.queue.snooze(job_id, body.claim_id, body.delay_seconds)
    return job_answer(job, holder=body.claim_id)


@route(router, "report")
def report(body: ReportRequest, state: State) -> dict[str, Any]:
    """Completions, failures and snoozes; the answer gives the new status of each job
    written. A job left out was refused: its claim no longer holds it."""
    given = endings(body)
    written = state.queue.report(
        completed=given.completed, failed=given.failed, snoozed=given.snoozed
    )
    return {"written": {str(k): v for k, v in written.items()}}


@route(router, "renew")
def renew(body: HeartbeatManyRequest, state: State) -> dict[str, Any]:
    """`extend_seconds` is bounded as a claim's lease is."""
    check_lease(body.extend_seconds, state.limits, "extend_seconds")
    items = [(i.job_id, i.claim_id) for i in body.items]
    return {"ids": sorted(state.queue.renew(items, extend=body.extend_seconds))}


@route(router, "retry_notifications")
def retry_notifications(body: RetryNotificationsRequest, state: State) -> dict[str, Any]:
    count = state.queue.retry_notifications(
        [(i.job_id, i.subscriber) for i in body.items],
        body.error,
        base=body.base_seconds,
        cap=body.cap_seconds,
        max_attempts=body.max_attempts,
    )
    return {"retried_count": count}


@route(router, "worker_seen")
def worker_seen(name: NamePath, body: WorkerRequest, state: State) -> None:
    state.queue.worker_seen(
        name, host=body.host, pid=body.pid, queues=body.queues, concurrency=body.concurrency,
        version=body.version, running=body.running, ttl=body.ttl_seconds,
    )  # fmt: skip


@route(router, "worker_stopped")
def worker_stopped(name: NamePath, state: State) -> None:
    state.queue.worker_stopped(name)


@route(router, "forget_workers")
def forget_workers(
    state: State,
    expired_for_seconds: Annotated[float, Query(ge=0, le=TEN_YEARS, allow_inf_nan=False)],
) -> dict[str, Any]:
    """Entries whose worker stopped refreshing them more than `expired_for_seconds`
    ago."""
    return {"removed_count": state.queue.forget_workers(expired_for_seconds)}


@route(router, "save_schedule")
def save_schedule(name: NamePath, body: ScheduleRequest, state: State) -> Any:
    saved = state.queue.save_schedule(
        name, task=body.task, queue=body.queue, spec=body.spec, first_slot=body.first_slot,
        next_slot=body.next_slot,
    )  # fmt: skip
    return to_json(saved)


@route(router, "run_schedule_slot")
def run_schedule_slot(name: NamePath, body: RunSlotRequest, state: State) -> Response:
    """However many workers ask for the same slot, one job is enqueued; the others get
    `{"job": null}`."""
    options = enqueue_options(body, queue="default")
    job = state.queue.run_schedule_slot(
        name, slot=body.slot, next_slot=body.next_slot, task=body.task, payload=body.payload,
        queue=options["queue"], priority=options.get("priority", 0),
        max_attempts=options.get("max_attempts"),
    )  # fmt: skip
    return answer({"job": None if job is None else job_json(job)})


@route(router, "fold_counts")
def fold_counts(state: State) -> dict[str, Any]:
    return {"folded_count": state.queue.fold_counts()}
