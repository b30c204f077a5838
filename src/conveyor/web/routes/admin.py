"""Operating the queue: retry, cancel, reset claims, prune, complete by key."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Response

from conveyor.web.answers import job_answer
from conveyor.web.models import (
    TEN_YEARS,
    CompleteByKeyRequest,
    PruneRequest,
)
from conveyor.web.router import Router, route
from conveyor.web.routes.common import JobIdPath, QueuePath, QueuesQuery, queue_list
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
) -> dict[str, Any]:
    """Every running job (of the queues named, when given) claimed more than
    `older_than_minutes` ago goes back to pending."""
    count = state.queue.reset_claims(older_than_minutes * 60, queue=queue_list(queue))
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
