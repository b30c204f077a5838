"""What workers do: claim, then report on the claimed jobs (one at a time or in
batches), acknowledge or give back a claim, recover expired leases."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import Response

from conveyor.errors import InvalidArgument
from conveyor.job import Claim
from conveyor.ops.reports import Report
from conveyor.web.answers import Budget, budgeted, job_answer, job_json, trimmed
from conveyor.web.auth import Caller, Role
from conveyor.web.limits import Limits
from conveyor.web.models import (
    ClaimRequest,
    CompleteManyRequest,
    CompleteRequest,
    FailManyRequest,
    FailRequest,
    HeartbeatManyRequest,
    HeartbeatRequest,
    MarkNotifiedRequest,
    ProgressRequest,
    ReportRequest,
    TakeNotificationsRequest,
)
from conveyor.web.router import Router, route
from conveyor.web.routes.common import (
    ClaimIdPath,
    JobIdPath,
    QueuePath,
    QueuesQuery,
    queue_list,
)
from conveyor.web.state import ServerState, State

router = Router(tags=["work"])


@route(router, "claim")
def claim(queue: QueuePath, body: ClaimRequest, state: State, role: Caller) -> Response:
    """Claim up to `limit` claimable jobs under one new claim id, by priority then FIFO.
    `ack`: a previous claim id whose running jobs are completed first, in the same
    transaction (the batch protocol: acknowledge the last batch with the next request).
    `remaining`: the jobs of the queue still claimable. `worker` names the claimant in
    the jobs' records (default: `http:` and the token's role). When the jobs outgrow the
    server's byte budget, those that do not fit go back to pending, no attempt spent,
    and `truncated` says so."""
    _check_claim(body, state.limits)
    check_lease(body.lease_seconds, state.limits)
    taken = state.queue.claim(
        queue,
        limit=body.limit,
        lease=body.lease_seconds,
        worker=body.worker or caller_name(role),
        ack=body.ack,
        count_remaining=body.count_remaining,
        report=None if body.report is None else endings(body.report),
    )
    return claim_answer(state, taken)


def endings(body: ReportRequest) -> Report:
    """A report's items as the queue takes them."""
    return Report(
        completed=[(i.job_id, i.claim_id, i.result) for i in body.completed],
        failed=[(i.job_id, i.claim_id, i.error, i.retryable, i.delay_seconds)
                for i in body.failed],
        snoozed=[(i.job_id, i.claim_id, i.delay_seconds) for i in body.snoozed],
    )  # fmt: skip


def claim_answer(state: ServerState, taken: Claim) -> Response:
    """The claimant's answer: its claim id, and the jobs that fit the byte budget; the
    others are given back at once (a snooze of no time, which spends no attempt)."""
    budget, left = budgeted(taken.jobs, state.limits.max_response_bytes, holder=taken.id)
    remaining = taken.remaining
    if left:
        back = state.queue.report(snoozed=[(job.id, taken.id, 0.0) for job in left])
        if remaining is not None:
            remaining += len(back)
    kept = taken.jobs[: len(taken.jobs) - len(left)]
    state.metrics.claimed_jobs(replace(taken, jobs=kept))
    return budget.render(
        claim_id=taken.id,
        queue=taken.queue,
        remaining=remaining,
        acked=taken.acked,
        reported={str(k): str(v) for k, v in taken.reported.items()},
    )


def caller_name(role: Role) -> str:
    """What a claim made without a worker name records: the caller's role, never this
    server's own host and process."""
    return f"http:{role}"


def check_lease(seconds: float | None, limits: Limits, what: str = "lease_seconds") -> None:
    """Every lease a request asks for, however it is named, within the server's bounds."""
    if seconds is not None and not limits.min_lease_seconds <= seconds <= limits.max_lease_seconds:
        raise InvalidArgument(
            f"{what}: expected {limits.min_lease_seconds:g} to {limits.max_lease_seconds:g} "
            f"seconds, got {seconds:g}"
        )


def _check_claim(body: ClaimRequest, limits: Limits) -> None:
    if body.limit > limits.max_claim:
        raise InvalidArgument(
            f"limit: expected at most {limits.max_claim} jobs per claim, got {body.limit}"
        )


@route(router, "complete")
def complete(job_id: JobIdPath, body: CompleteRequest, state: State) -> Response:
    job = state.queue.complete(job_id, body.claim_id, body.result)
    state.metrics.reported_jobs([job])
    return job_answer(job, holder=body.claim_id)


@route(router, "fail")
def fail(job_id: JobIdPath, body: FailRequest, state: State) -> Response:
    """Retryable with attempts left: back to pending after `delay_seconds` (default: the
    server's backoff). Otherwise the job is failed for good."""
    job = state.queue.fail(
        job_id, body.claim_id, body.error, retryable=body.retryable, delay=body.delay_seconds
    )
    state.metrics.reported_jobs([job])
    return job_answer(job, holder=body.claim_id)


@route(router, "heartbeat")
def heartbeat(job_id: JobIdPath, body: HeartbeatRequest, state: State) -> Response:
    """`extend_seconds` is bounded as a claim's lease is."""
    check_lease(body.extend_seconds, state.limits, "extend_seconds")
    job = state.queue.heartbeat(job_id, body.claim_id, extend=body.extend_seconds)
    return job_answer(job, holder=body.claim_id)


@route(router, "progress")
def progress(job_id: JobIdPath, body: ProgressRequest, state: State) -> Response:
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
    return job_answer(job, holder=body.claim_id)


@route(router, "complete_many")
def complete_many(body: CompleteManyRequest, state: State) -> Response:
    """Returns the jobs completed; items whose claim no longer holds the job are left
    out (no error). Past the byte budget, jobs come without payload and result."""
    jobs = state.queue.complete_many([(i.job_id, i.claim_id, i.result) for i in body.items])
    state.metrics.reported_jobs(jobs)
    holders = {i.job_id: i.claim_id for i in body.items}
    return trimmed(jobs, state.limits.max_response_bytes, holder=holders).render()


@route(router, "fail_many")
def fail_many(body: FailManyRequest, state: State) -> Response:
    """Returns the jobs changed; stale items are left out. Past the byte budget, jobs
    come without payload and result."""
    items = [(i.job_id, i.claim_id, i.error, i.retryable, i.delay_seconds) for i in body.items]
    jobs = state.queue.fail_many(items)
    state.metrics.reported_jobs(jobs)
    holders = {i.job_id: i.claim_id for i in body.items}
    return trimmed(jobs, state.limits.max_response_bytes, holder=holders).render()


@route(router, "heartbeat_many")
def heartbeat_many(body: HeartbeatManyRequest, state: State) -> Response:
    """Returns the jobs still held; the others were lost to a reset or another claim.
    `extend_seconds` is bounded as a claim's lease is. Past the byte budget, jobs come
    without payload and result."""
    check_lease(body.extend_seconds, state.limits, "extend_seconds")
    items = [(i.job_id, i.claim_id) for i in body.items]
    jobs = state.queue.heartbeat_many(items, extend=body.extend_seconds)
    holders = dict(items)
    return trimmed(jobs, state.limits.max_response_bytes, holder=holders).render()


@route(router, "take_notifications")
def take_notifications(body: TakeNotificationsRequest, state: State) -> Response:
    """Subscribers of final jobs not yet told of the job's latest finish, with their
    jobs, taken for `lease_seconds` by this caller alone; report them with
    `/api/notifications/mark` once told (otherwise they are offered again). When they
    outgrow the byte budget the rest stay taken until the lease ends (`truncated`)."""
    check_lease(body.lease_seconds, state.limits)
    taken = state.queue.take_notifications(limit=body.limit, lease=body.lease_seconds)
    budget = Budget(state.limits.max_response_bytes)
    for job, subscribers in taken:
        if not budget.add({"job": job_json(job), "subscribers": subscribers}):
            break
    return budget.render("notifications")


@route(router, "mark_notified")
def mark_notified(body: MarkNotifiedRequest, state: State) -> dict[str, Any]:
    count = state.queue.mark_notified([(i.job_id, i.subscriber) for i in body.items])
    return {"marked_count": count}


@route(router, "ack")
def ack(claim_id: ClaimIdPath, state: State) -> dict[str, Any]:
    count = state.queue.ack(claim_id)
    state.metrics.acked_jobs(count)
    return {"acked_count": count}


@route(router, "release")
def release(claim_id: ClaimIdPath, state: State, queue: QueuesQuery = None) -> dict[str, Any]:
    """An admin's reset of one claim, or a worker giving back its own claim as it
    shuts down (of the queues named, when given). Unknown or finished claims reset
    nothing (`reset_count` 0)."""
    return {"reset_count": state.queue.release(claim_id, queue=queue_list(queue))}


@route(router, "recover")
def recover(state: State, queue: QueuesQuery = None) -> dict[str, Any]:
    """Back to pending, or failed when their attempts are spent (of the queues named,
    when given). Every worker runs this now and then (its rescuer), so the worker role
    may."""
    return {"recovered_count": state.queue.recover(queue=queue_list(queue))}
