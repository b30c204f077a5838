"""Operating the queue: retry, cancel, run now, delete, reset claims, prune, complete,
cancel or fail by key."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Response

from conveyor.web.answers import job_answer
from conveyor.web.models import (
    TEN_YEARS,
    CancelByKeyRequest,
    CompleteByKeyRequest,
    FailByKeyRequest,
    PruneRequest,
    RunNowRequest,
)
from conveyor.web.router import Router, route
from conveyor.web.routes.common import (
    JobIdPath,
    QueuePath,
    QueuesQuery,
    TasksQuery,
    queue_list,
)
from conveyor.web.state import State

router = Router(tags=["admin"])


@route(router, "retry")
def retry(
    job_id: JobIdPath,
    state: State,
    reset_attempts: Annotated[
        bool, Query(description="false: keep the attempts spent; refused once they are all spent")
    ] = True,
) -> Response:
    """A failed, cancelled or completed job back to pending, attempts reset."""
    return job_answer(state.queue.retry(job_id, reset_attempts=reset_attempts))


@route(router, "release_job")
def release_job(job_id: JobIdPath, state: State) -> Response:
    """An admin's reset of one job: its claim no longer holds it, and any write by that
    claim is refused."""
    return job_answer(state.queue.release_job(job_id))


@route(router, "cancel")
def cancel(job_id: JobIdPath, state: State) -> Response:
    job = state.queue.cancel(job_id)
    state.metrics.reported_jobs([job])
    return job_answer(job)


@route(router, "reset_claims")
def reset_claims(
    state: State,
    older_than_minutes: Annotated[float, Query(ge=0, le=TEN_YEARS / 60, allow_inf_nan=False)],
    queue: QueuesQuery = None,
    task: TasksQuery = None,
) -> dict[str, Any]:
    """Every running job (of the queues and tasks named, when given) claimed more than
    `older_than_minutes` ago goes back to pending."""
    count = state.queue.reset_claims(
        older_than_minutes * 60, queue=queue_list(queue), task=queue_list(task)
    )
    return {"reset_count": count}


@route(router, "prune")
def prune(body: PruneRequest, state: State) -> dict[str, Any]:
    removed = state.queue.prune(older_than=body.older_than_seconds, statuses=body.statuses)
    return {"removed_count": removed}


@route(router, "complete_by_key")
def complete_by_key(queue: QueuePath, body: CompleteByKeyRequest, state: State) -> dict[str, Any]:
    count = state.queue.complete_by_key(
        body.key, queue=queue, result=body.result, include_failed=body.include_failed
    )
    state.metrics.acked_jobs(count, queue)
    return {"completed_count": count}


@route(router, "cancel_by_key")
def cancel_by_key(queue: QueuePath, body: CancelByKeyRequest, state: State) -> dict[str, Any]:
    """Every pending or running job of the queue with the key is cancelled (`cancelled_count`
    0 when none is active). A running job's worker has its later writes refused."""
    return {"cancelled_count": state.queue.cancel_by_key(body.key, queue=queue)}


@route(router, "fail_by_key")
def fail_by_key(queue: QueuePath, body: FailByKeyRequest, state: State) -> dict[str, Any]:
    """Every pending or running job of the queue with the key fails for good with `error`
    (`error_kind` terminal, no retry), whatever attempts remain. A running job's worker
    has its later writes refused."""
    count = state.queue.fail_by_key(body.key, body.error, queue=queue)
    state.metrics.failed_jobs(count, queue)
    return {"failed_count": count}


@route(router, "run_now")
def run_now(job_id: JobIdPath, state: State) -> Response:
    """A pending job due now: a scheduled job, or one waiting out its retry back-off,
    stops waiting (dependencies still hold it). 409 when it is not pending."""
    return job_answer(state.queue.run_now(job_id))


@route(router, "run_now_all")
def run_now_all(body: RunNowRequest, state: State) -> dict[str, Any]:
    """At most `limit` pending jobs not yet due (of the queue, task and kind given),
    soonest first, become due now, in one guarded statement. Repeat while the answer
    has `limit` ids."""
    ids = state.queue.run_now_all(queue=body.queue, task=body.task, kind=body.kind,
                                  limit=body.limit)  # fmt: skip
    return {"changed_count": len(ids), "ids": ids}


@route(router, "delete_job")
def delete_job(job_id: JobIdPath, state: State) -> Response:
    """A completed, failed or cancelled job is deleted with its subscribers and its
    dependency edges. 409 for a pending or running job: cancel it first."""
    state.queue.delete_job(job_id)
    return Response(status_code=204)
