"""Request limits, and the ASGI middleware that enforces the body limits before any
route parses a byte: size (checked while the body streams in), media type (JSON only)
and JSON nesting depth (checked before the JSON parser, whose recursion a hostile body
could exhaust)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.errors import ConfigurationError
from conveyor.validation import MAX_JSON_DEPTH


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may ask of the server.

    - ``max_body_bytes``: request body size; larger bodies get 413.
    - ``max_json_depth``: nesting of the whole request body: the levels a payload may
      use (``conveyor.validation.MAX_JSON_DEPTH``) plus the request's own envelope.
    - ``max_claim``: jobs per claim request.
    - ``min_lease_seconds``/``max_lease_seconds``: bounds of a claim's lease.
    - ``max_wait_seconds``: the longest long poll of ``/api/jobs/{id}/wait``.
    - ``max_list``: jobs per page of ``GET /api/jobs``.
    """

    max_body_bytes: int = 1024 * 1024
    max_json_depth: int = MAX_JSON_DEPTH + 8
    max_claim: int = 1000
    min_lease_seconds: float = 1.0
    max_lease_seconds: float = 24 * 3600.0
    max_wait_seconds: float = 60.0
    max_list: int = 1000

    def __post_init__(self) -> None:
        positive = {
            "max_body_bytes": self.max_body_bytes,
            "max_json_depth": self.max_json_depth,
            "max_claim": self.max_claim,
            "max_lease_seconds": self.max_lease_seconds,
            "max_wait_seconds": self.max_wait_seconds,
            "max_list": self.max_list,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigurationError(f"limits: {name} must be positive, got {value}")
        if not 0 < self.min_lease_seconds <= self.max_lease_seconds:
            raise ConfigurationError(
                "limits: expected 0 < min_lease_seconds <= max_lease_seconds, got "
                f"{self.min_lease_seconds} and {self.max_lease_seconds}"
            )


# A JSON string literal, escapes included (the unrolled form keeps the regex linear).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPENERS = frozenset(b"[{")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_too_deep(body: bytes, max_depth: int) -> bool:
    """Whether ``body`` nests arrays/objects deeper than ``max_depth`` (brackets inside
    strings do not count). Stops at the first level past the limit."""
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return False
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        depth += 1 if byte in _OPENERS else -1
        if depth > max_depth:
            return True
    return False


class BodyLimits:
    """Reads the request body up to ``limits.max_body_bytes`` (refusing it with 413 as
    soon as it grows past that, or at once when Content-Length says so), checks that it
    is JSON (415) no deeper than ``limits.max_json_depth`` (422), then hands the
    buffered body to the app."""

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
            await _refuse(send, 400, "bad_request", "Content-Length: expected a whole number")
            return
        if declared is not None and declared > max_bytes:
            drained = declared <= max_bytes * _DISCARD_FACTOR and await _discard(
                receive, 0, max_bytes * _DISCARD_FACTOR
            )
            await _refuse(send, 413, "payload_too_large", _too_large(max_bytes), drained)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                drained = not message.get("more_body", False) or await _discard(
                    receive, size, max_bytes * _DISCARD_FACTOR
                )
                await _refuse(send, 413, "payload_too_large", _too_large(max_bytes), drained)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and not _is_json(scope):
            message_text = "request body: expected Content-Type: application/json"
            await _refuse(send, 415, "unsupported_media_type", message_text)
            return
        if json_too_deep(body, self.limits.max_json_depth):
            message_text = (
                f"request body: expected JSON nested at most {self.limits.max_json_depth} deep"
            )
            await _refuse(send, 422, "json_too_deep", message_text)
            return
        await self.app(scope, _replay(body, receive), send)


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


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return str(value.decode("latin-1")).strip()
    return None


def _content_length(scope: Scope) -> int | None:
    """The declared length, None when absent, -1 when it is not a number."""
    text = _header(scope, b"content-length")
    if text is None:
        return None
    return int(text) if text.isdigit() and len(text) < 20 else -1


def _is_json(scope: Scope) -> bool:
    media_type = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _too_large(max_bytes: int) -> str:
    return f"request body: expected at most {max_bytes} bytes"


async def _refuse(send: Send, status: int, code: str, message: str, drained: bool = True) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if not drained:
        headers.append((b"connection", b"close"))  # the rest of the body is never read
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
