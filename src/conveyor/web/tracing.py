"""``TraceContext``: the ``traceparent`` and ``tracestate`` headers of a request become the
trace context (``conveyor.tracing.CARRIER``) of the jobs the request creates."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from conveyor import tracing


class TraceContext:
    """Sets ``CARRIER`` from the request's headers for the length of the request (a
    malformed ``traceparent`` is ignored)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        parent = state = None
        for name, value in scope["headers"]:
            if name == b"traceparent":
                parent = value.decode("latin-1")
            elif name == b"tracestate":
                state = value.decode("latin-1")
        stored = tracing.carrier(parent, state)
        if stored is None:
            await self.app(scope, receive, send)
            return
        token = tracing.CARRIER.set(stored)
        try:
            await self.app(scope, receive, send)
        finally:
            tracing.CARRIER.reset(token)
