"""What workers do: claim, then report on the claimed jobs (one at a time or in
batches), acknowledge or give back a claim, recover expired leases."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from conveyor.errors import InvalidArgument
from conveyor.web.auth import Role, require
from conveyor.web.limits import Limits
from conveyor.web.models import (
    AckedOut,
    ClaimOut,
    ClaimRequest,
    CompleteManyRequest,
    CompleteRequest,
    FailManyRequest,
    FailRequest,
    HeartbeatManyRequest,
    HeartbeatRequest,
    JobList,
    JobOut,
    MarkedOut,
    MarkNotifiedRequest,
    NotificationsOut,
    ProgressRequest,
    RecoveredOut,
    ResetOut,
    TakeNotificationsRequest,
)
from conveyor.web.routes.common import (
    ClaimIdPath,
    JobIdPath,
    QueuePath,
    QueuesQuery,
    errors,
    queue_list,
)
from conveyor.web.state import State, job_out

router = APIRouter(tags=["work"], dependencies=[require(Role.WORKER)])


@router.post(
    "/api/queues/{queue}/claim",
    response_model=ClaimOut,
    responses=errors(),
    summary="Claim jobs",
)
def claim(queue: QueuePath, body: ClaimRequest, state: State) -> dict[str, Any]:
    """Claim up to `limit` claimable jobs under one new claim id, by priority then FIFO.
    `ack`: a previous claim id whose running jobs are completed first, in the same
    transaction (the batch protocol: acknowledge the last batch with the next request).
    `remaining`: the jobs of the queue still claimable."""
    _check_claim(body, state.limits)
    taken = state.queue.claim(
        queue,
        limit=body.limit,
        lease=body.lease_seconds,
        worker=body.worker,
        ack=body.ack,
        count_remaining=body.count_remaining,
    )
    state.metrics.claimed_jobs(taken)
    return {
        "claim_id": taken.id,
        "queue": taken.queue,
        "jobs": [job_out(j) for j in taken.jobs],
        "remaining": taken.remaining,
        "acked": taken.acked,
    }


def _check_claim(body: ClaimRequest, limits: Limits) -> None:
    if body.limit > limits.max_claim:
        raise InvalidArgument(
            f"limit: expected at most {limits.max_claim} jobs per claim, got {body.limit}"
        )
    if not limits.min_lease_seconds <= body.lease_seconds <= limits.max_lease_seconds:
        raise InvalidArgument(
            f"lease_seconds: expected {limits.min_lease_seconds} to {limits.max_lease_seconds}, "
            f"got {body.lease_seconds}"
        )


@router.post(
    "/api/jobs/{job_id:int}/complete",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Complete a claimed job",
)
def complete(job_id: JobIdPath, body: CompleteRequest, state: State) -> dict[str, Any]:
    job = state.queue.complete(job_id, body.claim_id, body.result)
    state.metrics.reported_jobs([job])
    return job_out(job)


@router.post(
    "/api/jobs/{job_id:int}/fail",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Report a failed attempt",
)
def fail(job_id: JobIdPath, body: FailRequest, state: State) -> dict[str, Any]:
    """Retryable with attempts left: back to pending after `delay_seconds` (default: the
    server's backoff). Otherwise the job is failed for good."""
    job = state.queue.fail(
        job_id, body.claim_id, body.error, retryable=body.retryable, delay=body.delay_seconds
    )
    state.metrics.reported_jobs([job])
    return job_out(job)


@router.post(
    "/api/jobs/{job_id:int}/heartbeat",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Renew a claimed job's lease",
)
def heartbeat(job_id: JobIdPath, body: HeartbeatRequest, state: State) -> dict[str, Any]:
    return job_out(state.queue.heartbeat(job_id, body.claim_id, extend=body.extend_seconds))


@router.post(
    "/api/jobs/{job_id:int}/progress",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Record progress (absolute values)",
)
def progress(job_id: JobIdPath, body: ProgressRequest, state: State) -> dict[str, Any]:
    """A field left out or null keeps its value; replaying a report changes nothing."""
    job = state.queue.progress(
        job_id,
        body.claim_id,
        total=body.total,
        completed=body.completed,
        failed=body.failed,
        current=body.current,
        checkpoint=body.checkpoint,
        detail=body.detail,
    )
    return job_out(job)


@router.post(
    "/api/batch/complete",
    response_model=JobList,
    responses=errors(),
    summary="Complete many claimed jobs",
)
def complete_many(body: CompleteManyRequest, state: State) -> dict[str, Any]:
    """Returns the jobs completed; items whose claim no longer holds the job are left
    out (no error)."""
    jobs = state.queue.complete_many([(i.job_id, i.claim_id, i.result) for i in body.items])
    state.metrics.reported_jobs(jobs)
    return {"jobs": [job_out(j) for j in jobs]}


@router.post(
    "/api/batch/fail",
    response_model=JobList,
    responses=errors(),
    summary="Report many failed attempts",
)
def fail_many(body: FailManyRequest, state: State) -> dict[str, Any]:
    """Returns the jobs changed; stale items are left out."""
    items = [(i.job_id, i.claim_id, i.error, i.retryable, i.delay_seconds) for i in body.items]
    jobs = state.queue.fail_many(items)
    state.metrics.reported_jobs(jobs)
    return {"jobs": [job_out(j) for j in jobs]}


@router.post(
    "/api/batch/heartbeat",
    response_model=JobList,
    responses=errors(),
    summary="Renew many leases",
)
def heartbeat_many(body: HeartbeatManyRequest, state: State) -> dict[str, Any]:
    """Returns the jobs still held; the others were lost to a reset or another claim."""
    items = [(i.job_id, i.claim_id) for i in body.items]
    jobs = state.queue.heartbeat_many(items, extend=body.extend_seconds)
    return {"jobs": [job_out(j) for j in jobs]}


@router.post(
    "/api/notifications/take",
    response_model=NotificationsOut,
    responses=errors(),
    summary="Take subscriber notifications to deliver",
)
def take_notifications(body: TakeNotificationsRequest, state: State) -> dict[str, Any]:
    """Subscribers of final jobs not yet told of the job's latest finish, with their
    jobs, taken for `lease_seconds` by this caller alone; report them with
    `/api/notifications/mark` once told (otherwise they are offered again)."""
    taken = state.queue.take_notifications(limit=body.limit, lease=body.lease_seconds)
    return {"notifications": [{"job": job_out(j), "subscribers": s} for j, s in taken]}


@router.post(
    "/api/notifications/mark",
    response_model=MarkedOut,
    responses=errors(),
    summary="Record subscribers as told",
)
def mark_notified(body: MarkNotifiedRequest, state: State) -> dict[str, Any]:
    count = state.queue.mark_notified([(i.job_id, i.subscriber) for i in body.items])
    return {"marked_count": count}


@router.post(
    "/api/claims/{claim_id:claim_id}/ack",
    response_model=AckedOut,
    responses=errors(),
    summary="Complete every running job of a claim",
)
def ack(claim_id: ClaimIdPath, state: State) -> dict[str, Any]:
    count = state.queue.ack(claim_id)
    state.metrics.acked_jobs(count)
    return {"acked_count": count}


@router.delete(
    "/api/claims/{claim_id:claim_id}",
    response_model=ResetOut,
    responses=errors(),
    summary="Give a claim's running jobs back to pending",
)
def release(claim_id: ClaimIdPath, state: State, queue: QueuesQuery = None) -> dict[str, Any]:
    """An admin's reset of one claim, or a worker giving back its own claim as it
    shuts down (of the queues named, when given). Unknown or finished claims reset
    nothing (`reset_count` 0)."""
    return {"reset_count": state.queue.release(claim_id, queue=queue_list(queue))}


@router.post(
    "/api/recover",
    response_model=RecoveredOut,
    responses=errors(),
    summary="Recover jobs whose lease expired",
)
def recover(state: State, queue: QueuesQuery = None) -> dict[str, Any]:
    """Back to pending, or failed when their attempts are spent (of the queues named,
    when given). Every worker runs this now and then (its rescuer), so the worker role
    may."""
    return {"recovered_count": state.queue.recover(queue=queue_list(queue))}
