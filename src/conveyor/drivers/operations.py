"""The domain operations a driver performs, each a frozen dataclass of its parameters.

Plans (``conveyor.ops``) yield these; a driver's session runs each one and answers its
rows (``RowsOp``) or the number of rows it changed (``CountOp``). An operation is named
for what it does to jobs; *how* is the driver's private affair: the SQL dialects keep
one statement per operation in ``queries/*.sql`` under the operation's ``op`` name (its
fields are the statement's ``:parameters``), and a dialect may perform an operation with
several statements inside the same transaction instead (``SQLDriver.handlers``), as MySQL
does for every ``UPDATE … RETURNING`` it lacks.

Parameters that carry many values (``items``, ``ids``, ``queues``, ``statuses``,
``groups``) are JSON text made by the driver's ``json_param``; times are whatever the
driver's ``encode_time`` made. Guards ("only if running under this claim", "only if in
these states") are part of every write: see ``conveyor.machine``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, ClassVar, Generic, TypeVar

from conveyor.drivers.values import Row
from conveyor.frozen import is_twin

R = TypeVar("R")


class Operation(Generic[R]):
    """One domain operation; ``R`` is what running it answers."""

    __slots__ = ()
    op: ClassVar[str]
    returns_rows: ClassVar[bool]

    def params(self) -> dict[str, Any]:
        """The fields by name: the parameters of the dialects' statement."""
        made = _PARAMS.get(type(self))
        if made is None:
            made = _PARAMS[type(self)] = _reader(type(self))
        return made(self)


def _reader(cls: type) -> Callable[[Any], dict[str, Any]]:
    """The fields of ``cls`` read at once (``attrgetter`` reads them all in C): every
    statement of the hot paths passes here."""
    names = tuple(f.name for f in fields(cls))
    if not names:
        return lambda op: {}
    if len(names) == 1:
        only = names[0]
        return lambda op: {only: getattr(op, only)}
    get = attrgetter(*names)
    return lambda op: dict(zip(names, get(op), strict=True))


_PARAMS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def one_of(op: Any, *names: str) -> None:
    """Refuse an operation that names none, or more than one, of the fields that say which
    jobs it acts on: each is a line of its statements' ``WHERE`` kept only when given, so
    with none the statement would act on every job."""
    given = [n for n in names if getattr(op, n) is not None]
    if len(given) != 1:
        raise TypeError(f"{type(op).__name__}: give exactly one of {', '.join(names)}")


class RowsOp(Operation[list[Row]]):
    """Answers the rows it read or wrote."""

    __slots__ = ()
    returns_rows = True


class CountOp(Operation[int]):
    """Answers how many rows it changed."""

    __slots__ = ()
    returns_rows = False


# -- enqueue -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InsertJob(RowsOp):
    """Returns what the database decided; the caller knows the rest of the new job."""

    op: ClassVar[str] = "insert_job"
    queue: str
    task: str
    payload: Any
    key: str | None
    priority: int
    run_at: Any
    max_attempts: int
    job_group: str | None
    depends_on: str | None
    waiting_for: int
    trace_context: str | None = None


@dataclass(frozen=True, slots=True)
class InsertJobs(RowsOp):
    """Many jobs without keys or dependencies in one statement. ``items``: the rows, each
    [queue, task, payload, priority, run_at, max_attempts, job_group, trace_context], as
    the driver's ``rows_param`` made them (a JSON array, or the lists themselves). Answers
    each new job's id, run_at and created_at, or with ``ids_only`` its id alone (bulk
    loads that need no Job objects)."""

    op: ClassVar[str] = "insert_jobs"
    items: Any
    ids_only: int | None = None


@dataclass(frozen=True, slots=True)
class JobsByKey(RowsOp):
    """The jobs of ``queue`` with ``key``: the active ones (``active``), or else the newest
    in any state (of ``task``, when given)."""

    op: ClassVar[str] = "jobs_by_key"
    queue: str
    key: str
    task: str | None = None
    active: int | None = None


@dataclass(frozen=True, slots=True)
class LockSubscribers(RowsOp):
    """The job's row locked until the transaction ends (on SQLite, its write transaction
    is the lock): callers adding subscribers to it take their turn, so each one's
    ``AddSubscriber`` guard counts the subscribers the others committed."""

    op: ClassVar[str] = "lock_subscribers"
    job_id: int


@dataclass(frozen=True, slots=True)
class AddSubscriber(RowsOp):
    """The subscriber added to the job, unless it is there already or the job has
    ``cap`` subscribers (the statement's guard)."""

    op: ClassVar[str] = "add_subscriber"
    job_id: int
    subscriber: str
    cap: int


@dataclass(frozen=True, slots=True)
class MarkDependencies(RowsOp):
    """The jobs a new job runs after learn that it waits on them; returns their states. The
    update locks them, so none can finish unseen before the new job's edges commit."""

    op: ClassVar[str] = "mark_dependencies"
    ids: str


@dataclass(frozen=True, slots=True)
class InsertDependencies(CountOp):
    """Dependency edges, of a new job or of a run's steps: ``items`` is a JSON array of
    [job_id, depends_on, run_on_failure (0 or 1)]."""

    op: ClassVar[str] = "insert_dependencies"
    items: str


@dataclass(frozen=True, slots=True)
class CancelForDependency(RowsOp):
    """A new job whose dependency already failed or was cancelled: it will never run."""

    op: ClassVar[str] = "cancel_for_dependency"
    error: str
    id: int


# -- claims --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimJobs(RowsOp):
    """The fast path: queues without flow control (pause, limits) only. SKIP LOCKED: concurrent
    claimers take different rows instead of queueing on one."""

    op: ClassVar[str] = "claim_jobs"
    claim_id: str
    worker: str
    lease_s: float
    queue: str
    limit: int


@dataclass(frozen=True, slots=True)
class ClaimIds(RowsOp):
    """Jobs named by id, guarded: ``ids`` (a JSON array), the flow-controlled path (the
    jobs chosen under the queue's limits, while the queue's settings row is locked); or
    the one job ``id``, claimable while pending with its dependencies met. Give one."""

    op: ClassVar[str] = "claim_ids"
    claim_id: str
    worker: str
    lease_s: float
    ids: str | None = None
    id: int | None = None

    def __post_init__(self) -> None:
        one_of(self, "ids", "id")


@dataclass(frozen=True, slots=True)
class CountClaimable(RowsOp):
    """Claimable now: pending, minus those not yet due or waiting on others. Counted from the
    counts and two small index ranges, never the backlog; 0 while paused. Also how many
    count deltas wait to be folded, counted no further than ``deltas_limit`` (the caller
    folds them when they pile up)."""

    op: ClassVar[str] = "count_claimable"
    queue: str
    deltas_limit: int


@dataclass(frozen=True, slots=True)
class AckClaim(RowsOp):
    """ack claim"""

    op: ClassVar[str] = "ack_claim"
    claim_id: str


@dataclass(frozen=True, slots=True)
class ReleaseJobs(RowsOp):
    """Running jobs back to pending, their claim forgotten: those of ``claim_id`` (a
    worker hands its claim back), the job ``id`` (an admin's reset, whoever holds it;
    answers the whole row), or those claimed more than ``older_than_s`` ago; of
    ``queues`` and ``tasks`` (JSON arrays), when given. Give one of the first three.
    Answers id, queue."""

    op: ClassVar[str] = "release_jobs"
    claim_id: str | None = None
    id: int | None = None
    older_than_s: float | None = None
    queues: str | None = None
    tasks: str | None = None

    def __post_init__(self) -> None:
        one_of(self, "claim_id", "id", "older_than_s")


@dataclass(frozen=True, slots=True)
class ExpiredLeases(RowsOp):
    """Running jobs whose lease ran out (of ``queues`` and ``tasks``, or job ``id``, when
    given), oldest lease first: their id, queue, claim_id, worker, attempts,
    max_attempts."""

    op: ClassVar[str] = "expired_leases"
    queues: str | None
    id: int | None
    limit: int
    tasks: str | None = None


@dataclass(frozen=True, slots=True)
class EndLeases(RowsOp):
    """End expired leases as decided: ``items`` is JSON of {"id", "claim_id", "again",
    "error", "cause"}; back to pending when "again", else failed. Guarded: the same
    claim, still running, the lease still expired. Answers id, queue, status."""

    op: ClassVar[str] = "end_leases"
    items: str


# -- reports -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompleteJobs(RowsOp):
    """``items`` is a JSON array of {"id", "claim_id", "result" (JSON text or null)}.
    Answers the jobs completed, or with ``brief`` only what a worker needs of each (id,
    queue, status)."""

    op: ClassVar[str] = "complete_jobs"
    items: str
    brief: int | None = None


@dataclass(frozen=True, slots=True)
class FailJobs(RowsOp):
    """Failures as decided: ``items`` is JSON of {"id", "claim_id", "attempts", "again",
    "error", "error_kind", "delay_s"}; back to pending after the delay when "again",
    else failed for good. Guarded by the claim and the attempts the decision was made
    on."""

    op: ClassVar[str] = "fail_jobs"
    items: str


@dataclass(frozen=True, slots=True)
class SnoozeJobs(RowsOp):
    """:items is a JSON array of {"id", "claim_id", "delay_s"}. Back to pending after the delay
    without spending an attempt: waiting on something is not a failure."""

    op: ClassVar[str] = "snooze_jobs"
    items: str


@dataclass(frozen=True, slots=True)
class HeartbeatJobs(RowsOp):
    """``items`` is a JSON array of {"id", "claim_id"}; a null ``extend_s`` keeps each
    claim's lease. Answers the jobs still held, or with ``brief`` their ids (a worker's
    background renewal)."""

    op: ClassVar[str] = "heartbeat_jobs"
    items: str
    extend_s: float | None
    brief: int | None = None


@dataclass(frozen=True, slots=True)
class ProgressJob(RowsOp):
    """Absolute values, so a replayed call changes nothing; null leaves a field as it was.
    Reporting progress also renews the lease."""

    op: ClassVar[str] = "progress_job"
    total: int | None
    completed: int | None
    failed: int | None
    current: Any
    checkpoint: Any
    detail: Any
    id: int
    claim_id: str


# -- admin ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReopenJob(RowsOp):
    """An explicit retry: a final job (``id``; answers its row) or each of ``ids`` (a
    JSON array; answers id, queue of those reopened) becomes pending again with a fresh
    set of attempts; with ``keep_attempts``, only a failed or cancelled job that has
    attempts left, and the attempts it spent are kept."""

    op: ClassVar[str] = "reopen_job"
    id: int | None = None
    ids: str | None = None
    keep_attempts: int | None = None

    def __post_init__(self) -> None:
        one_of(self, "id", "ids")


@dataclass(frozen=True, slots=True)
class SealedJobs(RowsOp):
    """Jobs whose payload or result is encrypted (``conveyor.crypto``; :marker is its
    marker), by id, after :after."""

    op: ClassVar[str] = "sealed_jobs"
    after: int
    marker: str
    limit: int


@dataclass(frozen=True, slots=True)
class Reseal(CountOp):
    """The payload (or, with ``result``, the result) sealed again (``conveyor
    reencrypt``), if it is still what was read."""

    op: ClassVar[str] = "reseal"
    id: int
    old: str
    new: str
    result: int | None = None


@dataclass(frozen=True, slots=True)
class CancelJobs(RowsOp):
    """Active jobs to cancelled: the job ``id`` (answers its row), the steps of the run
    ``workflow_id`` not final yet, or every job of ``queue`` with ``key`` (those two
    answer id, queue). A running one keeps its claim id: its worker's writes are
    refused. Give one of the three."""

    op: ClassVar[str] = "cancel_jobs"
    id: int | None = None
    workflow_id: int | None = None
    queue: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        one_of(self, "id", "workflow_id", "key")


@dataclass(frozen=True, slots=True)
class CompleteByKey(RowsOp):
    """:statuses: the states a job may be completed from (active ones; failed ones too when the
    caller reconciles work done elsewhere)."""

    op: ClassVar[str] = "complete_by_key"
    statuses: str
    result: Any
    queue: str
    key: str


@dataclass(frozen=True, slots=True)
class FailByKey(RowsOp):
    """Every active job of :queue with :key to failed for good: :error, error_kind
    terminal, one more entry in errors (a running one keeps its claim id: its worker's
    writes are refused). Answers id, queue."""

    op: ClassVar[str] = "fail_by_key"
    error: str
    queue: str
    key: str


@dataclass(frozen=True, slots=True)
class RunNow(RowsOp):
    """A pending job due now: ``run_at`` moves back to now when it lay ahead."""

    op: ClassVar[str] = "run_now"
    id: int


@dataclass(frozen=True, slots=True)
class RunNowJobs(RowsOp):
    """At most :limit pending jobs not yet due, soonest first, due now; returns their
    ``id`` and ``queue``. ``retries_only``/``first_only`` (1 or None): only jobs that
    failed an attempt before / only jobs never tried."""

    op: ClassVar[str] = "run_now_jobs"
    queue: str | None
    task: str | None
    first_only: int | None
    retries_only: int | None
    limit: int


@dataclass(frozen=True, slots=True)
class DeleteJobs(CountOp):
    """Final jobs deleted, with their subscribers and dependency edges (they cascade):
    the job ``id``, or those among ``ids`` (a JSON array); an active job is left. Give
    one of the two."""

    op: ClassVar[str] = "delete_jobs"
    id: int | None = None
    ids: str | None = None

    def __post_init__(self) -> None:
        one_of(self, "id", "ids")


# -- reading -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetJob(RowsOp):
    """The job ``id`` (with the database's ``db_now``), the jobs ``ids`` (a JSON array),
    or the steps of the run ``workflow_id`` in id order; give one of the three."""

    op: ClassVar[str] = "get_job"
    id: int | None = None
    ids: str | None = None
    workflow_id: int | None = None

    def __post_init__(self) -> None:
        one_of(self, "id", "ids", "workflow_id")


@dataclass(frozen=True, slots=True)
class ListJobs(RowsOp):
    """Jobs in id order after ``after``, or (``newest``) in descending order below
    ``before`` (None: from the newest); each filter given is a condition an index serves."""

    op: ClassVar[str] = "list_jobs"
    queue: str | None
    status: Any
    key: str | None
    task: str | None
    created_after: Any
    created_before: Any
    limit: int
    after: int | None = None
    before: int | None = None
    newest: int | None = None


@dataclass(frozen=True, slots=True)
class SearchPayload(RowsOp):
    """Among the :scan newest jobs below id :before (of the queue, status and task given),
    those whose payload's top-level :field reads :value (as text), newest first. The scan
    walks the primary key (or the queue/status/task index) backwards, a bounded range:
    no expression index is needed."""

    op: ClassVar[str] = "search_payload"
    field: str
    value: str
    queue: str | None
    status: str | None
    task: str | None
    before: int
    scan: int
    limit: int


@dataclass(frozen=True, slots=True)
class ScanFloor(RowsOp):
    """The lowest id among the :scan newest jobs below :before (the same filters as
    ``SearchPayload``): where a search that found too few goes on; ``floor`` is null
    when no job was scanned."""

    op: ClassVar[str] = "scan_floor"
    queue: str | None
    status: str | None
    task: str | None
    before: int
    scan: int


@dataclass(frozen=True, slots=True)
class TaskTimings(RowsOp):
    """Per task, over the :sample most recently finished jobs (completed or failed)
    since :since: ``task``, ``runs``, ``failures``, and ``p50``/``p95`` of the completed
    runs' ``finished_at - started_at`` in seconds (nearest rank). A range of the
    finished_at index, bounded by :sample."""

    op: ClassVar[str] = "task_timings"
    since: Any
    queue: str | None
    task: str | None
    sample: int


@dataclass(frozen=True, slots=True)
class ListDeferred(RowsOp):
    """Pending jobs not yet due (scheduled, or waiting to retry), soonest first."""

    op: ClassVar[str] = "list_deferred"
    queue: str | None
    task: str | None
    first_only: int | None
    retries_only: int | None
    limit: int


@dataclass(frozen=True, slots=True)
class Dependents(RowsOp):
    """dependents"""

    op: ClassVar[str] = "dependents"
    id: int


@dataclass(frozen=True, slots=True)
class Subscribers(RowsOp):
    """The job's subscribers, in the order they came; with ``subscriber``, that one only
    (no row: it is not one of them)."""

    op: ClassVar[str] = "subscribers"
    job_id: int
    subscriber: str | None = None


@dataclass(frozen=True, slots=True)
class CountByQueueStatus(RowsOp):
    """Jobs per queue and status (of ``queue`` when given): queue, status, n; with
    ``per_task``, per queue, task and status: queue, task, status, n. The folded counts
    plus the deltas not yet folded."""

    op: ClassVar[str] = "count_by_queue_status"
    queue: str | None
    per_task: int | None = None


@dataclass(frozen=True, slots=True)
class CountDeltas(RowsOp):
    """How many deltas wait to be folded, counted no further than :limit."""

    op: ClassVar[str] = "count_deltas"
    limit: int


@dataclass(frozen=True, slots=True)
class FoldCounts(RowsOp):
    """Moves the deltas into the counts and the throughput, one folder at a time (a second one,
    finding the lock taken, folds nothing): one row, ``folded`` and, from a driver that
    folds a batch per transaction, ``more``."""

    op: ClassVar[str] = "fold_counts"


@dataclass(frozen=True, slots=True)
class PendingSummary(RowsOp):
    """Per queue with pending jobs: the oldest (an index probe each) and how many are not yet
    due (an index range)."""

    op: ClassVar[str] = "pending_summary"
    queue: str | None


@dataclass(frozen=True, slots=True)
class ExpiredSummary(RowsOp):
    """expired summary"""

    op: ClassVar[str] = "expired_summary"
    queue: str | None


@dataclass(frozen=True, slots=True)
class Throughput(RowsOp):
    """Jobs completed and failed per minute since :since, folded or not."""

    op: ClassVar[str] = "throughput"
    since: Any
    queue: str | None


@dataclass(frozen=True, slots=True)
class ThroughputHours(RowsOp):
    """Jobs completed and failed per hour since :since: ``hour``, ``completed``,
    ``failed``."""

    op: ClassVar[str] = "throughput_hours"
    since: Any
    queue: str | None


@dataclass(frozen=True, slots=True)
class RollUpThroughput(CountOp):
    """Per-minute throughput rows before ``before`` move into their hour's row (added
    there and deleted, so that two roll-ups never count a minute twice), and hourly rows
    before ``prune_before`` are deleted. Answers how many hourly rows were written."""

    op: ClassVar[str] = "roll_up_throughput"
    before: Any
    prune_before: Any


# -- idempotent create requests ------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimIdempotencyKey(CountOp):
    """A record of the key is inserted, kept :keep_s seconds, unless one exists (0)."""

    op: ClassVar[str] = "claim_idempotency_key"
    scope: str
    idem_key: str
    request_hash: str
    keep_s: float


@dataclass(frozen=True, slots=True)
class IdempotencyRecord(RowsOp):
    """The key's record: ``request_hash``, ``answer_status`` and ``body`` of its answer
    (null until it is saved), and whether it ``expired``."""

    op: ClassVar[str] = "idempotency_record"
    scope: str
    idem_key: str


@dataclass(frozen=True, slots=True)
class SaveIdempotentAnswer(CountOp):
    """The answer of the request that claimed the key, stored in its record."""

    op: ClassVar[str] = "save_idempotent_answer"
    scope: str
    idem_key: str
    answer_status: int
    body: str


@dataclass(frozen=True, slots=True)
class ForgetIdempotencyKeys(CountOp):
    """At most ``limit`` records whose retention is over are deleted, oldest first; or,
    with ``scope`` and ``idem_key``, that key's record alone, if it is over."""

    op: ClassVar[str] = "forget_idempotency_keys"
    limit: int
    scope: str | None = None
    idem_key: str | None = None


@dataclass(frozen=True, slots=True)
class DbNow(RowsOp):
    """db now"""

    op: ClassVar[str] = "db_now"


# -- flow ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueSettings(RowsOp):
    """Every queue's settings row, or ``queue``'s; with ``lock``, locked until the
    transaction ends (a change, or a claim under flow control, reads them so)."""

    op: ClassVar[str] = "queue_settings"
    queue: str | None
    lock: int | None = None


@dataclass(frozen=True, slots=True)
class SaveQueueSettings(RowsOp):
    """save queue settings"""

    op: ClassVar[str] = "save_queue_settings"
    queue: str
    paused: Any
    max_running: Any
    group_max_running: Any
    rate_limit: Any
    rate_period: Any
    group_rate_limit: Any
    group_rate_period: Any
    controlled: Any


@dataclass(frozen=True, slots=True)
class CountRunning(RowsOp):
    """How many jobs of ``queue`` run (``n``), or with ``groups`` (a JSON array) how
    many of each of those groups (``job_group``, ``n``; a group with none: no row)."""

    op: ClassVar[str] = "count_running"
    queue: str
    groups: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimCandidates(RowsOp):
    """The next claimable jobs after the (:priority, :id) cursor, in claim order."""

    op: ClassVar[str] = "claim_candidates"
    priority: int
    id: int | None
    queue: str
    limit: int


@dataclass(frozen=True, slots=True)
class CountStarts(RowsOp):
    """How many jobs of ``queue`` started in the last ``period`` seconds, or per group
    of ``groups`` (as ``CountRunning``)."""

    op: ClassVar[str] = "count_starts"
    queue: str
    period: Any
    groups: str | None = None


@dataclass(frozen=True, slots=True)
class RecordStarts(RowsOp):
    """record starts"""

    op: ClassVar[str] = "record_starts"
    queue: str
    groups: str


@dataclass(frozen=True, slots=True)
class ForgetStarts(RowsOp):
    """forget starts"""

    op: ClassVar[str] = "forget_starts"
    queue: str
    period: Any


# -- registry ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerSeen(CountOp):
    """A worker's entry made or refreshed: alive for ``ttl_s`` more. ``busy``: the jobs
    its tasks run now, a JSON array of ``{"id", "started_at"}`` (ISO 8601) kept as the
    worker sent it (None: left as it was)."""

    op: ClassVar[str] = "worker_seen"
    name: str
    host: str
    pid: int
    queues: str
    concurrency: int
    version: str
    ttl_s: float
    running: int
    busy: str | None = None


@dataclass(frozen=True, slots=True)
class ListWorkers(RowsOp):
    """list workers"""

    op: ClassVar[str] = "list_workers"


@dataclass(frozen=True, slots=True)
class ForgetWorkers(CountOp):
    """Workers' entries deleted: the one of the worker ``name`` (it stopped), or those of
    workers presumed dead (expired) for longer than ``older_than_s``. Give one of the
    two."""

    op: ClassVar[str] = "forget_workers"
    name: str | None = None
    older_than_s: float | None = None

    def __post_init__(self) -> None:
        one_of(self, "name", "older_than_s")


@dataclass(frozen=True, slots=True)
class SaveSchedule(RowsOp):
    """A schedule as the app declares it. A new one starts at :first_slot (slots before it are
    not owed); a known one keeps the slot it reached, and takes :next_slot only if that lies
    past it (a declaration racing a run must not bring back a taken slot)."""

    op: ClassVar[str] = "save_schedule"
    first_slot: Any
    next_slot: Any
    name: str
    task: str
    queue: str
    spec: str


@dataclass(frozen=True, slots=True)
class TakeScheduleSlot(RowsOp):
    """The guard that makes a slot run once: only one caller moves last_slot past it."""

    op: ClassVar[str] = "take_schedule_slot"
    slot: Any
    next_slot: Any
    name: str


@dataclass(frozen=True, slots=True)
class ListSchedules(RowsOp):
    """list schedules"""

    op: ClassVar[str] = "list_schedules"


@dataclass(frozen=True, slots=True)
class TakeNotifications(RowsOp):
    """Subscribers of final jobs not yet told of the job's latest finish (a job retried and
    finished again is announced again), taken for :lease_s seconds by one dispatcher."""

    op: ClassVar[str] = "take_notifications"
    lease_s: float
    limit: int


@dataclass(frozen=True, slots=True)
class MarkNotified(CountOp):
    """:items is a JSON array of {"job_id", "subscriber"}."""

    op: ClassVar[str] = "mark_notified"
    items: str


@dataclass(frozen=True, slots=True)
class DeliveryAttempts(RowsOp):
    """How many deliveries to these subscribers failed so far: ``items`` is JSON of
    {"job_id", "subscriber"}; answers job_id, subscriber, attempts."""

    op: ClassVar[str] = "delivery_attempts"
    items: str


@dataclass(frozen=True, slots=True)
class RetryNotifications(CountOp):
    """Deliveries that failed, as decided: ``items`` is JSON of {"job_id", "subscriber",
    "attempts", "delay_s", "give_up"}; offered again after the delay, or counted as
    told, ``error`` kept. Guarded by the attempts the decision was made on."""

    op: ClassVar[str] = "retry_notifications"
    error: str
    items: str


# -- workflows -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InsertWorkflow(RowsOp):
    """A new run of a workflow; answers its id and created_at."""

    op: ClassVar[str] = "insert_workflow"
    label: str


@dataclass(frozen=True, slots=True)
class ReserveJobIds(RowsOp):
    """:n new job ids, never used before and never handed out again, larger than every
    id in use (in increasing order): a run's steps are inserted under them, so each
    step's ``depends_on`` is written with the step. Answers rows of ``id``."""

    op: ClassVar[str] = "reserve_job_ids"
    n: int


@dataclass(frozen=True, slots=True)
class InsertSteps(RowsOp):
    """The steps of a run as jobs, in one statement. :items is a JSON array of rows, each
    [id, queue, task, payload, key, priority, run_at, max_attempts, job_group, step,
    waiting_for, has_dependents, depends_on (a JSON array or null), trace_context], ids from
    ``reserve_job_ids``. A step whose key an active job holds is not inserted (no row
    answers for it). Answers id, step, run_at, created_at."""

    op: ClassVar[str] = "insert_steps"
    workflow_id: int
    items: str


@dataclass(frozen=True, slots=True)
class GetWorkflow(RowsOp):
    """A run's row: id, label, created_at."""

    op: ClassVar[str] = "get_workflow"
    id: int


@dataclass(frozen=True, slots=True)
class ListWorkflows(RowsOp):
    """Runs in id order after :after (0: from the start), or (``newest``) in descending
    order below :before (None: from the newest), at most :limit; only those with
    :label, and those whose status (read from their steps) is :status, if given."""

    op: ClassVar[str] = "list_workflows"
    limit: int
    after: int | None = None
    before: int | None = None
    newest: int | None = None
    label: str | None = None
    status: str | None = None


@dataclass(frozen=True, slots=True)
class WorkflowCounts(RowsOp):
    """The steps of these runs (:ids, JSON) counted by status: workflow_id, status, n."""

    op: ClassVar[str] = "workflow_counts"
    ids: str


@dataclass(frozen=True, slots=True)
class WorkflowEdges(RowsOp):
    """The dependencies of a run's steps: job_id, depends_on, run_on_failure."""

    op: ClassVar[str] = "workflow_edges"
    workflow_id: int


@dataclass(frozen=True, slots=True)
class LockParents(RowsOp):
    """The jobs that the jobs :ids (JSON) run after, locked until the transaction ends
    (so none finishes unseen while their dependents are re-counted); answers their ids."""

    op: ClassVar[str] = "lock_parents"
    ids: str


@dataclass(frozen=True, slots=True)
class RecountWaiting(CountOp):
    """Set ``waiting_for`` of the pending jobs :ids (JSON) from their dependencies as they
    stand: an edge is unmet while its job is not completed (or, for an edge that runs
    on failure, while its job is not final)."""

    op: ClassVar[str] = "recount_waiting"
    ids: str


@dataclass(frozen=True, slots=True)
class ParentJobs(RowsOp):
    """The jobs a job runs after, whole, in id order."""

    op: ClassVar[str] = "parent_jobs"
    job_id: int


# -- retention -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaveRetention(CountOp):
    """One retention policy written (inserted, or replacing the one for the same
    queue, task and status); ``queue``/``task`` '' stand for any, ``keep_seconds`` None
    keeps jobs for ever. A new policy only while fewer than ``cap`` exist: the
    statement's guard (after ``LockRetention``), so writers at once cannot pass it."""

    op: ClassVar[str] = "save_retention"
    queue: str
    task: str
    status: str
    keep_seconds: float | None
    archive: str | None
    retire_keys: bool
    cap: int


@dataclass(frozen=True, slots=True)
class DeleteRetention(RowsOp):
    """The policies for ``queue`` and ``task`` ('' for any) deleted, of one ``status``
    (or of every status when None); returns the statuses deleted."""

    op: ClassVar[str] = "delete_retention"
    queue: str
    task: str
    status: str | None


@dataclass(frozen=True, slots=True)
class ListRetention(RowsOp):
    """Every retention policy, by status, queue and task; with ``lock``, locked until the
    transaction ends (on SQLite, its write transaction is the lock): writers of new
    policies take their turn, so each one's guard counts the policies the others
    committed."""

    op: ClassVar[str] = "list_retention"
    lock: int | None = None


@dataclass(frozen=True, slots=True)
class ExpiredJobs(RowsOp):
    """At most :limit jobs of ``status`` (of ``queue``/``task`` when not None) that
    finished ``keep_seconds`` ago or more, by id, and that no policy in :exclude (a JSON
    array of ``[queue, task]``, '' for any) covers; ids above :after only."""

    op: ClassVar[str] = "expired_jobs"
    status: str
    queue: str | None
    task: str | None
    keep_seconds: float
    exclude: str
    limit: int
    after: int = 0


@dataclass(frozen=True, slots=True)
class LockExpired(RowsOp):
    """The same among the jobs :ids (JSON), looked up by id, locked for the
    transaction's delete (rows another writer holds are skipped where the database
    can)."""

    op: ClassVar[str] = "lock_expired"
    ids: str
    status: str
    queue: str | None
    task: str | None
    keep_seconds: float
    exclude: str


@dataclass(frozen=True, slots=True)
class RetireKeys(CountOp):
    """The keys of the jobs :ids (JSON) are recorded as retired with what their job
    was (a newer job's record replaces an older one's)."""

    op: ClassVar[str] = "retire_keys"
    ids: str


@dataclass(frozen=True, slots=True)
class RetiredKey(RowsOp):
    """The retired record of a key (and task, when given), with ``db_now``."""

    op: ClassVar[str] = "retired_key"
    queue: str
    key: str
    task: str | None = None


def all_operations() -> dict[str, type[Operation[Any]]]:
    """Every operation by name: what a driver must be able to run."""
    found: dict[str, type[Operation[Any]]] = {}
    for base in (RowsOp, CountOp):
        for cls in base.__subclasses__():
            if not is_twin(cls):  # conveyor.frozen's builders subclass the bases too
                found[cls.op] = cls
    return dict(sorted(found.items()))
