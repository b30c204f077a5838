"""Operating the queue: retry, cancel, reset claims, prune, complete by key."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Response

from conveyor.web.answers import job_answer
from conveyor.web.auth import Role, require
from conveyor.web.models import (
    TEN_YEARS,
    CompleteByKeyRequest,
    CompletedOut,
    JobOut,
    PruneRequest,
    RemovedOut,
    ResetOut,
)
from conveyor.web.router import Router
from conveyor.web.routes.common import JobIdPath, QueuePath, QueuesQuery, errors, queue_list
from conveyor.web.state import State

router = Router(tags=["admin"], dependencies=[require(Role.ADMIN)])


@router.post(
    "/api/jobs/{job_id:job_id}/retry",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Run a final job again",
)
def retry(
    job_id: JobIdPath,
    state: State,
    reset_attempts: Annotated[
        bool, Query(description="false: keep the attempts spent; refused once they are all spent")
    ] = True,
) -> Response:
    """A failed, cancelled or completed job back to pending, attempts reset."""
    return job_answer(state.queue.retry(job_id, reset_attempts=reset_attempts))


@router.post(
    "/api/jobs/{job_id:job_id}/release",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Put a running job back to pending, whoever holds it",
)
def release_job(job_id: JobIdPath, state: State) -> Response:
    """An admin's reset of one job: its claim no longer holds it, and any write by that
    claim is refused."""
    return job_answer(state.queue.release_job(job_id))


@router.post(
    "/api/jobs/{job_id:job_id}/cancel",
    response_model=JobOut,
    responses=errors(404, 409),
    summary="Cancel a pending or running job",
)
def cancel(job_id: JobIdPath, state: State) -> Response:
    job = state.queue.cancel(job_id)
    state.metrics.reported_jobs([job])
    return job_answer(job)


@router.post(
    "/api/claims/reset",
    response_model=ResetOut,
    responses=errors(),
    summary="Reset old claims",
)
def reset_claims(
    state: State,
    older_than_minutes: Annotated[float, Query(ge=0, le=TEN_YEARS / 60, allow_inf_nan=False)],
    queue: QueuesQuery = None,
) -> dict[str, Any]:
    """Every running job (of the queues named, when given) claimed more than
    `older_than_minutes` ago goes back to pending."""
    count = state.queue.reset_claims(older_than_minutes * 60, queue=queue_list(queue))
    return {"reset_count": count}


@router.post(
    "/api/prune",
    response_model=RemovedOut,
    responses=errors(),
    summary="Delete old final jobs",
)
def prune(body: PruneRequest, state: State) -> dict[str, Any]:
    removed = state.queue.prune(older_than=body.older_than_seconds, statuses=body.statuses)
    return {"removed_count": removed}


@router.post(
    "/api/queues/{queue:name}/complete-by-key",
    response_model=CompletedOut,
    responses=errors(),
    summary="Complete the active job with a key: the work was done elsewhere",
)
def complete_by_key(queue: QueuePath, body: CompleteByKeyRequest, state: State) -> dict[str, Any]:
    count = state.queue.complete_by_key(
        body.key, queue=queue, result=body.result, include_failed=body.include_failed
    )
    state.metrics.acked_jobs(count, queue)
    return {"completed_count": count}
