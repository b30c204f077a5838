"""Serving the app with uvicorn (``conveyor serve``), with bounds on what a connection
may hold: how long a request's head may take, how long a client may stall reading an
answer, how many connections and requests run at once (with room kept for
``/healthz``), how long a graceful stop may wait. A request's body has its own bound,
in the app (``Limits.body_timeout_seconds``).

Past the connection cap a request is answered here, before the app sees it: 503 with
the error envelope, ``Retry-After`` and the security headers, and the connection
closes. Clients' addresses are the connections' peers: ``X-Forwarded-For`` counts only
from the proxies named in ``trusted_proxies``.

Access log lines show paths as ``envelope.shown_path`` does: claim ids hidden, long
paths cut."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from conveyor.errors import ConfigurationError
from conveyor.web.envelope import shown_path
from conveyor.web.guard import SECURITY_HEADERS
from conveyor.web.limits import refuse


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What one ``conveyor serve`` process allows its connections.

    - ``header_timeout``: seconds from a connection's start (or its previous answer)
      to the end of the next request's head; a client that trickles headers, or sends
      none, is disconnected then.
    - ``keep_alive``: seconds an idle connection stays open between requests.
    - ``write_timeout``: seconds a client may leave an answer unread (the server's send
      buffer full) before it is disconnected.
    - ``max_connections``: connections and requests at once; past it, new requests are
      answered 503 ``overloaded`` (with ``Retry-After``).
    - ``health_reserve``: connections past ``max_connections`` that only ``/healthz``
      may use, so that a load balancer still hears from a server that is full.
    - ``shutdown_grace``: seconds a stop waits for requests under way (long polls).
    - ``trusted_proxies``: addresses (or networks, ``10.0.0.0/8``) whose
      ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed; ``None``: nobody's,
      and a client is the connection's peer (the token back-off counts per client).
    """

    header_timeout: float = 5.0
    keep_alive: int = 5
    write_timeout: float = 30.0
    max_connections: int = 1000
    health_reserve: int = 50
    shutdown_grace: int = 10
    trusted_proxies: str | None = None

    def __post_init__(self) -> None:
        for name in ("header_timeout", "keep_alive", "write_timeout", "max_connections"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name}: expected a positive number")
        if self.shutdown_grace < 0:
            raise ConfigurationError("shutdown_grace: expected 0 or more seconds")
        if self.health_reserve < 0:
            raise ConfigurationError("health_reserve: expected 0 or more connections")
        if self.trusted_proxies is not None:
            for entry in self.trusted_proxies.split(","):
                try:
                    ipaddress.ip_network(entry.strip(), strict=False)
                except ValueError:
                    raise ConfigurationError(
                        f"trusted proxies: expected addresses or networks, got {entry.strip()!r}"
                    ) from None


class _BoundedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a deadline for each request's head and for
    answers the client does not read. (Set ``header_timeout``/``write_timeout`` in a
    subclass: uvicorn builds protocols itself.)"""

    header_timeout = 5.0
    write_timeout = 30.0
    max_connections = 1000
    health_reserve = 50

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit_concurrency = None  # uvicorn's plain-text 503: answered by _Overload instead
        self.app = _Overload(self.app, self)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self._head_timer is not None and self.cycle is not self._waiting_for:
            self._head_timer.cancel()  # a request's head arrived in time
            self._head_timer = None

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request at once
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self._await_head()

    def _await_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._waiting_for = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout, self._too_slow)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def timeout_keep_alive_handler(self) -> None:
        if self.transport.get_write_buffer_size():
            self.transport.abort()  # close() would wait for a client that does not read
            return
        super().timeout_keep_alive_handler()

    def _too_slow(self) -> None:
        self.transport.abort()


class _Overload:
    """In front of the app: past ``max_connections`` connections (or requests under
    way), a request gets 503 ``overloaded``, but for ``/healthz`` while the total stays
    within ``max_connections + health_reserve``."""

    def __init__(self, app: Any, protocol: _BoundedH11) -> None:
        self.app = app
        self.protocol = protocol

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        protocol = self.protocol
        busy = max(len(protocol.connections), len(protocol.tasks))
        if scope["type"] != "http" or busy <= protocol.max_connections:
            await self.app(scope, receive, send)
            return
        root = str(scope.get("root_path", ""))
        path = str(scope.get("path", ""))[len(root) :]
        if path == "/healthz" and busy <= protocol.max_connections + protocol.health_reserve:
            await self.app(scope, receive, send)
            return
        message = "the server has as many connections as it takes; try again shortly"
        await refuse(send, 503, "overloaded", message, drained=False,
                     headers={"Retry-After": "1", **SECURITY_HEADERS})  # fmt: skip


def protocol(limits: ServerLimits) -> type[H11Protocol]:
    return type(
        "BoundedH11",
        (_BoundedH11,),
        {
            "header_timeout": limits.header_timeout,
            "write_timeout": limits.write_timeout,
            "max_connections": limits.max_connections,
            "health_reserve": limits.health_reserve,
        },
    )


class _ShownPaths(logging.Filter):
    """Access log lines with paths as ``shown_path`` shows them."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], shown_path(args[2]), args[3], args[4])
        return True


def config(
    app: Any, *, host: str, port: int, log_level: str, limits: ServerLimits | None = None
) -> uvicorn.Config:
    """The uvicorn configuration ``conveyor serve`` runs ``app`` with."""
    bounds = limits or ServerLimits()
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _ShownPaths) for f in access.filters):
        access.addFilter(_ShownPaths())
    trusted = bounds.trusted_proxies
    return uvicorn.Config(
        app,
        host=bind_host(host),
        port=port,
        log_level=log_level,
        http=protocol(bounds),
        timeout_keep_alive=bounds.keep_alive,
        timeout_graceful_shutdown=bounds.shutdown_grace,
        server_header=False,
        # uvicorn believes X-Forwarded-For from loopback by default: only when told here.
        proxy_headers=trusted is not None,
        forwarded_allow_ips=[e.strip() for e in trusted.split(",")] if trusted else [],
    )


def bind_host(host: str) -> str:
    """The address to bind: an IPv6 address may come in brackets, as in a URL."""
    if host.startswith("[") and host.endswith("]"):
        return host[1:-1]
    return host


def url_host(host: str) -> str:
    """The host as a URL writes it: IPv6 addresses in brackets."""
    bare = bind_host(host)
    return f"[{bare}]" if ":" in bare else bare
