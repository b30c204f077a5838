"""What worker runtimes use beside the basic claim-and-report routes: claiming one job
by id, snoozing, writing many endings at once, renewing leases, the worker registry,
periodic schedules and failed notification deliveries."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import Query, Request, Response

from conveyor.codec import to_json
from conveyor.errors import InvalidArgument
from conveyor.web.answers import answer, job_answer, job_json
from conveyor.web.auth import AuthError, Caller, Role
from conveyor.web.guard import bearer_token
from conveyor.web.limits import Limits, check_links
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
from conveyor.web.state import Registrants, State

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
def worker_seen(
    name: NamePath, body: WorkerRequest, state: State, role: Caller, request: Request
) -> None:
    """An entry names at most `max_worker_queues` queues, and all its fields together
    weigh at most `max_worker_entry_bytes` (422 otherwise). A worker token refreshes only
    entries it registered through this server (403 for another token's; an admin may
    write any)."""
    _check_entry(name, body, state.limits)
    owner = _owner(request, role)
    if owner is not None:
        known = state.registrants.owner(name)
        if known is not None and known != owner:
            raise AuthError(403, "forbidden", _NOT_YOURS.format(action="refresh"))
    state.queue.worker_seen(
        name, host=body.host, pid=body.pid, queues=body.queues, concurrency=body.concurrency,
        version=body.version, running=body.running, ttl=body.ttl_seconds,
        busy=None if body.busy is None else [(b.id, b.started_at) for b in body.busy],
    )  # fmt: skip
    if owner is not None:
        state.registrants.record(name, owner)


@route(router, "worker_stopped")
def worker_stopped(name: NamePath, state: State, role: Caller, request: Request) -> None:
    """A worker token removes only an entry it registered (or refreshed) through this
    server since it started; any other needs an admin (403)."""
    owner = _owner(request, role)
    if owner is not None and state.registrants.owner(name) != owner:
        raise AuthError(403, "forbidden", _NOT_YOURS.format(action="remove"))
    state.queue.worker_stopped(name)
    state.registrants.forget(name)


_NOT_YOURS = (
    "a worker token may {action} only the registry entries it registered through this "
    "server; another worker's entry needs the admin role"
)


def _owner(request: Request, role: Role) -> bytes | None:
    """The digest of a worker's token; None for an admin, who may write any entry."""
    if role.allows(Role.ADMIN):
        return None
    token = bearer_token(request.scope) or ""
    return Registrants.digest(token)


def _check_entry(name: str, body: WorkerRequest, limits: Limits) -> None:
    if len(body.queues) > limits.max_worker_queues:
        raise InvalidArgument(
            f"queues: expected at most {limits.max_worker_queues} queues, got {len(body.queues)}"
        )
    texts = [name, body.host, body.version, *body.queues]
    size = sum(len(text.encode("utf-8", "surrogatepass")) for text in texts)
    if size > limits.max_worker_entry_bytes:
        raise InvalidArgument(
            f"worker entry: expected its names to weigh at most "
            f"{limits.max_worker_entry_bytes} bytes together, got {size}"
        )


@route(router, "forget_workers")
def forget_workers(
    state: State,
    expired_for_seconds: Annotated[float, Query(ge=0, le=TEN_YEARS, allow_inf_nan=False)],
) -> dict[str, Any]:
    """Entries whose worker stopped refreshing them more than `expired_for_seconds`
    ago."""
    return {"removed_count": state.queue.forget_workers(expired_for_seconds)}


@route(router, "save_schedule")
def save_schedule(name: NamePath, body: ScheduleRequest, state: State, role: Caller) -> Any:
    """A worker token declares a new schedule, or declares again one with the same
    `task`, `queue` and `spec` (as a starting worker does); changing those of an
    existing schedule needs an admin (403). `first_slot` and `next_slot` lie within
    `schedule_horizon_seconds` of the database's now (422)."""
    now = state.queue.now()
    _check_slot(body.first_slot, now, state.limits, "first_slot")
    _check_slot(body.next_slot, now, state.limits, "next_slot")
    if not role.allows(Role.ADMIN):
        known = next((s for s in state.queue.schedules() if s.name == name), None)
        if known is not None and (known.task, known.queue, known.spec) != (
            body.task,
            body.queue,
            body.spec,
        ):
            raise AuthError(
                403, "forbidden",
                "changing an existing schedule's task, queue or spec needs the admin role",
            )  # fmt: skip
    saved = state.queue.save_schedule(
        name, task=body.task, queue=body.queue, spec=body.spec, first_slot=body.first_slot,
        next_slot=body.next_slot,
    )  # fmt: skip
    return to_json(saved)


@route(router, "run_schedule_slot")
def run_schedule_slot(name: NamePath, body: RunSlotRequest, state: State) -> Response:
    """However many workers ask for the same slot, one job is enqueued; the others get
    `{"job": null}`. The slot may lie at most `max_slot_lead_seconds` past the
    database's now and `schedule_horizon_seconds` before it; `next_slot` within
    `schedule_horizon_seconds` of it (422 otherwise): a slot far ahead would stop the
    schedule, as every later slot would count as taken. Its `after` ids count against
    `max_dependency_links`."""
    now = state.queue.now()
    _check_slot(body.slot, now, state.limits, "slot", lead=state.limits.max_slot_lead_seconds)
    _check_slot(body.next_slot, now, state.limits, "next_slot")
    options = enqueue_options(body, queue="default")
    check_links(len(options.get("after") or ()), state.limits)
    job = state.queue.run_schedule_slot(
        name, slot=body.slot, next_slot=body.next_slot, task=body.task, payload=body.payload,
        queue=options["queue"], priority=options.get("priority", 0),
        max_attempts=options.get("max_attempts"),
    )  # fmt: skip
    return answer({"job": None if job is None else job_json(job)})


def _check_slot(
    slot: datetime | None, now: datetime, limits: Limits, what: str, lead: float | None = None
) -> None:
    """``slot`` between ``schedule_horizon_seconds`` before the database's ``now`` and
    ``lead`` (default: the same horizon) after it."""
    if slot is None:
        return
    horizon = timedelta(seconds=limits.schedule_horizon_seconds)
    ahead = horizon if lead is None else timedelta(seconds=lead)
    if not now - horizon <= slot <= now + ahead:
        raise InvalidArgument(
            f"{what}: expected a time from {(now - horizon).isoformat()} to "
            f"{(now + ahead).isoformat()} (the database's now, {now.isoformat()}, "
            f"{-horizon.total_seconds():+g} s to {ahead.total_seconds():+g} s), "
            f"got {slot.isoformat()}"
        )


@route(router, "roll_up_throughput")
def roll_up_throughput(
    state: State,
    keep_minutes_seconds: Annotated[float, Query(gt=0, le=TEN_YEARS, allow_inf_nan=False)],
    keep_hours_seconds: Annotated[float, Query(gt=0, le=TEN_YEARS, allow_inf_nan=False)],
) -> dict[str, Any]:
    """Per-minute throughput older than `keep_minutes_seconds` is summed into hourly
    rows, and hourly rows older than `keep_hours_seconds` deleted."""
    written = state.queue.roll_up_throughput(
        keep_minutes=keep_minutes_seconds, keep_hours=keep_hours_seconds
    )
    return {"written_count": written}


@route(router, "fold_counts")
def fold_counts(state: State) -> dict[str, Any]:
    return {"folded_count": state.queue.fold_counts()}
