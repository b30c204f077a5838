"""Request limits, and the ASGI middleware that enforces the body limits before any
route parses a byte: size (checked while the body streams in), time (a body must
arrive within a bound, however slowly it trickles), media type (JSON only) and JSON
nesting depth (checked before the JSON parser, whose recursion a hostile body could
exhaust; in a worker thread, so a large body never holds up the event loop)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.errors import ConfigurationError, InvalidArgument
from conveyor.ops.idempotency import DEFAULT_KEEP_SECONDS, MAX_KEEP_SECONDS
from conveyor.validation import MAX_JSON_DEPTH
from conveyor.web.depth import json_too_deep

__all__ = ["BodyLimits", "Limits", "check_links", "json_too_deep"]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may ask of the server.

    - ``max_body_bytes``: request body size; larger bodies get 413.
    - ``body_timeout_seconds``: the whole body must arrive within this time after the
      request's head; a slower (or stalled) upload gets 408 and the connection closes.
    - ``max_json_depth``: nesting of the whole request body: the levels a payload may
      use (``conveyor.validation.MAX_JSON_DEPTH``) plus the request's own envelope.
    - ``max_claim``: jobs per claim request.
    - ``min_lease_seconds``/``max_lease_seconds``: bounds of every lease a request asks
      for: a claim's, a heartbeat's extension, a notification batch's.
    - ``max_wait_seconds``: the longest long poll of ``/api/jobs/{id}/wait``.
    - ``max_waits``: long polls waiting at once; past it, 503 with ``Retry-After``.
    - ``max_list``: jobs per page of ``GET /api/jobs``.
    - ``max_response_bytes``: the jobs one answer carries: lists and claims stop adding
      jobs once they reach it (the first job always goes in) and say so.
    - ``max_dependency_links``: ``after`` ids in one request, all jobs of a batch
      together (each is a row the database writes and checks in one transaction).
    - ``max_worker_queues``/``max_worker_entry_bytes``: what one worker registry entry
      may hold: queues named, and the size of all its fields together.
    - ``max_workers_page``: registry entries per page of ``GET /api/workers``.
    - ``max_subscribers``: subscribers one job takes over HTTP, and lists at most.
    - ``max_metric_queues``: queues ``/metrics`` labels one by one; the others are
      summed under ``queue="_other"``.
    - ``max_slot_lead_seconds``: how far past the database's now a schedule's slot may
      be run; ``schedule_horizon_seconds``: how far from it any other slot (a run slot's
      past, a ``next_slot``, a ``first_slot``) may lie.
    - ``min_rate_period_seconds``/``max_rate_per_second``: bounds of a queue's rate
      limits (``per`` at least the one, ``limit / per`` at most the other).
    - ``idempotency_keep_seconds``: how long the answer to a create request with an
      ``Idempotency-Key`` is kept for replays (at most 30 days); once it expired, the
      key may be used again.
    """

    max_body_bytes: int = 1024 * 1024
    body_timeout_seconds: float = 15.0
    max_json_depth: int = MAX_JSON_DEPTH + 8
    max_claim: int = 1000
    min_lease_seconds: float = 1.0
    max_lease_seconds: float = 24 * 3600.0
    max_wait_seconds: float = 60.0
    max_waits: int = 100
    max_list: int = 1000
    max_response_bytes: int = 4 * 1024 * 1024
    max_dependency_links: int = 10_000
    max_worker_queues: int = 100
    max_worker_entry_bytes: int = 16 * 1024
    max_workers_page: int = 1000
    max_subscribers: int = 1000
    max_metric_queues: int = 100
    max_slot_lead_seconds: float = 3600.0
    schedule_horizon_seconds: float = 400 * 86400.0
    min_rate_period_seconds: float = 0.001
    max_rate_per_second: float = 1_000_000.0
    idempotency_keep_seconds: float = DEFAULT_KEEP_SECONDS

    def __post_init__(self) -> None:
        positive = {
            "max_body_bytes": self.max_body_bytes,
            "body_timeout_seconds": self.body_timeout_seconds,
            "max_json_depth": self.max_json_depth,
            "max_claim": self.max_claim,
            "max_lease_seconds": self.max_lease_seconds,
            "max_wait_seconds": self.max_wait_seconds,
            "max_waits": self.max_waits,
            "max_list": self.max_list,
            "max_response_bytes": self.max_response_bytes,
            "max_dependency_links": self.max_dependency_links,
            "max_worker_queues": self.max_worker_queues,
            "max_worker_entry_bytes": self.max_worker_entry_bytes,
            "max_workers_page": self.max_workers_page,
            "max_subscribers": self.max_subscribers,
            "max_metric_queues": self.max_metric_queues,
            "max_slot_lead_seconds": self.max_slot_lead_seconds,
            "schedule_horizon_seconds": self.schedule_horizon_seconds,
            "min_rate_period_seconds": self.min_rate_period_seconds,
            "max_rate_per_second": self.max_rate_per_second,
            "idempotency_keep_seconds": self.idempotency_keep_seconds,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigurationError(f"limits: {name} must be positive, got {value}")
        if self.idempotency_keep_seconds > MAX_KEEP_SECONDS:
            raise ConfigurationError(
                f"limits: idempotency_keep_seconds must be at most {MAX_KEEP_SECONDS:g} "
                f"(30 days), got {self.idempotency_keep_seconds}"
            )
        if not 0 < self.min_lease_seconds <= self.max_lease_seconds:
            raise ConfigurationError(
                "limits: expected 0 < min_lease_seconds <= max_lease_seconds, got "
                f"{self.min_lease_seconds} and {self.max_lease_seconds}"
            )


def check_links(count: int, limits: Limits) -> None:
    """A request's dependency links (``after`` ids, all its jobs together) within
    ``limits.max_dependency_links``."""
    if count > limits.max_dependency_links:
        raise InvalidArgument(
            f"after: expected at most {limits.max_dependency_links} dependency links in one "
            f"request (all its jobs together), got {count}"
        )


class BodyLimits:
    """Reads the request body up to ``limits.max_body_bytes`` (refusing it with 413 as
    soon as it grows past that, or at once when Content-Length says so) within
    ``limits.body_timeout_seconds`` (408), checks that it is JSON (415) no deeper than
    ``limits.max_json_depth`` (422), then hands the buffered body to the app."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.limits.max_body_bytes
        declared = _content_length(scope)
        if declared == -1:
            await refuse(send, 400, "bad_request", "Content-Length: expected a whole number")
            return
        if declared is not None and declared > max_bytes:
            drained = False
            if declared <= max_bytes * _DISCARD_FACTOR:
                with anyio.move_on_after(self.limits.body_timeout_seconds):
                    drained = await _discard(receive, 0, max_bytes * _DISCARD_FACTOR)
            await refuse(send, 413, "payload_too_large", _too_large(max_bytes), drained)
            return
        outcome: _Read | None = None
        with anyio.move_on_after(self.limits.body_timeout_seconds):
            outcome = await self._read(receive, max_bytes)
        if outcome is None:
            seconds = f"{self.limits.body_timeout_seconds:g}"
            text = f"request body: expected all of it within {seconds} seconds"
            await refuse(send, 408, "request_timeout", text, drained=False)
            return
        if outcome.gone:
            return
        if outcome.too_large:
            await refuse(send, 413, "payload_too_large", _too_large(max_bytes), outcome.drained)
            return
        body = outcome.body
        if body and not is_json(scope):
            message_text = "request body: expected Content-Type: application/json"
            await refuse(send, 415, "unsupported_media_type", message_text)
            return
        depth = self.limits.max_json_depth
        if body and await _too_deep(body, depth):
            message_text = f"request body: expected JSON nested at most {depth} deep"
            await refuse(send, 422, "json_too_deep", message_text)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive, max_bytes: int) -> _Read:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return _Read(gone=True)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                drained = not message.get("more_body", False) or await _discard(
                    receive, size, max_bytes * _DISCARD_FACTOR
                )
                return _Read(too_large=True, drained=drained)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return _Read(body=b"".join(chunks))


async def _too_deep(body: bytes, depth: int) -> bool:
    if len(body) <= _INLINE_BYTES:
        return json_too_deep(body, depth)
    return await anyio.to_thread.run_sync(json_too_deep, body, depth)


# Bodies up to this size are scanned on the event loop (a fraction of a millisecond);
# larger ones in a worker thread.
_INLINE_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class _Read:
    body: bytes = b""
    gone: bool = False
    too_large: bool = False
    drained: bool = True


# A body up to this many times the limit is read to its end and thrown away before the
# 413 goes out: a client still sending would otherwise see the connection reset instead
# of the answer. Past it, the server answers at once and closes the connection.
_DISCARD_FACTOR = 16


async def _discard(receive: Receive, size: int, cap: int) -> bool:
    """Read and drop the rest of the body; False when it passes ``cap`` bytes (or the
    client goes away) before it ends."""
    while size <= cap:
        message = await receive()
        if message["type"] == "http.disconnect":
            return False
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return size <= cap
    return False


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()  # later calls wait for the client to disconnect
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def header(scope: Scope, wanted: bytes) -> str | None:
    """The first value of a request header (names are lower case in ASGI)."""
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return str(value.decode("latin-1")).strip()
    return None


def _content_length(scope: Scope) -> int | None:
    """The declared length, None when absent, -1 when it is not a number."""
    text = header(scope, b"content-length")
    if text is None:
        return None
    return int(text) if text.isdigit() and len(text) < 20 else -1


def is_json(scope: Scope) -> bool:
    media_type = (header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _too_large(max_bytes: int) -> str:
    return f"request body: expected at most {max_bytes} bytes"


async def refuse(
    send: Send,
    status: int,
    code: str,
    message: str,
    drained: bool = True,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer with the error envelope from a middleware, before any route ran.
    ``drained=False``: the rest of the request was never read, so the connection
    closes after the answer."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    if not drained:
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
