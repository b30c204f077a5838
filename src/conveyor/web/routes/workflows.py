"""Workflows over HTTP: enqueue a run (worker), read and list runs and a job's parents
(reader), cancel and retry a run (admin)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from conveyor.ops.defaults import MAX_JOB_ID
from conveyor.queue import MAX_LIST
from conveyor.web.answers import answer, trimmed
from conveyor.web.auth import Role, require
from conveyor.web.models import Int32, JobList, JobOut, Key, Name, When
from conveyor.web.router import Router
from conveyor.web.routes.common import JobIdPath, errors
from conveyor.web.state import State
from conveyor.workflow import MAX_STEPS, Workflow, WorkflowRun, summary_json

router = Router(tags=["workflows"])
reader = [require(Role.READER)]
worker = [require(Role.WORKER)]
admin = [require(Role.ADMIN)]

WorkflowIdPath = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="the run's id")]


class StepItem(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    name: Name | None = Field(None, description="unique in the run (default: from the task)")
    task: Name
    payload: Any = None
    after: Annotated[list[Name], Field(max_length=1000)] = Field(
        default_factory=list, description="names of earlier steps this one runs after"
    )
    queue: Name | None = None
    key: Key | None = None
    priority: Int32 | None = Field(None, description="lower runs first")
    run_at: When | None = Field(None, description="not before this time (with a UTC offset)")
    max_attempts: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    group: Name | None = Field(None, description="its concurrency group")
    on_dependency_failure: Literal["cancel", "run"] = Field(
        "cancel", description="a step it runs after failed or was cancelled: cancel it, or run it"
    )


class WorkflowRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    label: Annotated[str, Field(min_length=1, max_length=200)] = "workflow"
    steps: Annotated[list[StepItem], Field(min_length=1, max_length=MAX_STEPS)]


class WorkflowOut(BaseModel):
    id: int
    label: str
    status: Literal["running", "completed", "failed", "cancelled"]
    counts: dict[str, int]
    total: int
    created_at: str
    jobs: list[JobOut] | None = None
    truncated: bool | None = None


class WorkflowList(BaseModel):
    workflows: list[WorkflowOut]


def _run_answer(run: WorkflowRun, max_bytes: int, status_code: int = 200) -> Response:
    """The run, its steps' jobs whole until the byte budget is spent, then without
    payload and result (``truncated``)."""
    rendered = trimmed(run.jobs.values(), max_bytes).render(**summary_json(run))
    rendered.status_code = status_code
    return rendered


@router.post(
    "/api/workflows",
    response_model=WorkflowOut,
    status_code=201,
    dependencies=worker,
    responses=errors(409),
    summary="Enqueue a workflow run",
)
def enqueue_workflow(body: WorkflowRequest, state: State) -> Response:
    """Every step in one transaction, or none (a step whose key an active job holds:
    409). A step runs once every step it names in `after` completed."""
    data = body.model_dump(exclude_none=True)
    run = state.queue.enqueue_workflow(Workflow.from_wire(data))
    state.metrics.enqueued_jobs(list(run.jobs.values()))
    return _run_answer(run, state.limits.max_response_bytes, 201)


@router.get(
    "/api/workflows",
    response_model=WorkflowList,
    dependencies=reader,
    responses=errors(),
    summary="List workflow runs",
)
def list_workflows(
    state: State,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 100,
    after: Annotated[int | None, Query(ge=0, le=MAX_JOB_ID, description="last id seen")] = None,
    newest_first: bool = False,
) -> Response:
    """Runs in id order with their status and counts by status (`newest_first`:
    descending, `after` meaning ids below it)."""
    runs = state.queue.workflows(limit=limit, after=after, newest_first=newest_first)
    return answer({"workflows": [summary_json(r) for r in runs]})


@router.get(
    "/api/workflows/{workflow_id}",
    response_model=WorkflowOut,
    dependencies=reader,
    responses=errors(404),
    summary="A workflow run and its steps",
)
def get_workflow(workflow_id: WorkflowIdPath, state: State) -> Response:
    """The run's status, counts by status and steps (jobs, with `step`)."""
    return _run_answer(state.queue.workflow(workflow_id), state.limits.max_response_bytes)


@router.post(
    "/api/workflows/{workflow_id}/cancel",
    response_model=WorkflowOut,
    dependencies=admin,
    responses=errors(404),
    summary="Cancel every step of a run not yet final",
)
def cancel_workflow(workflow_id: WorkflowIdPath, state: State) -> Response:
    return _run_answer(state.queue.cancel_workflow(workflow_id), state.limits.max_response_bytes)


@router.post(
    "/api/workflows/{workflow_id}/retry",
    response_model=WorkflowOut,
    dependencies=admin,
    responses=errors(404, 409),
    summary="Retry a run's failed steps and those after them",
)
def retry_workflow(workflow_id: WorkflowIdPath, state: State) -> Response:
    """The failed steps, and the steps after them that ended (cancelled because of the
    failure, or run anyway), pending again; each runs once its parents completed."""
    return _run_answer(state.queue.retry_workflow(workflow_id), state.limits.max_response_bytes)


@router.get(
    "/api/jobs/{job_id:job_id}/parents",
    response_model=JobList,
    dependencies=reader,
    responses=errors(404),
    summary="The jobs a job runs after",
)
def parents(job_id: JobIdPath, state: State) -> Response:
    """Whole (results included) until the byte budget is spent (`truncated`)."""
    jobs = state.queue.parents(job_id)
    return trimmed(jobs, state.limits.max_response_bytes).render()
