"""One error shape for every refusal: ``{"error": {"code": ..., "message": ...}}``.

Library errors keep their code (``not_found``, ``stale_claim``, …) so a remote client
can raise the same exception class. Internal causes (database messages, tracebacks)
are logged here and never sent."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from conveyor.errors import (
    ConveyorError,
    DatabaseError,
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    RequestInProgress,
    StaleClaim,
)
from conveyor.web.auth import AuthError

log = logging.getLogger("conveyor.web")

STATUS_OF: dict[type[ConveyorError], int] = {
    JobNotFound: 404,
    StaleClaim: 409,
    InvalidTransition: 409,
    DuplicateJob: 409,
    RequestInProgress: 409,
    InvalidArgument: 422,
    DatabaseError: 503,
}
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}
# What a 503 says, and after how many seconds to try again, by the error's code (the
# database's own message is logged, never sent).
_UNAVAILABLE_ANSWER = ("the database is unavailable; try again later", "1")
_UNAVAILABLE_ANSWERS = {
    "storage_full": ("the database is full; nothing was written; try again later", "5"),
    "storage_read_only": (
        "the database accepts no writes; nothing was written; try again later",
        "5",
    ),
}
# A failure after the database may have made the write durable (a disk failing during a
# commit's fsync): a retry with the same Idempotency-Key finds it if it is there.
_MAYBE_WRITTEN = (
    "this request may have been written (send it again with the same Idempotency-Key to know)"
)
_MAX_LISTED = 5
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# A claim id in a path (``/api/claims/{claim_id}``, ``…/ack``), but not ``reset``.
_CLAIM_IN_PATH = re.compile(r"(/api/claims/)(?!reset(?:[/?]|$))[^/?]+")
MAX_SHOWN_PATH = 200


def shown_path(path: str) -> str:
    """A request path as logs and messages show it: claim ids (secrets of their
    holders) replaced by ``…``, and cut to ``MAX_SHOWN_PATH`` characters."""
    redacted = _CLAIM_IN_PATH.sub(r"\1…", path)
    if len(redacted) <= MAX_SHOWN_PATH:
        return redacted
    return f"{redacted[:MAX_SHOWN_PATH]}… ({len(redacted)} characters)"


def error_response(
    status: int, code: str, message: str, *, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    app.add_exception_handler(ConveyorError, _conveyor_error)  # type: ignore[arg-type]
    app.add_exception_handler(AuthError, _auth_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)


async def _conveyor_error(request: Request, exc: ConveyorError) -> JSONResponse:
    status = next((s for cls, s in STATUS_OF.items() if isinstance(exc, cls)), 500)
    if isinstance(exc, DatabaseError):
        log.warning(
            "database error on %s %s: %s", request.method, shown_path(request.url.path), exc
        )
        message, retry_after = _UNAVAILABLE_ANSWERS.get(exc.code, _UNAVAILABLE_ANSWER)
        if exc.outcome_unknown:
            message = f"{message.replace('; nothing was written', '')}; {_MAYBE_WRITTEN}"
        return error_response(
            503,
            exc.code,
            message,
            headers={"Retry-After": retry_after},
            outcome_unknown=True if exc.outcome_unknown else None,
        )
    if status == 500:
        path = shown_path(request.url.path)
        log.error("unexpected %s on %s %s: %s", type(exc).__name__, request.method, path, exc)
        return error_response(500, "internal_error", "the server failed; see its log")
    job_id = exc.job_id if isinstance(exc, DuplicateJob) else None
    again = {"Retry-After": "1"} if isinstance(exc, RequestInProgress) else None
    return error_response(status, exc.code, exc.message, headers=again, job_id=job_id)


async def _auth_error(request: Request, exc: AuthError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return error_response(exc.status, exc.code, exc.message, headers=headers)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = list(exc.errors())
    malformed = [e for e in errors if e.get("type") == "json_invalid"]
    if malformed:
        reason = str((malformed[0].get("ctx") or {}).get("error", "invalid JSON"))
        reason = reason.removesuffix(" at")  # "Invalid control character at"
        where = malformed[0].get("loc", ())[-1:]
        at = f" at position {where[0]}" if where and isinstance(where[0], int) else ""
        return error_response(400, "malformed_json", f"request body: {reason}{at}")
    parts = [_describe(e) for e in errors[:_MAX_LISTED]]
    if len(errors) > _MAX_LISTED:
        parts.append(f"and {len(errors) - _MAX_LISTED} more")
    return error_response(422, "validation_error", "; ".join(parts) or "invalid request")


def _describe(error: Any) -> str:
    loc = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
    message = str(error.get("msg", "invalid"))
    return f"{loc}: {message}"


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    status = exc.status_code
    code = _HTTP_CODES.get(status, "http_error")
    headers = dict(exc.headers or {})
    if status == 400:  # raised by the framework only when it cannot decode the body
        code = "malformed_json"
        message = "request body: expected UTF-8 JSON (numbers at most 4300 digits long)"
    elif status == 404:
        message = f"no route matches {request.method} {shown_path(request.url.path)}"
    elif status == 405:
        message = f"method {request.method} is not allowed on {shown_path(request.url.path)}"
        headers["Allow"] = ", ".join(_allowed_methods(request))
    else:
        message = str(exc.detail)
    if status >= 500:  # pragma: no cover - routes raise library errors, not 5xx
        path = shown_path(request.url.path)
        log.error("HTTP %s on %s %s: %s", status, request.method, path, exc.detail)
        message = "the server failed; see its log"
    return error_response(status, code, message, headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route accepts on this path (the router's own Allow header
    names only the first route that matched the path)."""
    allowed = []
    for method in _METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    path = shown_path(request.url.path)
    log.exception("unhandled error on %s %s", request.method, path, exc_info=exc)
    return error_response(500, "internal_error", "the server failed; see its log")
