"""Every operation of the HTTP API, declared once: ``ENDPOINTS`` maps an operation's
name to its ``Endpoint`` (method, path, request and response models, status, role).

Both sides are built from it. The server (``conveyor.web``) registers each route from
its entry (``conveyor.web.router.route``): path, method, the models that OpenAPI
documents, the status, the error answers and the role the guard checks. The remote
queues (``conveyor.client``, ``conveyor.aio.client``) run a contract call by the entry
of the same name: ``send`` turns the call's checked arguments into the request's body
and query, the path's ``{placeholders}`` are filled from the same arguments, and
``read`` turns the answer into the call's result. A new operation is one entry here,
its route function on the server, and its call in the contract.

Models are named, not imported (``conveyor.web.models``): a client never loads the
server's dependencies.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from conveyor.codec import from_json, parse_time, to_json
from conveyor.errors import InvalidArgument
from conveyor.info import (
    ExpiredJob,
    PayloadMatches,
    QueueSettings,
    RetentionPolicy,
    ScheduleInfo,
    TaskTimings,
    Throughput,
    ThroughputHour,
    WorkerInfo,
)
from conveyor.job import Claim, Job, Stats, Status
from conveyor.options import OPTIONS
from conveyor.workflow import WorkflowRun, run_from_json, summary_from_json

Args = Mapping[str, Any]
Body = dict[str, Any] | None
Query = dict[str, Any] | None
Send = Callable[[Args], tuple[Body, Query]]
Read = Callable[[Any, int], Any]
Role = Literal["reader", "worker", "admin"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One operation over HTTP.

    - ``method``, ``path``: the route; placeholders are ``{name}`` or
      ``{name:convertor}`` (the server's convertors: ``job_id``, ``name``,
      ``claim_id``).
    - ``summary``: its one line in the API docs (the route's docstring says more).
    - ``role``: the least role allowed (None: public, or the route checks for itself).
    - ``request``: the name of its JSON body's model in ``conveyor.web.models``.
    - ``response``: the name of its answer's model there; ``status``: its success
      status; ``also``: another success status and what it means (same model).
    - ``errors``: error statuses beyond those every route may answer;
      ``every_error``: False when only these are documented.
    - ``send``, ``read``: how a remote queue sends the call and reads the answer (None
      for routes that no contract call uses). ``missing_is_none``: a 404 is the answer
      ``None``, not an error. ``served_by``: another operation's route serves this one.
    """

    method: str
    path: str
    summary: str
    role: Role | None
    request: str | None = None
    response: str | None = None
    status: int = 200
    also: tuple[int, str] | None = None
    errors: tuple[int, ...] = ()
    every_error: bool = True
    send: Send | None = None
    read: Read | None = None
    missing_is_none: bool = False
    served_by: str | None = None
    text: str | None = None  # a plain-text answer, described so

    def url(self, args: Args) -> str:
        """The path with its placeholders filled from ``args``."""
        return _PLACEHOLDER.sub(lambda m: _segment(args, m.group(1), m.group(2)), self.path)


_PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
# Path parameters whose convertor stops at '/': a name of these cannot carry one.
_NO_SLASH = {"claim_id": "claim_id", "name": "schedule"}


def _segment(args: Args, name: str, convertor: str | None) -> str:
    # Servers decode %2F before routing. Queue and worker routes take a '/' in a name
    # (the ``name`` convertor); a schedule's would be ambiguous beside its /run route,
    # and claim ids never have one.
    value = str(args[name])
    if convertor in (None, "claim_id") and "/" in value:
        raise InvalidArgument(f"{_NO_SLASH.get(name, name)}: a remote queue cannot send a '/' here")
    return quote(value, safe="")


# -- how calls are sent ------------------------------------------------------------------
def _nothing(a: Args) -> tuple[Body, Query]:
    return None, None


def _body(*names: str, **renamed: str) -> Send:
    """Send these arguments as the body, some under other names (``wire=arg``)."""
    return lambda a: ({**{n: a[n] for n in names}, **{w: a[n] for w, n in renamed.items()}},
                      None)  # fmt: skip


def _query(*names: str, **renamed: str) -> Send:
    return lambda a: (None, {**{n: a[n] for n in names}, **{w: a[n] for w, n in renamed.items()}})


def _names_of(what: str, names: tuple[str, ...] | None) -> str | None:
    if names is None:
        return None
    for name in names:
        if "," in name:
            raise InvalidArgument(f"{what}: a remote queue cannot send a ',' in a name: {name!r}")
    return ",".join(names)


def _names(queues: tuple[str, ...] | None) -> str | None:
    return _names_of("queue", queues)


def _queues(a: Args) -> tuple[Body, Query]:
    return None, {"queue": _names(a["queue"])}


def _queues_tasks(a: Args) -> tuple[Body, Query]:
    return None, _filters(a)


def _filters(a: Args) -> dict[str, Any]:
    return {"queue": _names(a["queue"]), "task": _names_of("task", a["task"])}


def item(a: Args, *, batch: bool = True) -> dict[str, Any]:
    """An enqueue in its wire form: the task, its payload and its options
    (``conveyor.options``; with ``batch``, those an item of a batch may set), left out
    when null or, for a choice, at its default; times as ISO 8601."""
    out = {k: to_json(a[k]) for k in ("task", "payload") if a.get(k) is not None}
    for name, option in OPTIONS.items():
        value = a.get(name)
        if option.local or (batch and not option.item) or value is None:
            continue
        if not (option.choices and value == option.default):
            out[option.field] = to_json(value)
    return out


def _batch(ids_only: bool) -> Send:
    def send(a: Args) -> tuple[Body, Query]:
        body = {"jobs": [item(i) for i in a["items"]], "queue": a["queue"]}
        return ({**body, "ids_only": True} if ids_only else body), None

    return send


def _report(kind: str, a: Args) -> dict[str, Any]:
    body: dict[str, Any] = {"claim_id": a["claim_id"]}
    if kind == "complete":
        body["result"] = a["result"]
    elif kind == "fail":
        body.update(error=a["error"], retryable=a["retryable"], delay_seconds=a["delay"])
    elif kind == "snooze":
        body["delay_seconds"] = a["delay"]
    elif kind == "progress":
        body.update({k: a[k] for k in ("total", "completed", "failed", "current",
                                       "checkpoint", "detail")})  # fmt: skip
    elif kind == "heartbeat" and "extend" in a:
        body["extend_seconds"] = a["extend"]
    return body


def _one(kind: str) -> Send:
    return lambda a: (_report(kind, a), None)


def _many(kind: str) -> Send:
    def send(a: Args) -> tuple[Body, Query]:
        body: dict[str, Any] = {
            "items": [_report(kind, i) | {"job_id": i["job_id"]} for i in a["items"]]
        }
        if "extend" in a:
            body["extend_seconds"] = a["extend"]
        return body, None

    return send


def _report_all(a: Args) -> tuple[Body, Query]:
    body = {
        kind: [_report(one, i) | {"job_id": i["job_id"]} for i in a[kind]]
        for kind, one in (("completed", "complete"), ("failed", "fail"), ("snoozed", "snooze"))
    }
    return body, None


def _json_of(*names: str) -> Send:
    return lambda a: ({n: to_json(a[n]) for n in names}, None)


def _worker_seen(a: Args) -> tuple[Body, Query]:
    body = {k: a[k] for k in ("host", "pid", "queues", "concurrency", "version", "running")}
    if a.get("busy") is not None:
        body["busy"] = [{"id": i, "started_at": t.isoformat()} for i, t in a["busy"]]
    return {**body, "ttl_seconds": a["ttl_s"]}, None


def _run_slot(a: Args) -> tuple[Body, Query]:
    return item(a) | {"slot": to_json(a["slot"]), "next_slot": to_json(a["next_slot"])}, None


# -- how answers are read ----------------------------------------------------------------
def _job(data: Any, status: int) -> Job:
    return from_json(Job, data)


def _run(data: Any, status: int) -> WorkflowRun:
    return run_from_json(data)


def _jobs(data: Any, status: int) -> list[Job]:
    # Past the server's byte budget, the answer to a batch write lists jobs without
    # their payload and result ("truncated"): they come back as None.
    return [from_json(Job, {"payload": None, "result": None, **j}) for j in data["jobs"]]


def _enqueued(data: Any, status: int) -> Job:
    # 200 (not 201): the key's active job was returned instead of a new one.
    return dataclasses.replace(from_json(Job, data), deduplicated=status == 200)


def _claim(data: Any, status: int) -> Claim:
    reported = {int(k): Status(v) for k, v in (data.get("reported") or {}).items()}
    return dataclasses.replace(from_json(Claim, {**data, "reported": {}}), reported=reported)


def _claim_send(a: Args) -> tuple[Body, Query]:
    body: dict[str, Any] = {n: a[n] for n in ("limit", "worker", "ack", "count_remaining")}
    body["lease_seconds"] = a["lease"]
    if a.get("report") is not None:  # endings written in the claim's transaction
        body["report"] = _report_all(a["report"])[0]
    return body, None


def _count(key: str) -> Read:
    return lambda data, status: int(data[key])


def _to_the_end(key: str) -> Read:
    """A count the server ran to the end, as a batched call's (count, more) answer."""
    return lambda data, status: (int(data[key]), False)


def _ints(key: str) -> Read:
    return lambda data, status: [int(i) for i in data[key]]


def _settings(data: Any, status: int) -> QueueSettings:
    return from_json(QueueSettings, data)


def _expired(data: Any, status: int) -> list[ExpiredJob]:
    return [
        ExpiredJob(from_json(Job, e["job"]), from_json(RetentionPolicy, e["policy"]),
                   e["archive"])
        for e in data["expired"]
    ]  # fmt: skip


def _none(data: Any, status: int) -> None:
    return None


E = Endpoint
JOB = "/api/jobs/{job_id:job_id}"
QUEUE = "/api/queues/{queue:name}"

# fmt: off
ENDPOINTS: Mapping[str, Endpoint] = {
    # -- adding jobs and reading them ------------------------------------------------------
    "enqueue": E(
        "POST", "/api/jobs", "Enqueue a job", "worker", "EnqueueRequest", "JobOut", 201,
        also=(200, "An active job already has the key"), errors=(409,),
        send=lambda a: (item(a, batch=False), None), read=_enqueued,
    ),
    "enqueue_many": E(
        "POST", "/api/jobs/batch", "Enqueue many jobs in one transaction", "worker",
        "BatchEnqueueRequest", "JobList | IdsOut", 201, errors=(409,), send=_batch(False),
        read=_jobs,
    ),
    "enqueue_ids": E(
        "POST", "/api/jobs/batch", "Enqueue many jobs in one transaction", "worker",
        "BatchEnqueueRequest", "JobList | IdsOut", 201, errors=(409,), send=_batch(True),
        read=_ints("ids"), served_by="enqueue_many",
    ),
    "jobs": E(
        "GET", "/api/jobs", "List jobs", "reader", response="JobList",
        # a client reads whole jobs
        send=lambda a: (None, {**a, "include": "payload,result"}), read=_jobs,
    ),
    "search_payload": E(
        "GET", "/api/jobs/search", "Jobs whose payload field has a value", "reader",
        send=lambda a: (None, {**a, "include": "payload,result"}),
        read=lambda data, status: PayloadMatches(
            tuple(_jobs(data, status)), data["next_before"]
        ),
    ),
    "deferred": E(
        "GET", "/api/jobs/deferred", "Jobs not yet due: scheduled or waiting to retry",
        "reader", response="JobList",
        send=lambda a: (None, {**a, "include": "payload,result"}), read=_jobs,
    ),
    "latest": E(
        "GET", "/api/jobs/latest", "The newest job with a key", "reader", response="JobOut",
        errors=(404,), send=lambda a: (None, dict(a)), read=_job, missing_is_none=True,
    ),
    "get": E(
        "GET", JOB, "A job", "reader", response="JobOut", errors=(404,), send=_nothing,
        read=_job, missing_is_none=True,
    ),
    "wait": E(
        "GET", f"{JOB}/wait", "Long poll until the job is final", "reader", response="JobOut",
        errors=(404,), send=_query("timeout"), read=_job,
    ),
    "subscribers": E(
        "GET", f"{JOB}/subscribers", "Who asked to hear of the job's end", "reader",
        response="SubscribersOut", send=_nothing,
        read=lambda data, status: list(data["subscribers"]),
    ),
    # -- what workers do -------------------------------------------------------------------
    "claim": E(
        "POST", f"{QUEUE}/claim", "Claim jobs", "worker", "ClaimRequest", "ClaimOut",
        send=_claim_send,
        read=_claim,
    ),
    "complete": E(
        "POST", f"{JOB}/complete", "Complete a claimed job", "worker", "CompleteRequest",
        "JobOut", errors=(404, 409), send=_one("complete"), read=_job,
    ),
    "fail": E(
        "POST", f"{JOB}/fail", "Report a failed attempt", "worker", "FailRequest", "JobOut",
        errors=(404, 409), send=_one("fail"), read=_job,
    ),
    "heartbeat": E(
        "POST", f"{JOB}/heartbeat", "Renew a claimed job's lease", "worker",
        "HeartbeatRequest", "JobOut", errors=(404, 409), send=_one("heartbeat"), read=_job,
    ),
    "progress": E(
        "POST", f"{JOB}/progress", "Record progress (absolute values)", "worker",
        "ProgressRequest", "JobOut", errors=(404, 409), send=_one("progress"), read=_job,
    ),
    "complete_many": E(
        "POST", "/api/batch/complete", "Complete many claimed jobs", "worker",
        "CompleteManyRequest", "JobList", send=_many("complete"), read=_jobs,
    ),
    "fail_many": E(
        "POST", "/api/batch/fail", "Report many failed attempts", "worker", "FailManyRequest",
        "JobList", send=_many("fail"), read=_jobs,
    ),
    "heartbeat_many": E(
        "POST", "/api/batch/heartbeat", "Renew many leases", "worker", "HeartbeatManyRequest",
        "JobList", send=_many("heartbeat"), read=_jobs,
    ),
    "take_notifications": E(
        "POST", "/api/notifications/take", "Take subscriber notifications to deliver",
        "worker", "TakeNotificationsRequest", "NotificationsOut",
        send=_body("limit", lease_seconds="lease"),
        read=lambda data, status: [
            (from_json(Job, n["job"]), list(n["subscribers"])) for n in data["notifications"]
        ],
    ),
    "mark_notified": E(
        "POST", "/api/notifications/mark", "Record subscribers as told", "worker",
        "MarkNotifiedRequest", "MarkedOut", send=_body("items"), read=_count("marked_count"),
    ),
    "ack": E(
        "POST", "/api/claims/{claim_id:claim_id}/ack", "Complete every running job of a claim",
        "worker", response="AckedOut", send=_nothing, read=_count("acked_count"),
    ),
    "release": E(
        "DELETE", "/api/claims/{claim_id:claim_id}",
        "Give a claim's running jobs back to pending", "worker", response="ResetOut",
        send=_queues, read=_count("reset_count"),
    ),
    "recover": E(
        "POST", "/api/recover", "Recover jobs whose lease expired", "worker",
        response="RecoveredOut", send=_queues_tasks, read=_count("recovered_count"),
    ),
    # -- what worker runtimes use beside ---------------------------------------------------
    "claim_job": E(
        "POST", f"{JOB}/claim", "Claim one job by id", "worker", "ClaimJobRequest", "ClaimOut",
        errors=(404, 409), send=_body("worker", lease_seconds="lease"), read=_claim,
    ),
    "snooze": E(
        "POST", f"{JOB}/snooze", "Put a claimed job back for a while, without spending an "
        "attempt", "worker", "SnoozeRequest", "JobOut", errors=(404, 409),
        send=_one("snooze"), read=_job,
    ),
    "report": E(
        "POST", "/api/batch/report", "Write many endings in one transaction", "worker",
        "ReportRequest", "ReportOut", send=_report_all,
        read=lambda data, status: {int(k): Status(v) for k, v in data["written"].items()},
    ),
    "renew": E(
        "POST", "/api/batch/renew", "Renew many leases; the ids still held", "worker",
        "HeartbeatManyRequest", "IdsOut", send=_many("heartbeat"),
        read=lambda data, status: {int(i) for i in data["ids"]},
    ),
    "retry_notifications": E(
        "POST", "/api/notifications/retry", "Deliveries that failed: offer them again later",
        "worker", "RetryNotificationsRequest", "RetriedOut",
        send=_body("items", "error", "max_attempts", base_seconds="base_s", cap_seconds="cap_s"),
        read=_count("retried_count"),
    ),
    "worker_seen": E(
        "PUT", "/api/workers/{name:name}", "Register a worker or refresh its entry", "worker",
        "WorkerRequest", status=204, send=_worker_seen, read=_none,
    ),
    "worker_stopped": E(
        "DELETE", "/api/workers/{name:name}", "Remove a worker's entry (a clean stop)",
        "worker", status=204, send=_nothing, read=_none,
    ),
    "forget_workers": E(
        "DELETE", "/api/workers", "Delete entries of workers presumed dead", "worker",
        response="RemovedOut", send=_query(expired_for_seconds="older_than"),
        read=_count("removed_count"),
    ),
    "save_schedule": E(
        "PUT", "/api/schedules/{name}", "Declare a periodic schedule", "worker",
        "ScheduleRequest", "ScheduleInfo",
        send=_json_of("task", "queue", "spec", "first_slot", "next_slot"),
        read=lambda data, status: from_json(ScheduleInfo, data),
    ),
    "run_schedule_slot": E(
        "POST", "/api/schedules/{name}/run", "Enqueue a schedule's job for a slot, once",
        "worker", "RunSlotRequest", send=_run_slot,
        read=lambda data, status: None if data["job"] is None else _job(data["job"], 0),
    ),
    "fold_counts": E(
        "POST", "/api/counts/fold", "Fold the job counts' pending changes", "worker",
        response="FoldedOut", send=_nothing,
        read=_to_the_end("folded_count"),
    ),
    # -- operating the queue ---------------------------------------------------------------
    "retry": E(
        "POST", f"{JOB}/retry", "Run a final job again", "admin", response="JobOut",
        errors=(404, 409),
        send=lambda a: (None, None if a["reset_attempts"] else {"reset_attempts": "false"}),
        read=_job,
    ),
    "release_job": E(
        "POST", f"{JOB}/release", "Put a running job back to pending, whoever holds it",
        "admin", response="JobOut", errors=(404, 409), send=_nothing, read=_job,
    ),
    "cancel": E(
        "POST", f"{JOB}/cancel", "Cancel a pending or running job", "admin", response="JobOut",
        errors=(404, 409), send=_nothing, read=_job,
    ),
    "reset_claims": E(
        "POST", "/api/claims/reset", "Reset old claims", "admin", response="ResetOut",
        send=lambda a: (None, {"older_than_minutes": a["older_than"] / 60,
                               **_filters(a)}),
        read=_count("reset_count"),
    ),
    "prune": E(
        "POST", "/api/prune", "Delete old final jobs", "admin", "PruneRequest", "RemovedOut",
        send=_body("statuses", older_than_seconds="older_than"),
        read=_to_the_end("removed_count"),
    ),
    "run_now": E(
        "POST", f"{JOB}/run-now", "Run a scheduled or retry-waiting job now", "admin",
        response="JobOut", errors=(404, 409), send=_nothing, read=_job,
    ),
    "run_now_all": E(
        "POST", "/api/jobs/bulk/run-now", "Run now every job not yet due that matches",
        "admin", "RunNowRequest", "RunNowOut", send=_body("queue", "task", "kind", "limit"),
        read=_ints("ids"),
    ),
    "delete_job": E(
        "DELETE", JOB, "Delete a final job", "admin", status=204, errors=(404, 409),
        send=_nothing, read=_none,
    ),
    "complete_by_key": E(
        "POST", f"{QUEUE}/complete-by-key",
        "Complete the active job with a key: the work was done elsewhere", "admin",
        "CompleteByKeyRequest", "CompletedOut", send=_body("key", "result", "include_failed"),
        read=_count("completed_count"),
    ),
    "cancel_by_key": E(
        "POST", f"{QUEUE}/cancel-by-key", "Cancel every active job with a key", "admin",
        "CancelByKeyRequest", "CancelledOut", send=_body("key"),
        read=_count("cancelled_count"),
    ),
    "fail_by_key": E(
        "POST", f"{QUEUE}/fail-by-key", "Fail every active job with a key, for good", "admin",
        "FailByKeyRequest", "FailedOut", send=_body("key", "error"), read=_count("failed_count"),
    ),
    "bulk_retry": E(
        "POST", "/api/jobs/bulk/retry", "Retry every final job that matches the filters",
        "admin", "BulkRetryRequest", "BulkOut",
    ),
    "bulk_cancel": E(
        "POST", "/api/jobs/bulk/cancel", "Cancel every active job that matches the filters",
        "admin", "BulkCancelRequest", "BulkOut",
    ),
    # -- flow control, and what readers see of queues, workers and schedules ---------------
    "pause": E(
        "POST", f"{QUEUE}/pause", "Pause a queue: no worker claims from it until it is resumed",
        "admin", response="QueueSettings", send=_nothing, read=_settings,
    ),
    "resume": E(
        "POST", f"{QUEUE}/resume", "Resume a paused queue", "admin", response="QueueSettings",
        send=_nothing, read=_settings,
    ),
    "set_limits": E(
        "PUT", f"{QUEUE}/limits", "Set a queue's concurrency caps and rate limits", "admin",
        "LimitsRequest", "QueueSettings",
        send=_json_of("max_running", "group_max_running", "rate", "group_rate"),
        read=_settings,
    ),
    "set_retention": E(
        "PUT", "/api/retention", "Set a retention policy", "admin", "RetentionRequest",
        "RetentionPolicyOut",
        send=_body("status", "queue", "task", "archive", "retire_keys", keep_seconds="keep"),
        read=lambda data, status: from_json(RetentionPolicy, data),
    ),
    "retention_policies": E(
        "GET", "/api/retention", "Every retention policy", "reader",
        response="RetentionPoliciesOut", send=_nothing,
        read=lambda data, status: [from_json(RetentionPolicy, p) for p in data["policies"]],
    ),
    "clear_retention": E(
        "POST", "/api/retention/clear", "Delete retention policies", "admin",
        "ClearRetentionRequest", "RemovedOut", send=_body("status", "queue", "task"),
        read=_count("removed_count"),
    ),
    "expired_jobs": E(
        "GET", "/api/retention/expired", "Final jobs their retention policy lets go now",
        "admin", send=_query("limit", "archive", "after"), read=_expired,
    ),
    "prune_expired": E(
        "POST", "/api/retention/prune", "Delete jobs their retention policy lets go",
        "admin", "PruneExpiredRequest", "RemovedOut", send=_body("ids", "archive"),
        read=_count("removed_count"),
    ),
    "queue_settings": E(
        "GET", "/api/queues/settings", "The flow control of every queue that has some",
        "reader", send=_query("queue"),
        read=lambda data, status: {n: _settings(s, 0) for n, s in data["queues"].items()},
    ),
    "workers": E(
        "GET", "/api/workers", "Registered workers, idle ones too", "reader", send=_nothing,
        read=lambda data, status: [from_json(WorkerInfo, w) for w in data["workers"]],
    ),
    "schedules": E(
        "GET", "/api/schedules", "Periodic schedules, with their last and next slot", "reader",
        send=_nothing,
        read=lambda data, status: [from_json(ScheduleInfo, s) for s in data["schedules"]],
    ),
    "throughput": E(
        "GET", "/api/throughput", "Jobs completed and failed per minute", "reader",
        send=lambda a: (None, dict(a)),
        read=lambda data, status: [from_json(Throughput, p) for p in data["minutes"]],
    ),
    "task_timings": E(
        "GET", "/api/tasks/timings", "Runs, failures and run-time percentiles per task",
        "reader", send=lambda a: (None, dict(a)),
        read=lambda data, status: [from_json(TaskTimings, t) for t in data["tasks"]],
    ),
    "throughput_hours": E(
        "GET", "/api/throughput/hours", "Jobs completed and failed per hour", "reader",
        send=lambda a: (None, dict(a)),
        read=lambda data, status: [from_json(ThroughputHour, p) for p in data["hours"]],
    ),
    "roll_up_throughput": E(
        "POST", "/api/throughput/roll-up", "Roll per-minute throughput up into hours",
        "worker", send=lambda a: (None, {"keep_minutes_seconds": a["keep_minutes"],
                                         "keep_hours_seconds": a["keep_hours"]}),
        read=_count("written_count"),
    ),
    "dependents": E(
        "GET", f"{JOB}/dependents", "The jobs that run after this one", "reader",
        response="DependentsOut", send=_nothing, read=_ints("dependents"),
    ),
    "parents": E(
        "GET", f"{JOB}/parents", "The jobs a job runs after", "reader",
        response="JobList", errors=(404,), send=_nothing, read=_jobs,
    ),
    # -- workflows --------------------------------------------------------------------------
    "enqueue_workflow": E(
        "POST", "/api/workflows", "Enqueue a workflow run", "worker", "WorkflowRequest",
        "WorkflowOut", status=201, errors=(409,),
        send=lambda a: (to_json(a["workflow"]), None), read=_run,
    ),
    "workflows": E(
        "GET", "/api/workflows", "List workflow runs", "reader", response="WorkflowList",
        send=lambda a: (None, dict(a)),
        read=lambda data, status: [summary_from_json(w) for w in data["workflows"]],
    ),
    "workflow": E(
        "GET", "/api/workflows/{workflow_id}", "A workflow run and its steps", "reader",
        response="WorkflowOut", errors=(404,), send=_nothing, read=_run,
    ),
    "cancel_workflow": E(
        "POST", "/api/workflows/{workflow_id}/cancel",
        "Cancel every step of a run not yet final", "admin", response="WorkflowOut",
        errors=(404,), send=_nothing, read=_run,
    ),
    "retry_workflow": E(
        "POST", "/api/workflows/{workflow_id}/retry",
        "Retry a run's failed steps and those after them", "admin", response="WorkflowOut",
        errors=(404, 409), send=_nothing, read=_run,
    ),
    # -- watching the service --------------------------------------------------------------
    "stats": E("GET", "/api/stats", "Counts per status", "reader", response="StatsOut"),
    "queue_stats": E(
        "GET", "/api/queues", "Counts per queue and status", "reader", response="QueuesOut",
        send=_nothing,
        read=lambda data, status: (
            {name: from_json(Stats, s) for name, s in data["queues"].items()},
            False,  # the server folds its own counts
        ),
    ),
    "task_stats": E(
        "GET", "/api/tasks/stats", "Counts per task and status", "reader", response="TasksOut",
        send=_query("queue"),
        read=lambda data, status: {
            name: from_json(Stats, s) for name, s in data["tasks"].items()
        },
    ),
    "metrics": E(
        "GET", "/metrics", "Prometheus metrics", "reader", text="Prometheus text format"
    ),
    "now": E(
        "GET", "/healthz", "Whether the database answers, with the schema this server needs",
        None, response="HealthOut", errors=(503,), every_error=False, send=_nothing,
        read=lambda data, status: parse_time(data["time"]),
    ),
    "whoami": E(
        "GET", "/api/whoami", "The role the request's token grants", "reader",
        response="WhoamiOut",
    ),
}
# fmt: on


def endpoint(op: str) -> Endpoint:
    """The entry of operation ``op``; ``KeyError`` when there is none."""
    return ENDPOINTS[op]


def markdown() -> str:
    """The table of every route as ``docs/http.md`` lists it (between its ``routes``
    markers): method and path, role, summary, success status."""
    lines = ["| method and path | role | what | success |", "|---|---|---|---|"]
    for op, e in ENDPOINTS.items():
        if e.served_by is not None:
            continue
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", e.path)
        methods = "GET, HEAD" if op == "now" else e.method
        status = str(e.status) + (f" (or {e.also[0]})" if e.also else "")
        lines.append(f"| `{methods} {path}` | {e.role or 'none'} | {e.summary} | {status} |")
    return "\n".join(lines) + "\n"


__all__ = ["ENDPOINTS", "Endpoint", "endpoint", "item", "markdown"]
