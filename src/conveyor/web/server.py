"""Serving the app with uvicorn (``conveyor serve``), with bounds on what a connection
may hold: how long a request's head may take, how long a client may stall reading an
answer, how many connections and requests run at once, how long a graceful stop may
wait. A request's body has its own bound, in the app (``Limits.body_timeout_seconds``).

Access log lines show paths as ``envelope.shown_path`` does: claim ids hidden, long
paths cut."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from conveyor.errors import ConfigurationError
from conveyor.web.envelope import shown_path


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
      answered 503 (uvicorn's ``limit_concurrency``).
    - ``shutdown_grace``: seconds a stop waits for requests under way (long polls).
    """

    header_timeout: float = 10.0
    keep_alive: int = 5
    write_timeout: float = 30.0
    max_connections: int = 1000
    shutdown_grace: int = 10

    def __post_init__(self) -> None:
        for name in ("header_timeout", "keep_alive", "write_timeout", "max_connections"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name}: expected a positive number")
        if self.shutdown_grace < 0:
            raise ConfigurationError("shutdown_grace: expected 0 or more seconds")


class _BoundedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a deadline for each request's head and for
    answers the client does not read. (Set ``header_timeout``/``write_timeout`` in a
    subclass: uvicorn builds protocols itself.)"""

    header_timeout = 10.0
    write_timeout = 30.0

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


def protocol(limits: ServerLimits) -> type[H11Protocol]:
    return type(
        "BoundedH11",
        (_BoundedH11,),
        {"header_timeout": limits.header_timeout, "write_timeout": limits.write_timeout},
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
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol(bounds),
        timeout_keep_alive=bounds.keep_alive,
        limit_concurrency=bounds.max_connections,
        timeout_graceful_shutdown=bounds.shutdown_grace,
        server_header=False,
    )
