"""Workflows over HTTP: enqueue a run (worker), read and list runs and a job's parents
(reader), cancel and retry a run (admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Request, Response

from conveyor.ops import workflows as runs
from conveyor.ops.defaults import MAX_JOB_ID
from conveyor.ops.idempotency import check_key
from conveyor.queue import MAX_LIST
from conveyor.web import idempotency
from conveyor.web.answers import answer, trimmed
from conveyor.web.idempotency import IdempotencyKey
from conveyor.web.models import WorkflowRequest
from conveyor.web.router import Router, route
from conveyor.web.routes.common import JobIdPath
from conveyor.web.state import State
from conveyor.workflow import (
    MAX_LABEL_LENGTH,
    Workflow,
    WorkflowRun,
    WorkflowStatus,
    summary_json,
)

router = Router(tags=["workflows"])

WorkflowIdPath = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="the run's id")]


def _run_answer(run: WorkflowRun, max_bytes: int, status_code: int = 200) -> Response:
    """The run, its steps' jobs whole until the byte budget is spent, then without
    payload and result (``truncated``)."""
    rendered = trimmed(run.jobs.values(), max_bytes).render(**summary_json(run))
    rendered.status_code = status_code
    return rendered


@route(router, "enqueue_workflow")
def enqueue_workflow(
    body: WorkflowRequest, state: State, request: Request, idempotency_key: IdempotencyKey = None
) -> Response:
    """Every step in one transaction, or none (a step whose key an active job holds:
    409). A step runs once every step it names in `after` completed. With an
    `Idempotency-Key` header, the same request sent again gets the first answer
    (`Idempotent-Replayed: true`) and adds nothing."""
    if idempotency_key is not None:
        check_key(idempotency_key)
    data = body.model_dump(exclude_none=True)
    workflow = Workflow.from_wire(data)

    def render(run: WorkflowRun) -> Response:
        return _run_answer(run, state.limits.max_response_bytes, 201)

    def created(run: WorkflowRun) -> None:
        state.metrics.enqueued_jobs(list(run.jobs.values()))

    if idempotency_key is None:
        run = state.queue.enqueue_workflow(workflow)
        created(run)
        return render(run)
    return idempotency.run(
        state, request, idempotency_key, body,
        lambda: runs.enqueue_workflow(state.queue.defaults, workflow), render,
        sent=("publish", "default", len(data.get("steps") or ()),
              lambda run: [j.id for j in run.jobs.values()]),
        created=created,
    )  # fmt: skip


@route(router, "workflows")
def list_workflows(
    state: State,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 100,
    after: Annotated[int | None, Query(ge=0, le=MAX_JOB_ID, description="last id seen")] = None,
    newest_first: bool = False,
    status: Annotated[WorkflowStatus | None, Query(description="only runs in this status")] = None,
    label: Annotated[
        str | None, Query(max_length=MAX_LABEL_LENGTH, description="only runs with this label")
    ] = None,
) -> Response:
    """Runs in id order with their status and counts by status (`newest_first`:
    descending, `after` meaning ids below it); `status` and `label` filter them."""
    runs = state.queue.workflows(
        limit=limit,
        after=after,
        newest_first=newest_first,
        status=None if status is None else str(status),
        label=label,
    )
    return answer({"workflows": [summary_json(r) for r in runs]})


@route(router, "workflow")
def get_workflow(workflow_id: WorkflowIdPath, state: State) -> Response:
    """The run's status, counts by status and steps (jobs, with `step`)."""
    return _run_answer(state.queue.workflow(workflow_id), state.limits.max_response_bytes)


@route(router, "cancel_workflow")
def cancel_workflow(workflow_id: WorkflowIdPath, state: State) -> Response:
    return _run_answer(state.queue.cancel_workflow(workflow_id), state.limits.max_response_bytes)


@route(router, "retry_workflow")
def retry_workflow(workflow_id: WorkflowIdPath, state: State) -> Response:
    """The failed steps, and the steps after them that ended (cancelled because of the
    failure, or run anyway), pending again; each runs once its parents completed."""
    return _run_answer(state.queue.retry_workflow(workflow_id), state.limits.max_response_bytes)


@route(router, "parents")
def parents(job_id: JobIdPath, state: State) -> Response:
    """Whole (results included) until the byte budget is spent (`truncated`)."""
    jobs = state.queue.parents(job_id)
    return trimmed(jobs, state.limits.max_response_bytes).render()
