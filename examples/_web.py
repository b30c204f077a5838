"""What the examples' web services share: one error shape, their workers in the same
process, and ``serve`` (uvicorn on loopback, or behind a bearer token)."""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import conveyor
from examples._db import is_conflict

log = logging.getLogger("examples")

_STATUS_OF: dict[type[conveyor.ConveyorError], int] = {
    conveyor.JobNotFound: 404,
    conveyor.DuplicateJob: 409,
    conveyor.InvalidTransition: 409,
    conveyor.StaleClaim: 409,
    conveyor.InvalidArgument: 422,
    conveyor.DatabaseError: 503,
}
_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
}


# How an application answers a refusal: ``{"error": {"code", "message"}}``, or
# ``{"detail": "message"}`` where it re-creates a FastAPI service whose clients read that.
ErrorStyle = Literal["error", "detail"]


def _no_nul(value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        raise ValueError("the NUL character is not allowed")
    return value


# A text field of the application's own: PostgreSQL cannot store NUL in text, so it is
# refused as invalid input (422) before anything reaches the database.
NoNul = AfterValidator(_no_nul)


class ApiError(Exception):
    """A refusal with its HTTP status: ``{"error": {"code", "message"}}``."""

    def __init__(self, status: int, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message


def error(status: int, code: str, message: str, style: ErrorStyle = "error") -> JSONResponse:
    if style == "detail":
        return JSONResponse({"detail": message}, status_code=status)
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def install_errors(api: FastAPI, style: ErrorStyle = "error") -> None:
    """Every refusal as ``{"error": {"code", "message"}}`` (or ``{"detail": message}``);
    never a traceback."""

    def answer(status: int, code: str, message: str) -> JSONResponse:
        return error(status, code, message, style)

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return answer(exc.status, exc.code, exc.message)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        message = str(exc.detail)
        if status == 404 and message == "Not Found":
            message = f"no route matches {request.method} {request.url.path}"
        return answer(status, _CODES.get(status, "http_error"), message)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = list(exc.errors())
        if any(p.get("type") == "json_invalid" for p in problems):
            return answer(400, "malformed_json", "request body: expected a JSON object")
        parts = []
        for problem in problems[:5]:
            where = ".".join(str(p) for p in problem.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {problem.get('msg', 'invalid')}")
        return answer(422, "validation_error", "; ".join(parts) or "invalid request")

    async def conveyor_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, conveyor.ConveyorError)
        status = next((s for cls, s in _STATUS_OF.items() if isinstance(exc, cls)), 500)
        if status >= 500:
            return unavailable(request, exc)
        return answer(status, exc.code, exc.message)

    def unavailable(request: Request, exc: Exception) -> JSONResponse:
        # A transaction lost every try (nothing written) or the database is unavailable:
        # the client may send the request again shortly.
        log.warning("%s on %s %s: %s", type(exc).__name__, request.method, request.url, exc)
        refused = answer(503, "unavailable", "the database is unavailable; try again later")
        refused.headers["Retry-After"] = "1"
        return refused

    async def driver_error(request: Request, exc: Exception) -> JSONResponse:
        if is_conflict(exc):  # the application's own statement lost a deadlock, every try
            return unavailable(request, exc)
        return await internal(request, exc)

    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return answer(500, "internal_error", "the server failed; see its log")

    api.add_exception_handler(ApiError, api_error)
    api.add_exception_handler(HTTPException, http_error)
    api.add_exception_handler(RequestValidationError, invalid)
    api.add_exception_handler(conveyor.ConveyorError, conveyor_error)
    for driver_errors in _operational_errors():
        api.add_exception_handler(driver_errors, driver_error)
    api.add_exception_handler(Exception, internal)


def _operational_errors() -> list[type[Exception]]:
    """The database drivers' class of a deadlock broken or a lock wait given up, for
    the drivers installed."""
    found: list[type[Exception]] = []
    try:
        import pymysql
    except ImportError:
        pass
    else:
        found.append(pymysql.err.OperationalError)
    try:
        import psycopg
    except ImportError:
        pass
    else:
        found.append(psycopg.errors.OperationalError)
    return found


class BodyLimit:
    """Refuse a request body over ``limit`` bytes (413), counted as it arrives: a
    declared length over it is refused before reading, a chunked body once it passes it."""

    def __init__(self, app: ASGIApp, limit: int, style: ErrorStyle = "error") -> None:
        self.app = app
        self.limit = limit
        self.style = style

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = f"request body: expected at most {self.limit} bytes"
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.limit:
            answer = error(413, "payload_too_large", message, self.style)
            await answer(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            received = await receive()
            seen += len(received.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, message)
            return received

        await self.app(scope, counted, send)


class Workers:
    """The application's conveyor workers, on a thread of the web server's process.
    ``concurrency`` 0: none (another process works the queue)."""

    def __init__(self, app: conveyor.App, *, concurrency: int, **options: Any) -> None:
        self.app = app
        self.concurrency = concurrency
        self.options = options
        self._worker: conveyor.Worker | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.concurrency <= 0:
            return
        self._worker = self.app.worker(
            concurrency=self.concurrency, install_signals=False, **self.options
        )
        self._thread = threading.Thread(target=self._worker.run, name="workers", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        if self._worker is not None and self._thread is not None:
            self._worker.stop()
            self._thread.join(timeout)


def add_demo_command(
    parser: argparse.ArgumentParser, commands: Any
) -> list[argparse.ArgumentParser]:
    """``demo`` (also what no command runs): both take ``--db`` and ``--json``. Returns
    the two parsers, for an example's own demo options."""
    demo = commands.add_parser("demo", help="the scripted demo (the default)")
    for p in (parser, demo):
        p.add_argument("--db", help="database URL (default: a temporary SQLite file)")
        p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    return [parser, demo]


def add_serve_options(parser: argparse.ArgumentParser, name: str, *, workers: int = 2) -> None:
    parser.add_argument(
        "--db", default=f"sqlite:///{name}.db", help=f"database URL (default sqlite:///{name}.db)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    parser.add_argument(
        "--workers",
        type=int,
        default=workers,
        help=f"tasks run at once in this process (default {workers}; 0: none)",
    )
    parser.add_argument(
        "--token", help="require 'Authorization: Bearer TOKEN' (needed off loopback)"
    )


def serve(api: ASGIApp, args: argparse.Namespace, style: ErrorStyle = "error") -> int:
    """Serve ``api`` with uvicorn until SIGINT/SIGTERM (its lifespan stops the workers)."""
    import uvicorn

    if not args.token and not _loopback(args.host):
        print(
            f"error: refusing to listen on {args.host} without --token: anyone who can reach "
            "it could use every endpoint",
            flush=True,
        )
        return 2
    if args.workers < 0:
        print("error: --workers: expected 0 or more", flush=True)
        return 2
    app: ASGIApp = BearerToken(api, args.token, style) if args.token else api
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BearerToken:
    """Refuse every request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str, style: ErrorStyle = "error") -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.style = style

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers", [])).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = error(
                    401, "unauthorized", "send Authorization: Bearer <token>", self.style
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


@contextmanager
def background_server(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` on a free loopback port from a thread (the demos); yields its URL.
    Leaving the block shuts it down, lifespan included."""
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="server", daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
