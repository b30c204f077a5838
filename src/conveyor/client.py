"""``RemoteQueue``: the queue contract spoken to a ``conveyor serve`` server.

    from conveyor.client import RemoteQueue
    q = RemoteQueue("http://queue.internal:8000", token="…")
    claim = q.claim("sync", limit=100)
    …
    claim = q.claim("sync", limit=100, ack=claim.id)   # acknowledges the last batch

It is a ``QueueAPI``: the same methods, arguments and checks as ``Queue`` (each call's
arguments are checked here before anything is sent), and the server's error envelope
becomes the same exceptions (``StaleClaim``, ``JobNotFound``, …). A server that cannot
be reached, or whose database is down, raises ``DatabaseError``; a refused token raises
``ConfigurationError``. Nothing is retried behind the caller's back: a claim is not
idempotent. Needs ``httpx`` (the ``server`` extra).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote

import httpx

from conveyor.codec import from_json, parse_time, to_json
from conveyor.contract import QueueAPI
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    StaleClaim,
    TransactionConflict,
)
from conveyor.info import QueueSettings, ScheduleInfo, Throughput, WorkerInfo
from conveyor.job import Claim, Job, Stats, Status
from conveyor.ops import Call
from conveyor.ops.defaults import Defaults

T = TypeVar("T")
# One long poll never outlasts the server's default bound (60 s); wait() chains them.
_WAIT_SLICE = 30.0
# Each error class names its own code: the server sends it, the client maps it back.
_ERRORS_BY_CODE: dict[str, type[ConveyorError]] = {
    cls.code: cls
    for cls in (
        JobNotFound,
        StaleClaim,
        InvalidTransition,
        DuplicateJob,
        DatabaseError,
        TransactionConflict,
    )
}
Request = tuple[str, str, Any, Mapping[str, Any] | None]  # method, path, body, query


class RemoteQueue(QueueAPI):
    """A queue behind a conveyor HTTP server. ``http``: an ``httpx.Client`` of your own
    (its base URL and headers are used as they are; ``url`` and ``token`` are ignored)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        worker_name: str | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.defaults = Defaults() if worker_name is None else Defaults(worker_name=worker_name)
        if http is None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self._http = http

    def close(self) -> None:
        self._http.close()

    def _run(self, call: Call[T]) -> T:
        if call.conn is not None:
            raise InvalidArgument("conn: a remote queue cannot join a local database transaction")
        method, path, body, query = request_for(call.op, call.args)
        try:
            data, status = self._send(method, path, body, query)
        except JobNotFound:
            if call.op in MISSING_IS_NONE:  # "no such job" is their answer, not an error
                return None  # type: ignore[return-value]
            raise
        result: T = decode(call.op, data, status)
        return result

    def _watch(self, job_id: int, left: float | None, poll: float) -> Job | None:
        # One long poll of the server (``poll`` is not needed: the server wakes us).
        method, path, query, slice_s = watch_request(job_id, left)
        data, _ = self._send(method, path, None, query, timeout=self.timeout + slice_s)
        return watch_result(data, left)

    # -- transport ------------------------------------------------------------------
    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        query: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
    ) -> tuple[Any, int]:
        content = encode_body(body)
        headers = content_headers(method, content)
        params = query_params(query)
        try:
            response = self._http.request(
                method, path, content=content, headers=headers, params=params,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )  # fmt: skip
        except httpx.TransportError as exc:
            raise DatabaseError(f"cannot reach the conveyor server at {self.url}: {exc}") from None
        return answer(response, method, path)


def request_for(op: str, a: Mapping[str, Any]) -> Request:
    """The HTTP request that carries out operation ``op`` with checked arguments ``a``."""
    if op == "enqueue":
        body = _item(a) | {k: a[k] for k in ("on_active", "on_failed", "on_completed")}
        if a["cache_ttl"] is not None:
            body["cache_ttl_seconds"] = a["cache_ttl"]
        return "POST", "/api/jobs", body, None
    if op in ("enqueue_many", "enqueue_ids"):
        body = {"jobs": [_item(i) for i in a["items"]], "queue": a["queue"]}
        if op == "enqueue_ids":
            body["ids_only"] = True
        return "POST", "/api/jobs/batch", body, None
    if op == "claim":
        body = {"limit": a["limit"], "lease_seconds": a["lease"], "worker": a["worker"],
                "ack": a["ack"], "count_remaining": a["count_remaining"]}  # fmt: skip
        return "POST", f"/api/queues/{_segment(a['queue'], 'queue')}/claim", body, None
    if op == "claim_job":
        body = {"lease_seconds": a["lease"], "worker": a["worker"]}
        return "POST", f"{job_path(a['job_id'])}/claim", body, None
    if op in ("complete", "fail", "heartbeat", "progress", "snooze"):
        return "POST", f"{job_path(a['job_id'])}/{op}", _report_body(op, a), None
    if op in ("complete_many", "fail_many", "heartbeat_many", "renew"):
        kind = {"complete_many": "complete", "fail_many": "fail"}.get(op, "heartbeat")
        body = {"items": [_report_body(kind, i) | {"job_id": i["job_id"]} for i in a["items"]]}
        if "extend" in a:
            body["extend_seconds"] = a["extend"]
        path = "/api/batch/renew" if op == "renew" else f"/api/batch/{kind}"
        return "POST", path, body, None
    if op == "report":
        body = {
            kind: [_report_body(one, i) | {"job_id": i["job_id"]} for i in a[kind]]
            for kind, one in (("completed", "complete"), ("failed", "fail"),
                              ("snoozed", "snooze"))
        }  # fmt: skip
        return "POST", "/api/batch/report", body, None
    if op == "ack":
        return "POST", f"/api/claims/{_segment(a['claim_id'], 'claim_id')}/ack", None, None
    if op == "release":
        path = f"/api/claims/{_segment(a['claim_id'], 'claim_id')}"
        return "DELETE", path, None, {"queue": _names(a["queue"])}
    if op == "release_job":
        return "POST", f"{job_path(a['job_id'])}/release", None, None
    if op == "reset_claims":
        query = {"older_than_minutes": a["older_than"] / 60, "queue": _names(a["queue"])}
        return "POST", "/api/claims/reset", None, query
    if op == "recover":
        return "POST", "/api/recover", None, {"queue": _names(a["queue"])}
    if op == "retry":
        keep = None if a["reset_attempts"] else {"reset_attempts": "false"}
        return "POST", f"{job_path(a['job_id'])}/retry", None, keep
    if op == "cancel":
        return "POST", f"{job_path(a['job_id'])}/cancel", None, None
    if op == "complete_by_key":
        body = {"key": a["key"], "result": a["result"], "include_failed": a["include_failed"]}
        return "POST", f"/api/queues/{_segment(a['queue'], 'queue')}/complete-by-key", body, None
    if op == "prune":
        body = {"older_than_seconds": a["older_than"], "statuses": a["statuses"]}
        return "POST", "/api/prune", body, None
    if op in ("pause", "resume"):
        return "POST", f"/api/queues/{_segment(a['queue'], 'queue')}/{op}", None, None
    if op == "set_limits":
        body = {k: to_json(a[k]) for k in ("max_running", "group_max_running", "rate",
                                           "group_rate")}  # fmt: skip
        return "PUT", f"/api/queues/{_segment(a['queue'], 'queue')}/limits", body, None
    if op == "queue_settings":
        return "GET", "/api/queues/settings", None, {"queue": a["queue"]}
    if op == "now":
        return "GET", "/healthz", None, None
    if op == "get":
        return "GET", job_path(a["job_id"]), None, None
    if op == "latest":
        return "GET", "/api/jobs/latest", None, dict(a)
    if op == "jobs":
        query = {**a, "include": "payload,result"}  # a client reads whole jobs
        return "GET", "/api/jobs", None, query
    if op in ("dependents", "subscribers"):
        return "GET", f"{job_path(a['job_id'])}/{op}", None, None
    if op == "queue_stats":
        return "GET", "/api/queues", None, None
    if op == "fold_counts":
        return "POST", "/api/counts/fold", None, None
    if op == "throughput":
        return "GET", "/api/throughput", None, dict(a)
    if op == "worker_seen":
        body = {k: a[k] for k in ("host", "pid", "queues", "concurrency", "version", "running")}
        body["ttl_seconds"] = a["ttl_s"]
        return "PUT", f"/api/workers/{_segment(a['name'], 'worker')}", body, None
    if op == "worker_stopped":
        return "DELETE", f"/api/workers/{_segment(a['name'], 'worker')}", None, None
    if op == "workers":
        return "GET", "/api/workers", None, None
    if op == "forget_workers":
        return "DELETE", "/api/workers", None, {"expired_for_seconds": a["older_than"]}
    if op == "save_schedule":
        body = {k: to_json(a[k]) for k in ("task", "queue", "spec", "first_slot", "next_slot")}
        return "PUT", f"/api/schedules/{_segment(a['name'], 'schedule')}", body, None
    if op == "run_schedule_slot":
        body = _item(a) | {"slot": to_json(a["slot"]), "next_slot": to_json(a["next_slot"])}
        return "POST", f"/api/schedules/{_segment(a['name'], 'schedule')}/run", body, None
    if op == "schedules":
        return "GET", "/api/schedules", None, None
    if op == "take_notifications":
        body = {"limit": a["limit"], "lease_seconds": a["lease"]}
        return "POST", "/api/notifications/take", body, None
    if op == "mark_notified":
        return "POST", "/api/notifications/mark", {"items": a["items"]}, None
    if op == "retry_notifications":
        body = {"items": a["items"], "error": a["error"], "base_seconds": a["base_s"],
                "cap_seconds": a["cap_s"], "max_attempts": a["max_attempts"]}  # fmt: skip
        return "POST", "/api/notifications/retry", body, None
    raise ConfigurationError(f"a remote queue cannot run {op!r}")


def watch_request(job_id: int, left: float | None) -> tuple[str, str, dict[str, float], float]:
    """The long poll for one step of ``wait``: method, path, query and its length."""
    slice_s = _WAIT_SLICE if left is None else min(left, _WAIT_SLICE)
    return "GET", f"{job_path(job_id)}/wait", {"timeout": round(slice_s, 3)}, slice_s


def watch_result(data: Any, left: float | None) -> Job | None:
    """The job if it is final or the wait is over; None: poll again."""
    job = _job(data, 200)
    over = left is not None and left <= _WAIT_SLICE
    return job if job.is_final or over else None


def _report_body(op: str, a: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"claim_id": a["claim_id"]}
    if op == "complete":
        body["result"] = a["result"]
    elif op == "fail":
        body.update(error=a["error"], retryable=a["retryable"], delay_seconds=a["delay"])
    elif op == "snooze":
        body["delay_seconds"] = a["delay"]
    elif op == "progress":
        body.update({k: a[k] for k in ("total", "completed", "failed", "current",
                                       "checkpoint", "detail")})  # fmt: skip
    elif op == "heartbeat" and "extend" in a:
        body["extend_seconds"] = a["extend"]
    return body


def _item(a: Mapping[str, Any]) -> dict[str, Any]:
    """An enqueue item in its wire form: defaults left out, times as ISO 8601."""
    fields = ("task", "payload", "queue", "key", "priority", "run_at", "max_attempts",
              "subscriber", "group", "after")  # fmt: skip
    out = {k: to_json(a[k]) for k in fields if a.get(k) is not None}
    if a.get("on_dependency_failure", "cancel") != "cancel":
        out["on_dependency_failure"] = a["on_dependency_failure"]
    return out


def _jobs(data: Any, status: int) -> list[Job]:
    # Past the server's byte budget, the answer to a batch write lists jobs without
    # their payload and result ("truncated"): they come back as None.
    return [from_json(Job, {"payload": None, "result": None, **j}) for j in data["jobs"]]


def _job(data: Any, status: int) -> Job:
    return from_json(Job, data)


def _enqueued(data: Any, status: int) -> Job:
    # 200 (not 201): the key's active job was returned instead of a new one.
    return dataclasses.replace(from_json(Job, data), deduplicated=status == 200)


def _count(key: str) -> Callable[[Any, int], int]:
    return lambda data, status: int(data[key])


def _claim(data: Any, status: int) -> Claim:
    return from_json(Claim, data)


_DECODE: dict[str, Callable[[Any, int], Any]] = {
    "enqueue": _enqueued,
    "enqueue_many": _jobs,
    "enqueue_ids": lambda data, status: [int(i) for i in data["ids"]],
    "claim": _claim,
    "claim_job": _claim,
    "complete": _job,
    "fail": _job,
    "heartbeat": _job,
    "progress": _job,
    "snooze": _job,
    "complete_many": _jobs,
    "fail_many": _jobs,
    "heartbeat_many": _jobs,
    "renew": lambda data, status: {int(i) for i in data["ids"]},
    "report": lambda data, status: {int(k): Status(v) for k, v in data["written"].items()},
    "ack": _count("acked_count"),
    "release": _count("reset_count"),
    "release_job": _job,
    "reset_claims": _count("reset_count"),
    "recover": _count("recovered_count"),
    "retry": _job,
    "cancel": _job,
    "complete_by_key": _count("completed_count"),
    "prune": _count("removed_count"),
    "pause": lambda data, status: from_json(QueueSettings, data),
    "resume": lambda data, status: from_json(QueueSettings, data),
    "set_limits": lambda data, status: from_json(QueueSettings, data),
    "queue_settings": lambda data, status: {
        name: from_json(QueueSettings, s) for name, s in data["queues"].items()
    },
    "now": lambda data, status: parse_time(data["time"]),
    "get": _job,
    "latest": _job,
    "jobs": _jobs,
    "dependents": lambda data, status: [int(i) for i in data["dependents"]],
    "subscribers": lambda data, status: list(data["subscribers"]),
    "queue_stats": lambda data, status: (
        {name: from_json(Stats, s) for name, s in data["queues"].items()},
        False,  # the server folds its own counts
    ),
    "fold_counts": _count("folded_count"),
    "throughput": lambda data, status: [from_json(Throughput, p) for p in data["minutes"]],
    "worker_seen": lambda data, status: None,
    "worker_stopped": lambda data, status: None,
    "workers": lambda data, status: [from_json(WorkerInfo, w) for w in data["workers"]],
    "forget_workers": _count("removed_count"),
    "save_schedule": lambda data, status: from_json(ScheduleInfo, data),
    "run_schedule_slot": lambda data, status: None if data["job"] is None else _job(data["job"], 0),
    "schedules": lambda data, status: [from_json(ScheduleInfo, s) for s in data["schedules"]],
    "take_notifications": lambda data, status: [
        (from_json(Job, n["job"]), list(n["subscribers"])) for n in data["notifications"]
    ],
    "mark_notified": _count("marked_count"),
    "retry_notifications": _count("retried_count"),
}


# Operations whose "no such job" answer is None rather than an error.
MISSING_IS_NONE = frozenset({"get", "latest"})


def decode(op: str, data: Any, status: int) -> Any:
    """The result of operation ``op`` from the server's answer."""
    return _DECODE[op](data, status)


def answer(response: httpx.Response, method: str, path: str) -> tuple[Any, int]:
    """The JSON body and status of a successful answer; otherwise the exception that
    the error envelope names."""
    if response.status_code == 204:
        return None, 204
    if response.is_success:
        try:
            return response.json(), response.status_code
        except ValueError:
            raise DatabaseError(
                f"{method} {path}: the server answered {response.status_code} without JSON"
            ) from None
    _raise_for(response, method, path)


def encode_body(body: Any) -> bytes | None:
    return None if body is None else _encode(body)


def content_headers(method: str, content: bytes | None) -> dict[str, str] | None:
    """A body is JSON; and a request that changes something says JSON even without a
    body, which the server asks of every such request (a browser form cannot)."""
    if content is None and method in ("GET", "HEAD"):
        return None
    return {"Content-Type": "application/json"}


def query_params(query: Mapping[str, Any] | None) -> dict[str, str | int | float]:
    return {k: _query_value(v) for k, v in (query or {}).items() if v is not None}


def _raise_for(response: httpx.Response, method: str, path: str) -> NoReturn:
    status = response.status_code
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        error, code, message = {}, "", f"{method} {path}: HTTP {status}"
    if status in (401, 403):
        raise ConfigurationError(f"the server refused the request ({code}): {message}")
    cls = _ERRORS_BY_CODE.get(code)
    if cls is DuplicateJob:
        raise DuplicateJob(message, job_id=error.get("job_id"))
    if cls is not None:
        raise cls(message)
    if status in (400, 413, 415, 422):
        raise InvalidArgument(message)
    if status in (502, 503, 504):
        raise DatabaseError(message)
    raise ConveyorError(f"{method} {path}: HTTP {status}: {message}")


def _encode(body: Any) -> bytes:
    try:
        text = json.dumps(body, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"expected JSON-serialisable values ({exc})") from None
    return text.encode("utf-8", "surrogatepass")


def _names(queues: tuple[str, ...] | None) -> str | None:
    if queues is None:
        return None
    for name in queues:
        if "," in name:
            raise InvalidArgument(f"queue: a remote queue cannot send a ',' in a name: {name!r}")
    return ",".join(queues)


def job_path(job_id: int) -> str:
    return f"/api/jobs/{job_id}"


def _segment(value: str, what: str) -> str:
    # Servers decode %2F before routing. Queue and worker routes take a '/' in a name;
    # a schedule's would be ambiguous beside its /run route, and claim ids never have one.
    if what in ("claim_id", "schedule") and "/" in value:
        raise InvalidArgument(f"{what}: a remote queue cannot send a '/' here")
    return quote(value, safe="")


def _query_value(value: Any) -> str | int | float:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    return str(to_json(value))


__all__ = ["RemoteQueue"]
