"""The JSON bodies of the HTTP API, as pydantic models (they are the OpenAPI schema).

Request models are strict (``"5"`` is not a number) and forbid unknown fields, so a
typo is an error rather than a silently ignored option. Bounds that the library also
checks are repeated here so the schema documents them."""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    create_model,
)

from conveyor.info import QueueSettings, ScheduleInfo  # noqa: F401 (answers of their own)
from conveyor.job import Job, Stats, Status
from conveyor.ops.defaults import MAX_CLAIM, MAX_JOB_ID
from conveyor.options import OPTIONS
from conveyor.validation import INT32, MAX_KEY_LENGTH, MAX_NAME_LENGTH, NAME_PATTERN
from conveyor.web.auth import Role
from conveyor.workflow import MAX_STEPS

TEN_YEARS = 10 * 365 * 86400.0
MAX_BATCH = 10_000
# Names refuse control characters and bidirectional text controls, as the library does.
_NO_CONTROL = NAME_PATTERN

Name = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL)
]
Key = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_KEY_LENGTH, pattern=_NO_CONTROL)
]
ClaimId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=_NO_CONTROL)]
JobId = Annotated[int, Field(ge=1, le=MAX_JOB_ID)]
Int32 = Annotated[int, Field(ge=-INT32, le=INT32)]
Count = Annotated[int, Field(ge=0, le=INT32)]
Seconds = Annotated[float, Field(ge=0, le=TEN_YEARS, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0, le=TEN_YEARS, allow_inf_nan=False)]
# The schema cannot carry the server's configured bounds; the route checks them (422).
_LEASE_BOUNDS = "within the server's lease bounds (default: at most 24 hours)"
LeaseSeconds = Annotated[
    float, Field(gt=0, le=TEN_YEARS, allow_inf_nan=False, description=_LEASE_BOUNDS)
]


def _iso_text(value: Any) -> Any:
    # Lax datetimes would also take numbers (as Unix time); the API takes ISO 8601 only.
    if not isinstance(value, str):
        raise ValueError("expected an ISO 8601 date-time string")
    return value


# JSON text carries datetimes as strings, which a strict model would refuse.
When = Annotated[AwareDatetime, Field(strict=False), BeforeValidator(_iso_text)]


def _iso_datetime(value: Any) -> Any:
    # Query strings are text, and a lax datetime reads "0.5" as Unix time: parse ISO here.
    if not isinstance(value, str):
        raise ValueError("expected an ISO 8601 date-time string")
    return datetime.fromisoformat(value)


# A datetime in a query string: ISO 8601 with a UTC offset.
WhenQuery = Annotated[AwareDatetime, BeforeValidator(_iso_datetime)]


FinalStatus = Literal["completed", "failed", "cancelled"]


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


# -- requests ---------------------------------------------------------------------------
Attempts = Annotated[int, Field(ge=1, le=1_000_000)]
JobIds = Annotated[list[JobId], Field(max_length=1000)]
# How each kind of enqueue option (``conveyor.options``) is written in a body.
_OPTION_TYPES: dict[str, Any] = {
    "name": Name, "key": Key, "int32": Int32, "time": When, "attempts": Attempts,
    "job_ids": JobIds, "seconds": Seconds, "any": Any,
}  # fmt: skip
_ITEM_QUEUE = "default: the request's queue, else 'default'"


def _option_fields(*, item: bool) -> dict[str, Any]:
    """The fields of the enqueue options a body carries: those a batch item may set
    (``item``), or those only a single enqueue may (the dedupe policy)."""
    fields: dict[str, Any] = {}
    for option in OPTIONS.values():
        if option.local or option.item is not item:
            continue
        kind: Any = (
            Literal.__getitem__(option.choices) if option.choices else _OPTION_TYPES[option.kind]
        )
        text = option.help
        if option.name == "queue":  # an item's queue falls back on the request's
            fields[option.field] = (kind | None, Field(None, description=_ITEM_QUEUE))
        elif option.default is None:
            fields[option.field] = (kind | None, Field(None, description=text))
        else:
            fields[option.field] = (kind, Field(option.default, description=text))
    return fields


class _Job(_Request):
    """What every enqueue names beside its options: the task and its payload."""

    task: Name
    payload: Any = None


if TYPE_CHECKING:  # the fields below are read through ``enqueue_options``

    class EnqueueItem(_Job): ...

    class EnqueueRequest(EnqueueItem): ...

    class RunSlotRequest(EnqueueItem):
        slot: datetime
        next_slot: datetime | None

else:
    # Built from ``conveyor.options.EnqueueOptions``: an option declared there is a
    # field here.
    EnqueueItem = create_model("EnqueueItem", __base__=_Job, **_option_fields(item=True))
    EnqueueRequest = create_model(
        "EnqueueRequest", __base__=EnqueueItem, **_option_fields(item=False)
    )
    RunSlotRequest = create_model(
        "RunSlotRequest", __base__=EnqueueItem, slot=(When, ...), next_slot=(When | None, None)
    )


def enqueue_options(body: BaseModel, *, queue: str | None = None) -> dict[str, Any]:
    """The enqueue options a body sets, by their names in ``EnqueueOptions`` (left out
    when absent or null, so the queue's defaults apply)."""
    sent = body.model_dump(exclude_unset=True, exclude_none=True)
    options = {name: sent[o.field] for name, o in OPTIONS.items() if o.field in sent}
    if queue is not None:
        options.setdefault("queue", queue)
    return options


class BatchEnqueueRequest(_Request):
    jobs: Annotated[list[EnqueueItem], Field(max_length=MAX_BATCH)]
    queue: Name = "default"
    ids_only: bool = Field(False, description='answer {"ids": [...]} instead of the jobs')


class ClaimRequest(_Request):
    limit: Annotated[int, Field(ge=1, le=MAX_CLAIM)] = 1
    lease_seconds: LeaseSeconds = 300.0
    ack: ClaimId | None = Field(None, description="a previous claim id, completed first")
    worker: Name | None = None
    count_remaining: bool = True
    report: ReportRequest | None = Field(
        None, description="endings of earlier runs, written first in the same transaction"
    )


class CompleteRequest(_Request):
    claim_id: ClaimId
    result: Any = None


class FailRequest(_Request):
    claim_id: ClaimId
    error: str
    retryable: bool = True
    delay_seconds: Seconds | None = Field(None, description="default: the server's backoff")


class HeartbeatRequest(_Request):
    claim_id: ClaimId
    extend_seconds: LeaseSeconds | None = Field(
        None,
        description="the lease ends this long from now (default: the claim's lease), "
        + _LEASE_BOUNDS,
    )


class ProgressRequest(_Request):
    claim_id: ClaimId
    total: Count | None = None
    completed: Count | None = None
    failed: Count | None = None
    current: Any = None
    checkpoint: Any = None
    detail: Any = None


class CompleteItem(_Request):
    job_id: JobId
    claim_id: ClaimId
    result: Any = None


class FailItem(_Request):
    job_id: JobId
    claim_id: ClaimId
    error: str
    retryable: bool = True
    delay_seconds: Seconds | None = None


class HeartbeatItem(_Request):
    job_id: JobId
    claim_id: ClaimId


class CompleteManyRequest(_Request):
    items: Annotated[list[CompleteItem], Field(max_length=MAX_BATCH)]


class FailManyRequest(_Request):
    items: Annotated[list[FailItem], Field(max_length=MAX_BATCH)]


class HeartbeatManyRequest(_Request):
    items: Annotated[list[HeartbeatItem], Field(max_length=MAX_BATCH)]
    extend_seconds: LeaseSeconds | None = None


class TakeNotificationsRequest(_Request):
    limit: Annotated[int, Field(ge=1, le=MAX_BATCH)] = 100
    lease_seconds: LeaseSeconds = 60.0


class NotifiedItem(_Request):
    job_id: JobId
    subscriber: Name


class MarkNotifiedRequest(_Request):
    items: Annotated[list[NotifiedItem], Field(max_length=MAX_BATCH)]


class CompleteByKeyRequest(_Request):
    key: Key
    result: Any = None
    include_failed: bool = Field(False, description="complete a failed job too")


class CancelByKeyRequest(_Request):
    key: Key


class FailByKeyRequest(_Request):
    key: Key
    error: str = Field(min_length=1, description="the failure, kept as the jobs' error")


class PruneRequest(_Request):
    older_than_seconds: Seconds
    statuses: Annotated[list[FinalStatus], Field(min_length=1, max_length=3)] = ["completed"]


Archive = Annotated[
    str,
    StringConstraints(min_length=1, max_length=1000, pattern=_NO_CONTROL),
    Field(description="'task:NAME' or 'file:PATH'"),
]


class RetentionRequest(_Request):
    status: FinalStatus
    keep_seconds: Annotated[
        Seconds | None, Field(description="how long jobs are kept; null: for ever")
    ]
    queue: Annotated[Name | None, Field(description="null: any queue")] = None
    task: Annotated[Name | None, Field(description="null: any task")] = None
    archive: Archive | None = None
    retire_keys: bool = False


class ClearRetentionRequest(_Request):
    status: Annotated[FinalStatus | None, Field(description="null: every status")] = None
    queue: Name | None = None
    task: Name | None = None


class PruneExpiredRequest(_Request):
    ids: JobIds
    archive: Archive | None = None


# -- responses --------------------------------------------------------------------------
def _job_model() -> Any:
    """A job as the API answers it: every field of the ``Job`` dataclass (derived from
    it, so a new field is documented by itself), ``claim_ref`` beside ``claim_id``, and
    ``payload``/``result`` optional (lists leave them out unless asked)."""
    hints = typing.get_type_hints(Job)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(Job):
        if f.name in ("payload", "result"):
            text = "left out of lists unless `include` asks for it"
            fields[f.name] = (hints[f.name], Field(None, description=text))
        elif f.name == "claim_id":
            text = "the claim holding the job: only in answers to that claim's own requests"
            fields[f.name] = (str | None, Field(description=text))
        elif f.default is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], f.default)
        else:
            fields[f.name] = (hints[f.name], ...)
    text = "a fingerprint of the claim holding the job (groups a claim's jobs; not its id)"
    fields["claim_ref"] = (str | None, Field(description=text))
    return create_model("Job", **fields)


JobOut = _job_model()
TRUNCATED = (
    "the answer reached the server's byte budget (Limits.max_response_bytes): jobs "
    "were left out, or (for writes) sent without payload and result"
)


class JobList(BaseModel):
    jobs: list[JobOut]  # type: ignore[valid-type]
    truncated: bool = Field(False, description=TRUNCATED)


class ClaimOut(BaseModel):
    claim_id: str
    queue: str
    jobs: list[JobOut]  # type: ignore[valid-type]
    remaining: int | None = Field(description="jobs of the queue claimable now")
    acked: int = Field(description="jobs of the acknowledged claim completed first")
    reported: dict[str, Status] = Field(
        {}, description="the new status of each job whose ending came with the claim, by id"
    )
    truncated: bool = Field(
        False,
        description="the byte budget was reached: the jobs that did not fit went back to "
        "pending (no attempt spent) and count in `remaining`",
    )


# Counts are answered in their JSON form (``conveyor.codec``), derived from the
# dataclass itself.
StatsOut = Stats


class QueuesOut(BaseModel):
    queues: dict[str, StatsOut] = Field(description="per queue with jobs")
    total: StatsOut = Field(description="all queues together")


class SubscribersOut(BaseModel):
    subscribers: list[str]
    truncated: bool = Field(False, description="more subscribers than the server lists")


class ResetOut(BaseModel):
    reset_count: int


class NotificationOut(BaseModel):
    job: JobOut  # type: ignore[valid-type]
    subscribers: list[str]


class NotificationsOut(BaseModel):
    notifications: list[NotificationOut]
    truncated: bool = Field(
        False,
        description="the byte budget was reached: the rest stay taken until their lease "
        "ends, then are offered again",
    )


class MarkedOut(BaseModel):
    marked_count: int


class RemovedOut(BaseModel):
    removed_count: int


class AckedOut(BaseModel):
    acked_count: int


class RecoveredOut(BaseModel):
    recovered_count: int


class CompletedOut(BaseModel):
    completed_count: int


class CancelledOut(BaseModel):
    cancelled_count: int


class FailedOut(BaseModel):
    failed_count: int


class TasksOut(BaseModel):
    tasks: dict[str, StatsOut] = Field(description="per task with jobs")


class HealthOut(BaseModel):
    status: Literal["ok"]
    time: datetime = Field(description="the database clock")
    schema_version: int = Field(description="the migrations applied to the database")


class ErrorBody(BaseModel):
    code: str
    message: str
    job_id: int | None = Field(None, description="duplicate_job: the active job's id")


class ErrorOut(BaseModel):
    error: ErrorBody


# -- flow control, runtimes, workers and schedules -------------------------------------
class ClaimJobRequest(_Request):
    lease_seconds: LeaseSeconds = 300.0
    worker: Name | None = None


class SnoozeRequest(_Request):
    claim_id: ClaimId
    delay_seconds: Seconds


class SnoozeItem(_Request):
    job_id: JobId
    claim_id: ClaimId
    delay_seconds: Seconds


class ReportRequest(_Request):
    completed: Annotated[list[CompleteItem], Field(max_length=MAX_BATCH)] = []
    failed: Annotated[list[FailItem], Field(max_length=MAX_BATCH)] = []
    snoozed: Annotated[list[SnoozeItem], Field(max_length=MAX_BATCH)] = []


class ReportOut(BaseModel):
    written: dict[str, Status] = Field(
        description="the new status of each job written, by id; a job left out was refused"
    )


class IdsOut(BaseModel):
    ids: list[int]


class DependentsOut(BaseModel):
    dependents: list[int]


class RateIn(_Request):
    limit: Annotated[int, Field(ge=1, le=INT32)]
    per: PositiveSeconds = 1.0


class LimitsRequest(_Request):
    max_running: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    group_max_running: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    rate: RateIn | None = None
    group_rate: RateIn | None = None


class RetryNotificationsRequest(_Request):
    items: Annotated[list[NotifiedItem], Field(max_length=MAX_BATCH)]
    error: Annotated[str, StringConstraints(max_length=4000)]
    base_seconds: Seconds = 5.0
    cap_seconds: Seconds = 3600.0
    max_attempts: Annotated[int, Field(ge=1, le=1000)] = 10


class RetriedOut(BaseModel):
    retried_count: int


class BusyItem(_Request):
    id: Annotated[int, Field(ge=1, le=MAX_JOB_ID)]
    started_at: When


class WorkerRequest(_Request):
    host: Name
    pid: Annotated[int, Field(ge=0, le=INT32)]
    queues: Annotated[list[Name], Field(max_length=1000)]
    concurrency: Annotated[int, Field(ge=0, le=1_000_000)]
    version: Name
    running: Annotated[int, Field(ge=0, le=INT32)]
    ttl_seconds: PositiveSeconds
    busy: Annotated[list[BusyItem], Field(max_length=1000)] | None = Field(
        None, description="the jobs the worker's tasks run now; absent: left as they were"
    )


class ScheduleRequest(_Request):
    task: Name
    queue: Name
    spec: Name
    first_slot: When | None = None
    next_slot: When | None = None


class FoldedOut(BaseModel):
    folded_count: int


# -- bulk actions on a selection of jobs ------------------------------------------------
MAX_BULK = 1000


class Selection(_Request):
    queue: Name | None = None
    task: Name | None = None
    key: Key | None = None
    created_after: When | None = Field(None, description="created at or after this time")
    created_before: When | None = Field(None, description="created before this time")
    after: Annotated[int, Field(ge=0, le=MAX_JOB_ID)] | None = Field(
        None, description="start after this id (the previous answer's next_after)"
    )
    limit: Annotated[int, Field(ge=1, le=MAX_BULK)] = Field(
        MAX_BULK, description="the most jobs this request handles"
    )


class BulkRetryRequest(Selection):
    status: Literal["failed", "cancelled", "completed"] = "failed"


class BulkCancelRequest(Selection):
    status: Literal["pending", "running"] = "pending"


class RunNowRequest(_Request):
    queue: Name | None = None
    task: Name | None = None
    kind: Literal["scheduled", "retrying"] | None = Field(
        None, description="scheduled: never tried; retrying: an attempt failed; none: both"
    )
    limit: Annotated[int, Field(ge=1, le=MAX_BULK)] = Field(
        MAX_BULK, description="the most jobs this request makes due, soonest first"
    )


class RunNowOut(BaseModel):
    changed_count: int
    ids: list[int] = Field(
        description="the jobs now due, in id order; as many as limit: more may wait"
    )


class SkippedOut(BaseModel):
    id: int
    reason: str


class BulkOut(BaseModel):
    changed_count: int
    ids: list[int] = Field(description="the jobs changed, in id order")
    skipped: list[SkippedOut] = Field(description="matching jobs left as they were, and why")
    next_after: int | None = Field(
        description="more jobs may match: repeat with after = this; null when done"
    )


# -- who is asking ---------------------------------------------------------------------
class WhoamiOut(BaseModel):
    role: Role
    auth: bool = Field(description="whether the server asks for tokens (false: everyone is admin)")


# -- workflows ------------------------------------------------------------------------
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
    jobs: list[JobOut] | None = None  # type: ignore[valid-type]
    truncated: bool | None = None


class WorkflowList(BaseModel):
    workflows: list[WorkflowOut]


class RetentionPolicyOut(BaseModel):
    status: FinalStatus
    queue: str | None
    task: str | None
    keep_seconds: float | None = Field(description="null: kept for ever")
    archive: str | None
    retire_keys: bool
    updated_at: datetime | None


class RetentionPoliciesOut(BaseModel):
    policies: list[RetentionPolicyOut]
