"""OpenTelemetry tracing of conveyor jobs, from the code that enqueues them to every
attempt a worker runs (needs the ``otel`` extra: ``opentelemetry-api``; the SDK and its
exporters are the application's to set up).

    from conveyor.integrations.opentelemetry import ConveyorInstrumentor
    ConveyorInstrumentor().instrument()            # or instrument(tracer_provider=...)

- Every enqueue (``enqueue``, ``enqueue_many``, ``enqueue_ids``, on every kind of queue)
  is a PRODUCER span, ``send <queue>`` (``publish <queue>`` for a batch), following the
  messaging semantic conventions: ``messaging.system = "conveyor"``,
  ``messaging.operation.type``, ``messaging.destination.name`` (the queue),
  ``messaging.message.id`` (the job id; ``messaging.batch.message_count`` for a batch).
  Its W3C trace context is stored with each job (``Job.trace_context``); over HTTP,
  ``RemoteQueue`` sends it in ``traceparent`` and the server stores it.
- A workflow (``enqueue_workflow``) is one PRODUCER span, ``publish <queue>`` (just
  ``publish`` when its steps go to several queues), whose context every step stores.
- Each slot a scheduler enqueues for a periodic schedule is a PRODUCER span
  ``send <queue>`` that starts a trace of its own (unless a traced request to
  ``conveyor serve`` brought one), with ``conveyor.schedule.*`` attributes.
- Every attempt a worker runs is a CONSUMER span, ``process <queue>``, whose parent is
  the stored context and which links to it, with ``conveyor.task``,
  ``conveyor.job.attempt`` and ``conveyor.job.outcome`` (``completed``, ``retry``,
  ``failed`` or ``snoozed``), and the exception recorded when the task raised.

Until ``instrument()`` runs, conveyor does no tracing work at all; ``uninstrument()``
takes the hooks away again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import conveyor
from conveyor import tracing
from conveyor.job import Job

SYSTEM = "conveyor"
_PROPAGATOR = TraceContextTextMapPropagator()


class _Sent:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def sent(self, ids: Sequence[int]) -> None:
        if len(ids) == 1:
            self._span.set_attribute("messaging.message.id", str(ids[0]))
        else:
            self._span.set_attribute("messaging.batch.message_count", len(ids))


class _Processed:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def ended(self, status: str, error: BaseException | None = None) -> None:
        self._span.set_attribute("conveyor.job.outcome", status)
        if error is not None:
            self._span.record_exception(error)
            self._span.set_attribute("error.type", type(error).__qualname__)
            self._span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
        elif status == "failed":
            self._span.set_status(Status(StatusCode.ERROR, "failed"))


class _SentWorkflow:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def sent(self, workflow_id: int) -> None:
        self._span.set_attribute("conveyor.workflow.id", workflow_id)


class _Scheduled:
    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def sent(self, ids: Sequence[int]) -> None:
        # Every worker's scheduler tries each slot; one of them enqueues it.
        self._span.set_attribute("conveyor.schedule.enqueued", bool(ids))
        if ids:
            self._span.set_attribute("messaging.message.id", str(ids[0]))


def _incoming() -> Context | None:
    """The context a traced request brought (``conveyor serve``), if any."""
    incoming = tracing.headers(tracing.CARRIER.get())
    return _PROPAGATOR.extract(incoming) if incoming else None


class _Hooks:
    """``conveyor.tracing.Hooks`` made of OpenTelemetry spans."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    @contextmanager
    def _producer(
        self, name: str, parent: Context | None, attributes: dict[str, Any]
    ) -> Iterator[trace.Span]:
        """A producer span, current while it is open, whose context new jobs store."""
        with self._tracer.start_as_current_span(
            name, context=parent, kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            headers: dict[str, str] = {}
            _PROPAGATOR.inject(headers)
            stored = tracing.carrier(headers.get("traceparent"), headers.get("tracestate"))
            token = tracing.CARRIER.set(stored) if stored is not None else None
            try:
                yield span
            finally:
                if token is not None:
                    tracing.CARRIER.reset(token)

    @staticmethod
    def _parent() -> Context | None:
        """The current span; without one, what a request may have brought."""
        if trace.get_current_span().get_span_context().is_valid:
            return None
        return _incoming()

    @contextmanager
    def sending(self, kind: tracing.SendKind, queue: str, count: int) -> Iterator[_Sent]:
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": kind,
            "messaging.operation.name": "enqueue",
            "messaging.destination.name": queue,
        }
        if kind == "publish":
            attributes["messaging.batch.message_count"] = count
        with self._producer(f"{kind} {queue}", self._parent(), attributes) as span:
            yield _Sent(span)

    @contextmanager
    def sending_workflow(
        self, label: str, queues: Sequence[str], count: int
    ) -> Iterator[_SentWorkflow]:
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "publish",
            "messaging.operation.name": "enqueue_workflow",
            "messaging.batch.message_count": count,
            "conveyor.workflow.label": label,
        }
        # One destination names the span, as for a batch; steps into several queues
        # have none (the convention's name is then the operation type alone).
        name = "publish"
        if len(queues) == 1:
            attributes["messaging.destination.name"] = queues[0]
            name = f"publish {queues[0]}"
        elif queues:
            attributes["conveyor.workflow.queues"] = list(queues)
        with self._producer(name, self._parent(), attributes) as span:
            yield _SentWorkflow(span)

    @contextmanager
    def scheduling(self, schedule: str, queue: str, slot: datetime) -> Iterator[_Scheduled]:
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "enqueue",
            "messaging.destination.name": queue,
            "conveyor.schedule.name": schedule,
            "conveyor.schedule.slot": slot.isoformat() if isinstance(slot, datetime) else str(slot),
        }
        # A firing is a trace of its own: no span that happens to be current in the
        # worker's scheduler is its parent. Only a traced request (a remote worker's
        # scheduler calling ``conveyor serve``) brings one: the caller's span, or the
        # server's own span for that request.
        if tracing.CARRIER.get() is None:
            parent: Context | None = Context()
        else:
            parent = self._parent()
        with self._producer(f"send {queue}", parent, attributes) as span:
            yield _Scheduled(span)

    @contextmanager
    def processing(self, job: Job) -> Iterator[_Processed]:
        headers = tracing.headers(job.trace_context)
        parent = _PROPAGATOR.extract(headers) if headers else None
        links = []
        if parent is not None:
            stored = trace.get_current_span(parent).get_span_context()
            if stored.is_valid:
                links.append(Link(stored))
            else:
                parent = None
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "conveyor.task": job.task,
            "conveyor.job.attempt": job.attempts,
            "conveyor.job.max_attempts": job.max_attempts,
        }
        if job.workflow_id is not None:
            attributes["conveyor.workflow.id"] = job.workflow_id
            attributes["conveyor.workflow.step"] = job.step or ""
        with self._tracer.start_as_current_span(
            f"process {job.queue}",
            context=parent,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes=attributes,
        ) as span:
            yield _Processed(span)


class ConveyorInstrumentor:
    """Turns conveyor's tracing hooks on (``instrument``) and off (``uninstrument``), as
    OpenTelemetry's instrumentation packages do for the libraries they cover."""

    def instrument(self, *, tracer_provider: trace.TracerProvider | None = None) -> None:
        """Trace enqueues and runs from now on, with spans from ``tracer_provider``
        (default: the global one)."""
        tracer = trace.get_tracer(
            "conveyor.integrations.opentelemetry",
            conveyor.__version__,
            tracer_provider=tracer_provider,
            schema_url="https://opentelemetry.io/schemas/1.26.0",
        )
        tracing.install(_Hooks(tracer))

    def uninstrument(self) -> None:
        """Stop tracing: conveyor goes back to doing no tracing work."""
        tracing.install(None)

    @property
    def is_instrumented(self) -> bool:
        return isinstance(tracing.hooks, _Hooks)


__all__ = ["SYSTEM", "ConveyorInstrumentor"]
