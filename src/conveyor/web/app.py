"""``create_app``: the HTTP service as an ASGI app, to serve alone (``conveyor serve``)
or to mount inside an application of your own."""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp

import conveyor
from conveyor.errors import ConfigurationError
from conveyor.maintenance import IdempotencyPruner, Rescuer, Service
from conveyor.queue import Queue
from conveyor.web import console, docs, envelope
from conveyor.web.auth import ENV_TOKENS, ENV_TOKENS_FILE, Role, Tokens, tokens_from_env
from conveyor.web.guard import Guard, HeadAsGet, SecurityHeaders
from conveyor.web.limits import BodyLimits, Limits
from conveyor.web.metrics import Metrics
from conveyor.web.routes import admin, bulk, flow, jobs, ops, runtime, whoami, work, workflows
from conveyor.web.state import ServerState
from conveyor.web.tracing import TraceContext

log = logging.getLogger("conveyor.web")
ROUTES = (jobs, work, runtime, admin, bulk, flow, ops, whoami, workflows)

DESCRIPTION = """The conveyor job queue over HTTP: the same contract as the Python API.

Send `Authorization: Bearer <token>`; a token grants the `reader` (read), `worker`
(also enqueue, claim and report) or `admin` (everything) role. Errors are
`{"error": {"code": ..., "message": ...}}`. A request that changes something carries
`Content-Type: application/json` (even without a body) or an `Authorization` header."""


class _App(FastAPI):
    """FastAPI, with the security headers outside everything else, so that even the
    answers of its own error handling carry them; a HEAD request is answered as its GET
    would be, without the body."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(HeadAsGet(super().build_middleware_stack()))


def create_app(
    queue_or_url: Queue | str | None = None,
    *,
    tokens: Mapping[str, Role | str] | None = None,
    limits: Limits | None = None,
    rescue_interval: float | None = None,
    prune_interval: float | None = None,
    use_env: bool = True,
) -> FastAPI:
    """The API, the console (the dashboard), ``/metrics``, ``/healthz`` and ``/docs`` over one
    queue.

    ``queue_or_url``: a ``Queue`` (left open when the app stops) or a database URL,
    opened now and closed with the app; ``$CONVEYOR_DATABASE_URL`` beats the URL unless
    ``use_env=False`` (the order of ``conveyor.connect``). ``tokens``: ``{token: role}``;
    by default read from ``$CONVEYOR_TOKENS`` / ``$CONVEYOR_TOKENS_FILE``; an empty
    mapping turns auth off (every caller is an admin, and only loopback ``Host`` names
    are answered: bind such a server to loopback only). ``rescue_interval``: every so
    many seconds while the app runs, jobs whose lease expired go back to pending
    (``conveyor serve`` does this; an app of your own may leave it to its workers).
    ``prune_interval``: every so many seconds, the answers kept for ``Idempotency-Key``
    requests whose retention (``Limits.idempotency_keep_seconds``) is over are deleted
    (``conveyor serve``: every minute; an app of your own may run
    ``conveyor.maintenance.IdempotencyPruner`` itself).

    Mounting (``outer.mount("/queue", create_app(queue))``, or serving behind a proxy
    with ``--root-path``) works under any path: routes match below the mount point, the
    API docs find their schema there, and the dashboard (served at ``<path>/``; a
    request for ``<path>`` is redirected there) reaches the API with relative URLs.
    A mounted app gets no lifespan of its own: give it an open ``Queue`` and close that
    from the outer app's lifespan."""
    known = Tokens(tokens_from_env() if tokens is None else tokens)
    if rescue_interval is not None and not rescue_interval > 0:
        raise ConfigurationError(f"rescue_interval: expected seconds > 0, got {rescue_interval}")
    if prune_interval is not None and not prune_interval > 0:
        raise ConfigurationError(f"prune_interval: expected seconds > 0, got {prune_interval}")
    owned = not isinstance(queue_or_url, Queue)
    queue = (
        queue_or_url
        if isinstance(queue_or_url, Queue)
        else conveyor.connect(queue_or_url, use_env=use_env)
    )
    bounds = limits or Limits()
    state = ServerState(
        queue=queue,
        tokens=known,
        limits=bounds,
        metrics=Metrics(queue, max_queues=bounds.max_metric_queues),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        rescuer = None if rescue_interval is None else _rescuing(queue, rescue_interval)
        pruner = None if prune_interval is None else _pruning(queue, prune_interval)
        try:
            yield
        finally:
            if rescuer is not None:
                rescuer.stop()
            if pruner is not None:
                pruner.stop()
            if owned:
                queue.close()

    app = _App(
        title="conveyor",
        version=conveyor.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        redirect_slashes=False,  # the guard redirects, to a relative URL
    )
    app.state.conveyor = state
    envelope.install(app)
    for module in ROUTES:
        app.include_router(module.router)
    docs.install(app)
    console.install(app)
    # Added last runs first: the guard sees the request's head before the body is read.
    app.add_middleware(BodyLimits, limits=state.limits)
    app.add_middleware(TraceContext)
    roles = [role for module in ROUTES for role in module.router.roles]
    app.add_middleware(
        Guard,
        tokens=lambda: app.state.conveyor.tokens,
        roles=roles,
        backoff=state.backoff,
        routes=lambda: app.router.routes,
    )
    return app


class _Periodic:
    """Runs a maintenance service's ``run_once`` every ``interval`` seconds in a thread
    of its own, from now until ``stop``. A failed pass is logged and retried at the
    next one."""

    def __init__(self, service: Service, interval: float) -> None:
        self._service = service
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"conveyor-{service.name}", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self._service.run_once()
            except Exception as exc:  # a database restart must not end the passes
                log.warning(
                    "%s pass failed: %s; trying again in %gs",
                    self._service.name, exc, self._interval,
                )  # fmt: skip
            self._stopped.wait(self._interval)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=10)


def _rescuing(queue: Queue, interval: float) -> _Periodic:
    """The rescuer (``conveyor.maintenance.Rescuer``): expired leases back to pending."""
    return _Periodic(Rescuer(queue), interval)


def _pruning(queue: Queue, interval: float) -> _Periodic:
    """Expired idempotency records deleted (``conveyor.maintenance.IdempotencyPruner``)."""
    return _Periodic(IdempotencyPruner(queue), interval)


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
