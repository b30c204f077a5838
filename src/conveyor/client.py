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
``ConfigurationError``. Needs ``httpx`` (the ``server`` extra).

The calls that create jobs (``enqueue``, ``enqueue_many``, ``enqueue_ids``,
``enqueue_workflow``) carry a fresh ``Idempotency-Key`` each, and are sent again with
the same key, a few times with a growing pause, when the answer is lost (the connection
failed or timed out, or a proxy answered 502, 503 or 504): the server creates the jobs
once and replays its first answer to the retries. Nothing else is retried behind the
caller's back: a claim is not idempotent.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
import uuid
from collections.abc import Mapping
from typing import Any, NoReturn, TypeVar

import httpx

from conveyor import tracing
from conveyor.codec import from_json, to_json
from conveyor.contract import QueueAPI
from conveyor.endpoints import ENDPOINTS
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DatabaseUnavailable,
    DuplicateJob,
    IdempotencyKeyReused,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    RequestInProgress,
    StaleClaim,
    StorageFull,
    StorageReadOnly,
    TooManySubscribers,
    TransactionConflict,
    WorkflowNotFound,
)
from conveyor.info import WorkerInfo
from conveyor.job import Job
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
        DatabaseUnavailable,
        StorageFull,
        StorageReadOnly,
        WorkflowNotFound,
        IdempotencyKeyReused,
        RequestInProgress,
        TooManySubscribers,
    )
}
Request = tuple[str, str, Any, Mapping[str, Any] | None]  # method, path, body, query
# The calls that create jobs: each sent with an Idempotency-Key of its own, and sent
# again with it (at most CREATE_ATTEMPTS times in all) when its answer is lost.
CREATES = frozenset({"enqueue", "enqueue_many", "enqueue_ids", "enqueue_workflow"})
CREATE_ATTEMPTS = 4
_RETRY_STATUSES = frozenset({502, 503, 504})
_IN_PROGRESS = "idempotency_request_in_progress"
_MAX_PAUSE = 5.0


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
        if call.op == "workers":  # the server lists them a page at a time
            return self._workers()  # type: ignore[return-value]
        method, path, body, query = request_for(call.op, call.args)
        try:
            data, status = self._send(method, path, body, query, key=idempotency_key(call.op))
        except JobNotFound:
            if missing_is_none(call.op):  # "no such job" is their answer, not an error
                return None  # type: ignore[return-value]
            raise
        result: T = decode(call.op, data, status)
        return result

    def _workers(self) -> list[WorkerInfo]:
        found: list[WorkerInfo] = []
        after: str | None = None
        while True:
            data, _ = self._send("GET", "/api/workers", None, {"after": after})
            found += [from_json(WorkerInfo, w) for w in data["workers"]]
            after = data.get("next_after")
            if after is None:
                return found

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
        key: str | None = None,
    ) -> tuple[Any, int]:
        content = encode_body(body)
        headers = content_headers(method, content, key)
        params = query_params(query)
        attempts = CREATE_ATTEMPTS if key is not None else 1
        for attempt in range(attempts):
            try:
                response = self._http.request(
                    method, path, content=content, headers=headers, params=params,
                    timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )  # fmt: skip
            except httpx.TransportError as exc:
                if attempt + 1 < attempts:
                    time.sleep(retry_pause(attempt))
                    continue
                raise DatabaseError(
                    f"cannot reach the conveyor server at {self.url}: {exc}"
                ) from None
            if attempt + 1 < attempts and should_retry(response):
                time.sleep(retry_pause(attempt, response))
                continue
            return answer(response, method, path)
        raise AssertionError("unreachable")  # pragma: no cover


def idempotency_key(op: str) -> str | None:
    """A fresh key for a call that creates jobs (its retries send the same one)."""
    return uuid.uuid4().hex if op in CREATES else None


def should_retry(response: httpx.Response) -> bool:
    """Whether an answer to a request with an Idempotency-Key says to send it again:
    a gateway's 502, 503 or 504, or the server's 409 for a request with the key still
    in progress."""
    if response.status_code in _RETRY_STATUSES:
        return True
    if response.status_code != 409:
        return False
    try:
        return bool(response.json()["error"]["code"] == _IN_PROGRESS)
    except (ValueError, KeyError, TypeError):
        return False


def retry_pause(attempt: int, response: httpx.Response | None = None) -> float:
    """The pause before sending again: 0.1 to 0.2 s, doubling each time (jittered), or
    the answer's ``Retry-After`` (at most 5 s)."""
    pause: float = random.uniform(0.1, 0.2) * 2.0**attempt
    after = None if response is None else response.headers.get("retry-after")
    if after is not None:
        with contextlib.suppress(ValueError):
            pause = max(pause, float(after))
    return min(pause, _MAX_PAUSE)


def request_for(op: str, a: Mapping[str, Any]) -> Request:
    """The HTTP request that carries out operation ``op`` with checked arguments ``a``,
    as its entry in the endpoint table (``conveyor.endpoints``) says."""
    e = ENDPOINTS.get(op)
    if e is None or e.send is None:
        raise ConfigurationError(f"a remote queue cannot run {op!r}")
    body, query = e.send(a)
    return e.method, e.url(a), body, query


def watch_request(job_id: int, left: float | None) -> tuple[str, str, dict[str, float], float]:
    """The long poll for one step of ``wait``: method, path, query and its length."""
    slice_s = _WAIT_SLICE if left is None else min(left, _WAIT_SLICE)
    method, path, _, query = request_for("wait", {"job_id": job_id, "timeout": round(slice_s, 3)})
    return method, path, dict(query or {}), slice_s


def watch_result(data: Any, left: float | None) -> Job | None:
    """The job if it is final or the wait is over; None: poll again."""
    job: Job = decode("wait", data, 200)
    over = left is not None and left <= _WAIT_SLICE
    return job if job.is_final or over else None


def missing_is_none(op: str) -> bool:
    """Whether operation ``op`` answers a missing job with ``None`` rather than an error."""
    return ENDPOINTS[op].missing_is_none


def decode(op: str, data: Any, status: int) -> Any:
    """The result of operation ``op`` from the server's answer."""
    read = ENDPOINTS[op].read
    assert read is not None  # request_for refused the operations without one
    return read(data, status)


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


def content_headers(
    method: str, content: bytes | None, key: str | None = None
) -> dict[str, str] | None:
    """A body is JSON; and a request that changes something says JSON even without a
    body, which the server asks of every such request (a browser form cannot). The
    caller's trace context (``conveyor.tracing``) goes along in ``traceparent`` and
    ``tracestate``, for the server to store with the jobs it creates; ``key``, as the
    ``Idempotency-Key``."""
    traced = tracing.headers(tracing.CARRIER.get())
    if content is None and method in ("GET", "HEAD"):
        return traced or None
    keyed = {} if key is None else {"Idempotency-Key": key}
    return {"Content-Type": "application/json", **traced, **keyed}


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
    if cls is not None and issubclass(cls, DatabaseError):
        raise cls(message, outcome_unknown=error.get("outcome_unknown") is True)
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


def _query_value(value: Any) -> str | int | float:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    return str(to_json(value))


__all__ = ["RemoteQueue"]
