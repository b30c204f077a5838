"""OpenTelemetry: one trace from the caller's span through enqueue (in process and over
HTTP) to each attempt a worker runs, recorded by the SDK's in-memory exporter."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import conveyor
from conveyor import tracing
from conveyor.client import RemoteQueue
from conveyor.integrations.opentelemetry import ConveyorInstrumentor
from conveyor.retry import Backoff
from conveyor.web.app import create_app
from tests.web.conftest import live_server


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = ConveyorInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    yield tp, exporter
    instrumentor.uninstrument()


def _by_kind(spans: tuple[ReadableSpan, ...], kind: SpanKind) -> list[ReadableSpan]:
    return [s for s in spans if s.kind == kind]


def _app(q: conveyor.Queue, calls: list[int]) -> conveyor.App:
    app = conveyor.App(q)

    @app.task(name="mail.send", max_attempts=3, backoff=Backoff(base=0, jitter=0))
    def send(ctx: conveyor.Context, to: str) -> str:
        calls.append(ctx.job.attempts)
        if len(calls) < 2:
            raise RuntimeError("smtp is down")
        return to

    return app


def test_one_trace_from_the_callers_span_to_every_attempt(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    calls: list[int] = []
    app = _app(q, calls)
    with tp.get_tracer("test").start_as_current_span("checkout") as parent:
        job = q.enqueue("mail.send", {"to": "a@example.com"}, queue="default")
    trace_id = parent.get_span_context().trace_id

    (producer,) = _by_kind(exporter.get_finished_spans(), SpanKind.PRODUCER)
    assert producer.name == "send default"
    assert (
        producer.parent is not None and producer.parent.span_id == parent.get_span_context().span_id
    )
    assert producer.context.trace_id == trace_id
    assert dict(producer.attributes or {}) == {
        "messaging.system": "conveyor",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "messaging.destination.name": "default",
        "messaging.message.id": str(job.id),
    }
    # The producer span's context is what the job stores, in its own column.
    stored = json.loads(q.get(job.id).trace_context or "")
    assert stored["traceparent"] == (
        f"00-{trace_id:032x}-{producer.context.span_id:016x}-{producer.context.trace_flags:02x}"
    )

    assert app.drain() == 2  # the first attempt fails, the retry completes
    assert calls == [1, 2]
    consumers = _by_kind(exporter.get_finished_spans(), SpanKind.CONSUMER)
    assert [s.attributes["conveyor.job.attempt"] for s in consumers] == [1, 2]  # type: ignore[index]
    for span in consumers:
        assert span.name == "process default"
        assert span.context.trace_id == trace_id
        assert span.parent is not None and span.parent.span_id == producer.context.span_id
        assert [link.context.span_id for link in span.links] == [producer.context.span_id]
        assert span.attributes["conveyor.task"] == "mail.send"  # type: ignore[index]
        assert span.attributes["messaging.message.id"] == str(job.id)  # type: ignore[index]
        assert span.attributes["messaging.operation.type"] == "process"  # type: ignore[index]
    failed, done = consumers
    assert failed.attributes["conveyor.job.outcome"] == "retry"  # type: ignore[index]
    assert failed.status.status_code == StatusCode.ERROR
    (event,) = failed.events
    assert event.name == "exception"
    assert event.attributes["exception.message"] == "smtp is down"  # type: ignore[index]
    assert done.attributes["conveyor.job.outcome"] == "completed"  # type: ignore[index]
    assert done.status.status_code == StatusCode.UNSET
    assert q.get(job.id).result == "a@example.com"


def test_the_worker_pool_runs_each_job_in_its_span(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    app = conveyor.App(q)
    seen: list[int] = []

    @app.task(name="pages.ocr")
    def ocr(ctx: conveyor.Context, page: int) -> None:
        # A job the task enqueues is a child of the task's own span.
        if page == 1:
            ctx.queue.enqueue("pages.ocr", {"page": 2})
        seen.append(page)

    with tp.get_tracer("test").start_as_current_span("upload") as parent:
        jobs = q.enqueue_many([{"task": "pages.ocr", "payload": {"page": 1}}])
    app.run_worker(burst=True, install_signals=False, concurrency=2)
    assert sorted(seen) == [1, 2]
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans} == {parent.get_span_context().trace_id}
    publish = next(s for s in spans if s.name == "publish default")
    assert publish.attributes["messaging.batch.message_count"] == 1  # type: ignore[index]
    assert publish.attributes["messaging.operation.type"] == "publish"  # type: ignore[index]
    first = next(
        s for s in spans
        if s.kind == SpanKind.CONSUMER and s.attributes["messaging.message.id"] == str(jobs[0].id)  # type: ignore[index]
    )  # fmt: skip
    assert first.parent is not None and first.parent.span_id == publish.context.span_id
    child_send = next(s for s in spans if s.name == "send default")
    assert child_send.parent is not None and child_send.parent.span_id == first.context.span_id


def test_a_failure_for_good_marks_the_span(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = provider
    app = conveyor.App(q)

    @app.task(name="pay.charge", max_attempts=1)
    def charge(ctx: conveyor.Context) -> None:
        raise ValueError("card declined")

    job = q.enqueue("pay.charge", max_attempts=1)
    app.drain()
    assert q.get(job.id).status == "failed"
    (span,) = _by_kind(exporter.get_finished_spans(), SpanKind.CONSUMER)
    assert span.attributes["conveyor.job.outcome"] == "failed"  # type: ignore[index]
    assert span.attributes["error.type"] == "ValueError"  # type: ignore[index]
    assert span.status.status_code == StatusCode.ERROR


def test_through_a_server_with_remote_queue(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    calls: list[int] = []
    with live_server(create_app(q, tokens={})) as url:
        remote = RemoteQueue(url)
        try:
            with tp.get_tracer("test").start_as_current_span("checkout") as parent:
                job = remote.enqueue("mail.send", {"to": "b@example.com"})
        finally:
            remote.close()
    trace_id = parent.get_span_context().trace_id
    assert job.trace_context is not None
    assert json.loads(job.trace_context)["traceparent"].split("-")[1] == f"{trace_id:032x}"
    _app(q, calls).drain()
    spans = exporter.get_finished_spans()
    # The client's span and the server's (instrumented in this process too) are one
    # trace with the worker's spans.
    assert {s.context.trace_id for s in spans} == {trace_id}
    producers = _by_kind(spans, SpanKind.PRODUCER)
    assert len(producers) == 2  # the client's send, and the server's inside it
    consumers = _by_kind(spans, SpanKind.CONSUMER)
    assert len(consumers) == 2
    assert all(c.parent is not None and c.parent.span_id in {p.context.span_id for p in producers}
               for c in consumers)  # fmt: skip


def test_an_untraced_server_stores_the_callers_traceparent(q: conveyor.Queue) -> None:
    header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with live_server(create_app(q, tokens={})) as url:
        import httpx

        answer = httpx.post(
            f"{url}/api/jobs",
            json={"task": "mail.send", "payload": {}},
            headers={"traceparent": header, "tracestate": "vendor=1"},
        )
        bad = httpx.post(
            f"{url}/api/jobs",
            json={"task": "mail.send", "payload": {}},
            headers={"traceparent": "not-a-trace"},
        )
    assert answer.status_code == 201 and bad.status_code == 201
    stored = q.get(answer.json()["id"]).trace_context
    assert json.loads(stored or "") == {"traceparent": header, "tracestate": "vendor=1"}
    assert q.get(bad.json()["id"]).trace_context is None


def test_nothing_is_traced_until_instrumented(q: conveyor.Queue) -> None:
    assert tracing.hooks is None
    job = q.enqueue("mail.send")
    assert job.trace_context is None and q.get(job.id).trace_context is None
    instrumentor = ConveyorInstrumentor()
    instrumentor.instrument()
    assert instrumentor.is_instrumented
    instrumentor.uninstrument()
    assert tracing.hooks is None and not instrumentor.is_instrumented
