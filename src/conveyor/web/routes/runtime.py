"""What worker runtimes use beside the basic claim-and-report routes: claiming one job
by id, snoozing, writing many endings at once, renewing leases, the worker registry,
periodic schedules and failed notification deliveries."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Response

from conveyor.codec import to_json
from conveyor.info import ScheduleInfo
from conveyor.web.answers import answer, job_answer, job_json
from conveyor.web.auth import Caller, Role, require
from conveyor.web.models import (
    TEN_YEARS,
    ClaimJobRequest,
    ClaimOut,
    FoldedOut,
    HeartbeatManyRequest,
    IdsOut,
    JobOut,
    RemovedOut,
    ReportOut,
    ReportRequest,
    RetriedOut,
    RetryNotificationsRequest,
    RunSlotRequest,
    ScheduleRequest,
    SnoozeRequest,
    WorkerRequest,
    enqueue_options,
)
from conveyor.web.router import Router
from conveyor.web.routes.common import JobIdPath, NamePath, errors
from conveyor.web.routes.work import caller_name, check_lease, claim_answer
from conveyor.web.state import State

router = Router(tags=["work"], dependencies=[require(Role.WORKER)])


@router.post(
    "/api/jobs/{job_id:job_id}/claim",
    response_model=ClaimOut,
    responses=errors(404, 409),
    summary="Claim one job by id",
)
def claim_job(job_id: JobIdPath, body: ClaimJobRequest, state: State, role: Caller) -> Response:
    """The job must be pending with its dependencies met (409 otherwise). Its queue's
    pause and limits do not apply: the caller chose this job."""
    check_lease(body.lease_seconds, state.limits)
    worker = body.worker or caller_name(role)
    taken = state.queue.claim_job(job_id, lease=body.lease_seconds, worker=worker)
    return claim_answer(state, taken)


@router.post(
    "/api/jobs/{job_id:job_id}/snooze",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Put a claimed job back for a while, without spending an attempt",
)
def snooze(job_id: JobIdPath, body: SnoozeRequest, state: State) -> Response:
    job = state.queue.snooze(job_id, body.claim_id, body.delay_seconds)
    return job_answer(job, holder=body.claim_id)


@router.post(
    "/api/batch/report",
    response_model=ReportOut,
    responses=errors(),
    summary="Write many endings in one transaction",
)
def report(body: ReportRequest, state: State) -> dict[str, Any]:
    """Completions, failures and snoozes; the answer gives the new status of each job
    written. A job left out was refused: its claim no longer holds it."""
    written = state.queue.report(
        completed=[(i.job_id, i.claim_id, i.result) for i in body.completed],
        failed=[(i.job_id, i.claim_id, i.error, i.retryable, i.delay_seconds)
                for i in body.failed],
        snoozed=[(i.job_id, i.claim_id, i.delay_seconds) for i in body.snoozed],
    )  # fmt: skip
    return {"written": {str(k): v for k, v in written.items()}}


@router.post(
    "/api/batch/renew",
    response_model=IdsOut,
    responses=errors(),
    summary="Renew many leases; the ids still held",
)
def renew(body: HeartbeatManyRequest, state: State) -> dict[str, Any]:
    """`extend_seconds` is bounded as a claim's lease is."""
    check_lease(body.extend_seconds, state.limits, "extend_seconds")
    items = [(i.job_id, i.claim_id) for i in body.items]
    return {"ids": sorted(state.queue.renew(items, extend=body.extend_seconds))}


@router.post(
    "/api/notifications/retry",
    response_model=RetriedOut,
    responses=errors(),
    summary="Deliveries that failed: offer them again later",
)
def retry_notifications(body: RetryNotificationsRequest, state: State) -> dict[str, Any]:
    count = state.queue.retry_notifications(
        [(i.job_id, i.subscriber) for i in body.items],
        body.error,
        base=body.base_seconds,
        cap=body.cap_seconds,
        max_attempts=body.max_attempts,
    )
    return {"retried_count": count}


@router.put(
    "/api/workers/{name:name}",
    status_code=204,
    responses=errors(),
    summary="Register a worker or refresh its entry",
)
def worker_seen(name: NamePath, body: WorkerRequest, state: State) -> None:
    state.queue.worker_seen(
        name, host=body.host, pid=body.pid, queues=body.queues, concurrency=body.concurrency,
        version=body.version, running=body.running, ttl=body.ttl_seconds,
    )  # fmt: skip


@router.delete(
    "/api/workers/{name:name}",
    status_code=204,
    responses=errors(),
    summary="Remove a worker's entry (a clean stop)",
)
def worker_stopped(name: NamePath, state: State) -> None:
    state.queue.worker_stopped(name)


@router.delete(
    "/api/workers",
    response_model=RemovedOut,
    responses=errors(),
    summary="Delete entries of workers presumed dead",
)
def forget_workers(
    state: State,
    expired_for_seconds: Annotated[float, Query(ge=0, le=TEN_YEARS, allow_inf_nan=False)],
) -> dict[str, Any]:
    """Entries whose worker stopped refreshing them more than `expired_for_seconds`
    ago."""
    return {"removed_count": state.queue.forget_workers(expired_for_seconds)}


@router.put(
    "/api/schedules/{name}",
    response_model=ScheduleInfo,
    responses=errors(),
    summary="Declare a periodic schedule",
)
def save_schedule(name: NamePath, body: ScheduleRequest, state: State) -> Any:
    saved = state.queue.save_schedule(
        name, task=body.task, queue=body.queue, spec=body.spec, first_slot=body.first_slot,
        next_slot=body.next_slot,
    )  # fmt: skip
    return to_json(saved)


@router.post(
    "/api/schedules/{name}/run",
    responses=errors(),
    summary="Enqueue a schedule's job for a slot, once",
)
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


@router.post(
    "/api/counts/fold",
    response_model=FoldedOut,
    responses=errors(),
    summary="Fold the job counts' pending changes",
)
def fold_counts(state: State) -> dict[str, Any]:
    return {"folded_count": state.queue.fold_counts()}
