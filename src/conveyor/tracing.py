"""Where distributed tracing plugs into conveyor, at no cost until something plugs in.

A job carries the W3C trace context (``traceparent``, ``tracestate``) of the code that
enqueued it, as JSON text in its ``trace_context`` column. Enqueue reads it from
``CARRIER``, a context variable that is empty unless something set it:

- ``conveyor.integrations.opentelemetry.ConveyorInstrumentor`` installs ``Hooks`` that
  wrap each enqueue (of jobs, of a workflow's steps, of a schedule's slot) in a
  producer span and set ``CARRIER`` to that span's context, and each run of a task in
  a consumer span parented on the job's context;
- ``conveyor serve`` sets it, for the length of a request, from the request's
  ``traceparent`` and ``tracestate`` headers, which ``RemoteQueue`` sends whenever it
  is set in the caller.

Without hooks (``hooks is None``) enqueue and the worker do nothing more than read one
context variable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from conveyor.job import Job

CARRIER: ContextVar[str | None] = ContextVar("conveyor_trace_context", default=None)
"""The trace context new jobs are stored with (JSON text), or None."""

SendKind = Literal["send", "publish"]

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
_MAX_TRACESTATE = 512


class Sending(Protocol):
    """A producer span, open while jobs are inserted."""

    def sent(self, ids: Sequence[int]) -> None:
        """The jobs were stored under these ids."""


class SendingWorkflow(Protocol):
    """A producer span, open while a workflow's steps are inserted."""

    def sent(self, workflow_id: int) -> None:
        """The run was stored under this id."""


class Processing(Protocol):
    """A consumer span, open while one attempt of a job runs."""

    def ended(self, status: str, error: BaseException | None = None) -> None:
        """How the attempt ended: ``"completed"``, ``"retry"``, ``"failed"`` or
        ``"snoozed"``; ``error``: what the task raised."""


class Hooks(Protocol):
    def sending(self, kind: SendKind, queue: str, count: int) -> AbstractContextManager[Sending]:
        """Open a producer span for ``count`` jobs into ``queue``, with ``CARRIER`` set
        to its context while it is open."""

    def sending_workflow(
        self, label: str, queues: Sequence[str], count: int
    ) -> AbstractContextManager[SendingWorkflow]:
        """Open a producer span for the ``count`` steps of a workflow run into
        ``queues``, with ``CARRIER`` set to its context while it is open: every step
        is stored with it."""

    def scheduling(
        self, schedule: str, queue: str, slot: datetime
    ) -> AbstractContextManager[Sending]:
        """Open a producer span for the job of one slot of a periodic schedule, with
        ``CARRIER`` set to its context while it is open. Unless a traced request
        brought a context (``CARRIER`` already set), it starts a new trace: each
        firing is a trace of its own. ``sent([])``: another worker took the slot."""

    def processing(self, job: Job) -> AbstractContextManager[Processing]:
        """Open a consumer span for one attempt of ``job``."""


hooks: Hooks | None = None
"""The installed hooks; None (the default) traces nothing."""


def install(new: Hooks | None) -> None:
    """Install hooks (None removes them)."""
    global hooks
    hooks = new


def carrier(traceparent: str | None, tracestate: str | None = None) -> str | None:
    """The JSON text stored with a job for these header values; None unless
    ``traceparent`` is well formed (a malformed one is ignored, as W3C asks)."""
    if not traceparent or not _TRACEPARENT.match(traceparent.strip().lower()):
        return None
    values = {"traceparent": traceparent.strip().lower()}
    if tracestate and len(tracestate) <= _MAX_TRACESTATE and tracestate.isprintable():
        values["tracestate"] = tracestate.strip()
    return json.dumps(values, separators=(",", ":"))


def headers(stored: str | None) -> dict[str, str]:
    """The ``traceparent``/``tracestate`` headers of a stored trace context."""
    if not stored:
        return {}
    try:
        values: Any = json.loads(stored)
    except ValueError:
        return {}
    if not isinstance(values, Mapping):
        return {}
    return {k: v for k, v in values.items() if k in ("traceparent", "tracestate") and v}


__all__ = [
    "CARRIER",
    "Hooks",
    "Processing",
    "Sending",
    "SendingWorkflow",
    "carrier",
    "headers",
    "hooks",
    "install",
]
