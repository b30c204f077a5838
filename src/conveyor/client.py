"""``RemoteQueue``: the ``Queue`` contract spoken to a ``conveyor serve`` server.

    from conveyor.client import RemoteQueue
    q = RemoteQueue("http://queue.internal:8000", token="…")
    claim = q.claim("sync", limit=100)
    …
    claim = q.claim("sync", limit=100, ack=claim.id)   # acknowledges the last batch

Methods, arguments and return values are those of ``Queue``, and the server's error
envelope becomes the same exceptions (``StaleClaim``, ``JobNotFound``, …). A server that
cannot be reached, or whose database is down, raises ``DatabaseError``; a refused token
raises ``ConfigurationError``. Nothing is retried behind the caller's back: a claim is
not idempotent. Needs ``httpx`` (the ``server`` extra).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn
from urllib.parse import quote

import httpx

from conveyor import validation as check
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    StaleClaim,
)
from conveyor.job import Claim, ErrorKind, Job, Progress, Stats, Status
from conveyor.queue import DEFAULT_LEASE, Duration
from conveyor.retry import seconds

# One long poll never outlasts the server's default bound (60 s); wait() chains them.
_WAIT_SLICE = 30.0
# Each error class names its own code: the server sends it, the client maps it back.
_ERRORS_BY_CODE: dict[str, type[ConveyorError]] = {
    cls.code: cls
    for cls in (JobNotFound, StaleClaim, InvalidTransition, DuplicateJob, DatabaseError)
}
_ENQUEUE_FIELDS = ("task", "payload", "queue", "key", "priority", "run_at", "max_attempts",
                   "subscriber")  # fmt: skip


class RemoteQueue:
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
        self.worker_name = worker_name or f"{socket.gethostname()}:{os.getpid()}"
        if http is None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self._http = http

    # -- lifecycle ------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        """The database clock, as the server reads it."""
        return _time(self._call("GET", "/healthz")["time"])

    # -- enqueue --------------------------------------------------------------------
    def enqueue(
        self,
        task: str,
        payload: Any = None,
        *,
        queue: str = "default",
        key: str | None = None,
        priority: int = 0,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        subscriber: str | None = None,
        conn: Any = None,
        on_active: str = "return",
        cache_ttl: Duration | None = None,
        on_failed: str = "new",
    ) -> Job:
        _no_conn(conn)
        body = _item(task=task, payload=payload, queue=queue, key=key, priority=priority,
                     run_at=run_at, max_attempts=max_attempts, subscriber=subscriber)  # fmt: skip
        body["on_active"] = on_active
        body["on_failed"] = on_failed
        if cache_ttl is not None:
            body["cache_ttl_seconds"] = seconds(cache_ttl, "cache_ttl")
        data, status = self._call_with_status("POST", "/api/jobs", body)
        return job_from_json(data, deduplicated=status == 200)

    def enqueue_many(
        self, items: Iterable[Mapping[str, Any]], *, queue: str = "default", conn: Any = None
    ) -> list[Job]:
        _no_conn(conn)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidArgument("items: expected a list of dicts")
        jobs = []
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidArgument(f"items[{index}]: expected a dict, got {type(item).__name__}")
            unknown = set(item) - set(_ENQUEUE_FIELDS)
            if unknown:
                raise InvalidArgument(
                    f"items[{index}]: unknown field(s) {', '.join(sorted(unknown))}"
                )
            jobs.append(_item(**item))
        if not jobs:
            return []
        data = self._call("POST", "/api/jobs/batch", {"jobs": jobs, "queue": queue})
        return [job_from_json(j) for j in data["jobs"]]

    # -- claim and report -----------------------------------------------------------
    def claim(
        self,
        queue: str = "default",
        *,
        limit: int = 1,
        lease: Duration = DEFAULT_LEASE,
        worker: str | None = None,
        ack: str | None = None,
        count_remaining: bool = True,
    ) -> Claim:
        body = {"limit": limit, "lease_seconds": seconds(lease, "lease", allow_zero=False),
                "worker": worker or self.worker_name, "ack": ack,
                "count_remaining": count_remaining}  # fmt: skip
        data = self._call("POST", f"/api/queues/{_segment(queue, 'queue')}/claim", body)
        return Claim(
            id=data["claim_id"],
            queue=data["queue"],
            jobs=[job_from_json(j) for j in data["jobs"]],
            remaining=data["remaining"],
            acked=data["acked"],
        )

    def complete(self, job_id: int, claim_id: str, result: Any = None) -> Job:
        body = {"claim_id": claim_id, "result": result}
        return job_from_json(self._call("POST", f"{_job_path(job_id)}/complete", body))

    def complete_many(self, items: Sequence[tuple[int, str, Any]]) -> list[Job]:
        batch = [{"job_id": j, "claim_id": c, "result": r} for j, c, r in items]
        return self._batch("/api/batch/complete", {"items": batch}) if batch else []

    def fail(
        self,
        job_id: int,
        claim_id: str,
        error: str,
        *,
        retryable: bool = True,
        delay: Duration | None = None,
    ) -> Job:
        body = {"claim_id": claim_id, "error": error, "retryable": retryable,
                "delay_seconds": None if delay is None else seconds(delay, "delay")}  # fmt: skip
        return job_from_json(self._call("POST", f"{_job_path(job_id)}/fail", body))

    def fail_many(self, items: Sequence[tuple[int, str, str, bool, Duration | None]]) -> list[Job]:
        batch = [
            {"job_id": j, "claim_id": c, "error": e, "retryable": r,
             "delay_seconds": None if d is None else seconds(d, "delay")}
            for j, c, e, r, d in items
        ]  # fmt: skip
        return self._batch("/api/batch/fail", {"items": batch}) if batch else []

    def heartbeat(self, job_id: int, claim_id: str, *, extend: Duration | None = None) -> Job:
        body = {"claim_id": claim_id, "extend_seconds": _extend(extend)}
        return job_from_json(self._call("POST", f"{_job_path(job_id)}/heartbeat", body))

    def heartbeat_many(
        self, items: Sequence[tuple[int, str]], *, extend: Duration | None = None
    ) -> list[Job]:
        batch = [{"job_id": j, "claim_id": c} for j, c in items]
        body = {"items": batch, "extend_seconds": _extend(extend)}
        return self._batch("/api/batch/heartbeat", body) if batch else []

    def progress(
        self,
        job_id: int,
        claim_id: str,
        *,
        total: int | None = None,
        completed: int | None = None,
        failed: int | None = None,
        current: Any = None,
        checkpoint: Any = None,
        detail: Any = None,
    ) -> Job:
        body = {"claim_id": claim_id, "total": total, "completed": completed, "failed": failed,
                "current": current, "checkpoint": checkpoint, "detail": detail}  # fmt: skip
        return job_from_json(self._call("POST", f"{_job_path(job_id)}/progress", body))

    def take_notifications(
        self, *, limit: int = 100, lease: Duration = 60.0
    ) -> list[tuple[Job, list[str]]]:
        body = {"limit": limit, "lease_seconds": seconds(lease, "lease", allow_zero=False)}
        taken = self._call("POST", "/api/notifications/take", body)["notifications"]
        return [(job_from_json(n["job"]), list(n["subscribers"])) for n in taken]

    def mark_notified(self, items: Sequence[tuple[int, str]]) -> int:
        batch = [{"job_id": j, "subscriber": who} for j, who in items]
        if not batch:
            return 0
        return int(self._call("POST", "/api/notifications/mark", {"items": batch})["marked_count"])

    # -- claims, admin --------------------------------------------------------------
    def ack(self, claim_id: str) -> int:
        path = f"/api/claims/{_segment(claim_id, 'claim_id')}/ack"
        return int(self._call("POST", path)["acked_count"])

    def release(self, claim_id: str) -> int:
        path = f"/api/claims/{_segment(claim_id, 'claim_id')}"
        return int(self._call("DELETE", path)["reset_count"])

    def reset_claims(self, older_than: Duration) -> int:
        minutes = seconds(older_than, "older_than") / 60
        data = self._call("POST", "/api/claims/reset", params={"older_than_minutes": minutes})
        return int(data["reset_count"])

    def recover(self) -> int:
        return int(self._call("POST", "/api/recover")["recovered_count"])

    def retry(self, job_id: int) -> Job:
        return job_from_json(self._call("POST", f"{_job_path(job_id)}/retry"))

    def cancel(self, job_id: int) -> Job:
        return job_from_json(self._call("POST", f"{_job_path(job_id)}/cancel"))

    def complete_by_key(self, key: str, *, queue: str = "default", result: Any = None) -> int:
        path = f"/api/queues/{_segment(queue, 'queue')}/complete-by-key"
        return int(self._call("POST", path, {"key": key, "result": result})["completed_count"])

    def prune(self, *, older_than: Duration, statuses: Iterable[str] = ("completed",)) -> int:
        wanted = [str(s) for s in check.statuses(statuses)]
        body = {"older_than_seconds": seconds(older_than, "older_than"), "statuses": wanted}
        return int(self._call("POST", "/api/prune", body)["removed_count"])

    # -- reading --------------------------------------------------------------------
    def get(self, job_id: int) -> Job | None:
        try:
            return job_from_json(self._call("GET", _job_path(job_id)))
        except JobNotFound:
            return None

    def latest(self, key: str, *, queue: str = "default") -> Job | None:
        try:
            data = self._call("GET", "/api/jobs/latest", params={"key": key, "queue": queue})
        except JobNotFound:
            return None
        return job_from_json(data)

    def jobs(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        key: str | None = None,
        limit: int = 100,
        after: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        params = {"queue": queue, "status": None if status is None else str(status), "key": key,
                  "limit": limit, "after": after, "newest_first": newest_first}  # fmt: skip
        data = self._call("GET", "/api/jobs", params=params)
        return [job_from_json(j) for j in data["jobs"]]

    def stats(self, queue: str | None = None) -> Stats:
        return stats_from_json(self._call("GET", "/api/stats", params={"queue": queue}))

    def queue_stats(self, queue: str | None = None) -> dict[str, Stats]:
        data = self._call("GET", "/api/queues")["queues"]
        result = {name: stats_from_json(s) for name, s in data.items()}
        if queue is None:
            return result
        return {queue: result[queue]} if queue in result else {}

    def subscribers(self, job_id: int) -> list[str]:
        return list(self._call("GET", f"{_job_path(job_id)}/subscribers")["subscribers"])

    def wait(self, job_id: int, timeout: Duration | None = None, *, poll: float = 0.5) -> Job:
        """Block until the job is final, or ``timeout`` passes; returns the job as it is
        then. Long polls the server (``poll`` is accepted for ``Queue`` compatibility)."""
        limit = None if timeout is None else seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        path = f"{_job_path(job_id)}/wait"
        while True:
            left = _WAIT_SLICE if deadline is None else max(0.0, deadline - time.monotonic())
            slice_s = min(left, _WAIT_SLICE)
            data = self._call("GET", path, params={"timeout": round(slice_s, 3)},
                              timeout=self.timeout + slice_s)  # fmt: skip
            job = job_from_json(data)
            if job.is_final or (deadline is not None and time.monotonic() >= deadline):
                return job

    # -- transport ------------------------------------------------------------------
    def _batch(self, path: str, body: dict[str, Any]) -> list[Job]:
        return [job_from_json(j) for j in self._call("POST", path, body)["jobs"]]

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        return self._call_with_status(method, path, body, params=params, timeout=timeout)[0]

    def _call_with_status(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> tuple[Any, int]:
        content = None if body is None else _encode(body)
        headers = {"Content-Type": "application/json"} if content is not None else None
        query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(
                method, path, content=content, headers=headers, params=query,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )  # fmt: skip
        except httpx.TransportError as exc:
            raise DatabaseError(f"cannot reach the conveyor server at {self.url}: {exc}") from None
        if response.is_success:
            try:
                return response.json(), response.status_code
            except ValueError:
                raise DatabaseError(
                    f"{method} {path}: the server answered {response.status_code} without JSON"
                ) from None
        _raise_for(response, method, path)


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


# -- encoding ---------------------------------------------------------------------------
def _encode(body: Any) -> bytes:
    try:
        text = json.dumps(body, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"expected JSON-serialisable values ({exc})") from None
    return text.encode("utf-8", "surrogatepass")


def _item(**fields: Any) -> dict[str, Any]:
    """An enqueue item in its wire form: defaults left out, run_at as ISO 8601."""
    out = {k: v for k, v in fields.items() if v is not None}
    if "run_at" in out:
        out["run_at"] = check.timestamp(out["run_at"], "run_at").isoformat()  # type: ignore[union-attr]
    return out


def _extend(extend: Duration | None) -> float | None:
    return None if extend is None else seconds(extend, "extend", allow_zero=False)


def _no_conn(conn: Any) -> None:
    if conn is not None:
        raise InvalidArgument("conn: a remote queue cannot join a local database transaction")


def _job_path(job_id: Any) -> str:
    return f"/api/jobs/{check.integer(job_id, 'job_id', low=1, high=2**63 - 1)}"


def _segment(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what}: expected a non-empty string, got {value!r}")
    if "/" in value:  # servers decode %2F before routing, so it cannot travel in a path
        raise InvalidArgument(f"{what}: a remote queue cannot send a '/' here, got {value!r}")
    return quote(value, safe="")


def _query_value(value: Any) -> str | int | float:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    return str(value)


# -- decoding ---------------------------------------------------------------------------
def _time(value: Any) -> datetime:
    return datetime.fromisoformat(value)


def _maybe_time(value: Any) -> datetime | None:
    return None if value is None else _time(value)


def job_from_json(data: Mapping[str, Any], *, deduplicated: bool | None = None) -> Job:
    """A ``Job`` from its JSON form (``Job.to_dict()`` or the API's job object)."""
    kind = data.get("error_kind")
    return Job(
        id=data["id"],
        queue=data["queue"],
        task=data["task"],
        payload=data["payload"],
        key=data["key"],
        status=Status(data["status"]),
        priority=data["priority"],
        run_at=_time(data["run_at"]),
        attempts=data["attempts"],
        max_attempts=data["max_attempts"],
        claim_id=data["claim_id"],
        claimed_at=_maybe_time(data["claimed_at"]),
        lease_expires_at=_maybe_time(data["lease_expires_at"]),
        heartbeat_at=_maybe_time(data["heartbeat_at"]),
        worker=data["worker"],
        progress=Progress(**data["progress"]),
        result=data["result"],
        error=data["error"],
        error_kind=ErrorKind(kind) if kind else None,
        created_at=_time(data["created_at"]),
        started_at=_maybe_time(data["started_at"]),
        finished_at=_maybe_time(data["finished_at"]),
        updated_at=_time(data["updated_at"]),
        deduplicated=bool(data.get("deduplicated")) if deduplicated is None else deduplicated,
    )


def stats_from_json(data: Mapping[str, Any]) -> Stats:
    fields = {k: data[k] for k in Stats.__dataclass_fields__ if k in data}
    fields["oldest_pending_at"] = _maybe_time(fields.get("oldest_pending_at"))
    return Stats(**fields)
