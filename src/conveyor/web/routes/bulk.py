"""Bulk admin actions on a filtered selection: retry or cancel every job that matches
the filters of ``GET /api/jobs`` ("retry all failed in queue mail").

Each job changes on its own, by the same guarded statement as the single-job route, so
a job that moved on meanwhile is skipped (and said so), never forced. One request
handles at most ``MAX_BULK`` jobs in id order and answers where it stopped
(``next_after``): the caller repeats with ``after`` until ``next_after`` is null. The
jobs it changed no longer match, so a repeat after a crash or a timeout is harmless."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conveyor.errors import InvalidTransition, JobNotFound
from conveyor.job import Job
from conveyor.web.models import BulkCancelRequest, BulkRetryRequest, Selection
from conveyor.web.router import Router, route
from conveyor.web.state import ServerState, State

router = Router(tags=["admin"])

# Jobs read per statement: their payloads are held in memory while they change.
_PAGE = 100


@route(router, "bulk_retry")
def bulk_retry(body: BulkRetryRequest, state: State) -> dict[str, Any]:
    """Failed (by default), cancelled or completed jobs matching the filters go back to
    pending with their attempts reset, up to `limit` of them in id order. A job another
    active job's key blocks is skipped."""
    return _apply(state, body, body.status, state.queue.retry)


@route(router, "bulk_cancel")
def bulk_cancel(body: BulkCancelRequest, state: State) -> dict[str, Any]:
    """Pending (by default) or running jobs matching the filters are cancelled, up to
    `limit` of them in id order; a running task's later reports are refused."""

    def cancel(job_id: int) -> Job:
        job = state.queue.cancel(job_id)
        state.metrics.reported_jobs([job])
        return job

    return _apply(state, body, body.status, cancel)


def _apply(
    state: ServerState, body: Selection, status: str, change: Callable[[int], Job]
) -> dict[str, Any]:
    changed: list[int] = []
    skipped: list[dict[str, Any]] = []
    cursor = body.after
    seen = 0
    while seen < body.limit:
        wanted = min(_PAGE, body.limit - seen)
        page = state.queue.jobs(
            queue=body.queue, status=status, key=body.key, task=body.task, limit=wanted,
            after=cursor, created_after=body.created_after, created_before=body.created_before,
        )  # fmt: skip
        for job in page:
            try:
                changed.append(change(job.id).id)
            except (InvalidTransition, JobNotFound) as exc:  # it moved on meanwhile
                skipped.append({"id": job.id, "reason": exc.message})
        seen += len(page)
        if len(page) < wanted:
            return _out(changed, skipped, None)
        cursor = page[-1].id
    return _out(changed, skipped, cursor)


def _out(changed: list[int], skipped: list[dict[str, Any]], more: int | None) -> dict[str, Any]:
    return {"changed_count": len(changed), "ids": changed, "skipped": skipped, "next_after": more}
