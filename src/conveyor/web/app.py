"""``create_app``: the HTTP service as an ASGI app, to serve alone (``conveyor serve``)
or to mount inside an application of your own."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI

import conveyor
from conveyor.errors import ConfigurationError
from conveyor.queue import Queue
from conveyor.web import envelope
from conveyor.web.auth import ENV_TOKENS, ENV_TOKENS_FILE, Role, Tokens, tokens_from_env
from conveyor.web.limits import BodyLimits, Limits
from conveyor.web.metrics import Metrics
from conveyor.web.routes import admin, flow, jobs, ops, runtime, work
from conveyor.web.state import ServerState

DESCRIPTION = """The conveyor job queue over HTTP: the same contract as the Python API.

Send `Authorization: Bearer <token>`; a token grants the `reader` (read), `worker`
(also enqueue, claim and report) or `admin` (everything) role. Errors are
`{"error": {"code": ..., "message": ...}}`."""


def create_app(
    queue_or_url: Queue | str | None = None,
    *,
    tokens: Mapping[str, Role | str] | None = None,
    limits: Limits | None = None,
) -> FastAPI:
    """The API, the dashboard, ``/metrics`` and ``/healthz`` over one queue.

    ``queue_or_url``: a ``Queue`` (left open when the app stops) or a database URL
    (default: ``$CONVEYOR_DATABASE_URL``, else ``sqlite:///conveyor.db``), opened now and
    closed with the app. ``tokens``: ``{token: role}``; by default read from
    ``$CONVEYOR_TOKENS`` / ``$CONVEYOR_TOKENS_FILE``; an empty mapping turns auth off
    (every caller is an admin: bind such a server to loopback only)."""
    known = Tokens(tokens_from_env() if tokens is None else tokens)
    owned = not isinstance(queue_or_url, Queue)
    queue = queue_or_url if isinstance(queue_or_url, Queue) else conveyor.connect(queue_or_url)
    state = ServerState(
        queue=queue, tokens=known, limits=limits or Limits(), metrics=Metrics(queue)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if owned:
            queue.close()

    app = FastAPI(
        title="conveyor",
        version=conveyor.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.conveyor = state
    envelope.install(app)
    for module in (jobs, work, runtime, admin, flow, ops):
        app.include_router(module.router)
    app.add_middleware(BodyLimits, limits=state.limits)
    return app


def check_bind_address(host: str, tokens: Mapping[str, Role | str]) -> None:
    """Refuse to serve without tokens on anything but loopback: every caller would be an
    admin. Host names other than ``localhost`` count as not loopback (they may resolve to
    any address)."""
    if tokens or is_loopback(host):
        return
    raise ConfigurationError(
        f"refusing to listen on {host} without tokens: anyone who can reach it would be an "
        f"admin; set {ENV_TOKENS} or {ENV_TOKENS_FILE}, or listen on 127.0.0.1"
    )


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
