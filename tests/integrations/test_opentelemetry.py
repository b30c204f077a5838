"""OpenTelemetry: one trace from the caller's span through enqueue (in process and over
HTTP) to each attempt a worker runs, recorded by the SDK's in-memory exporter."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import conveyor
from conveyor import tracing
from conveyor.client import RemoteQueue
from conveyor.integrations.opentelemetry import ConveyorInstrumentor
from conveyor.maintenance.scheduler import Scheduler
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


# -- workflows -----------------------------------------------------------------------


def _book(label: str = "book-7", extra_queue: str | None = None) -> conveyor.Workflow:
    wf = conveyor.Workflow(label)
    extract = wf.add("book.extract", name="extract", book=7)
    pages = [wf.add("book.ocr", name=f"ocr-{n}", page=n, after=[extract]) for n in (1, 2)]
    options = {} if extra_queue is None else {"queue": extra_queue}
    wf.add("book.notify", name="notify", after=pages, **options)  # type: ignore[arg-type]
    return wf


def _book_app(q: conveyor.Queue) -> conveyor.App:
    app = conveyor.App(q)
    app.task(name="book.extract")(lambda ctx, book: book)
    app.task(name="book.ocr")(lambda ctx, page: page)
    app.task(name="book.notify")(lambda ctx: None)
    return app


def _check_steps_traced(
    q: conveyor.Queue, run: conveyor.WorkflowRun, exporter: InMemorySpanExporter
) -> ReadableSpan:
    """Every step stores the workflow's producer span; draining the run makes one
    consumer span per step, its child, in its trace. Returns the producer span."""
    (producer,) = _by_kind(exporter.get_finished_spans(), SpanKind.PRODUCER)
    traceparent = (
        f"00-{producer.context.trace_id:032x}-{producer.context.span_id:016x}-"
        f"{producer.context.trace_flags:02x}"
    )
    for name, job in run.jobs.items():
        assert json.loads(job.trace_context or "")["traceparent"] == traceparent, name
        assert json.loads(q.get(job.id).trace_context or "")["traceparent"] == traceparent
    assert _book_app(q).drain() == len(run.jobs)
    consumers = _by_kind(exporter.get_finished_spans(), SpanKind.CONSUMER)
    by_step = {s.attributes["conveyor.workflow.step"]: s for s in consumers}  # type: ignore[index]
    assert sorted(by_step) == sorted(run.jobs)  # one span per step, none twice
    for name, span in by_step.items():
        assert span.context.trace_id == producer.context.trace_id
        assert span.parent is not None and span.parent.span_id == producer.context.span_id
        assert span.attributes["conveyor.workflow.id"] == run.id  # type: ignore[index]
        assert span.attributes["messaging.message.id"] == str(run.jobs[name].id)  # type: ignore[index]
        assert span.attributes["conveyor.job.outcome"] == "completed"  # type: ignore[index]
    return producer


def test_a_workflow_is_one_producer_span_and_each_step_a_consumer_span_in_its_trace(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    with tp.get_tracer("test").start_as_current_span("upload") as parent:
        run = q.enqueue_workflow(_book())
    producer = _check_steps_traced(q, run, exporter)
    assert producer.name == "publish default"
    assert producer.context.trace_id == parent.get_span_context().trace_id
    assert producer.parent is not None
    assert producer.parent.span_id == parent.get_span_context().span_id
    assert dict(producer.attributes or {}) == {
        "messaging.system": "conveyor",
        "messaging.operation.type": "publish",
        "messaging.operation.name": "enqueue_workflow",
        "messaging.destination.name": "default",
        "messaging.batch.message_count": 4,
        "conveyor.workflow.label": "book-7",
        "conveyor.workflow.id": run.id,
    }


def test_a_workflow_over_several_queues_names_no_destination(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = provider
    run = q.enqueue_workflow(_book(extra_queue="mail"))
    (producer,) = _by_kind(exporter.get_finished_spans(), SpanKind.PRODUCER)
    assert producer.name == "publish"
    assert producer.parent is None  # no span was current: the run starts a trace
    attributes = dict(producer.attributes or {})
    assert "messaging.destination.name" not in attributes
    assert attributes["conveyor.workflow.queues"] == ("default", "mail")
    assert attributes["messaging.batch.message_count"] == 4
    assert run.jobs["notify"].queue == "mail"


def test_a_refused_workflow_marks_its_span_and_stores_nothing(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = provider
    wf = conveyor.Workflow("bad")
    wf.add("t", name="a", key="k")
    wf.add("t", name="b", key="k")  # the same key twice in one queue
    with pytest.raises(conveyor.errors.InvalidArgument):
        q.enqueue_workflow(wf)
    (producer,) = _by_kind(exporter.get_finished_spans(), SpanKind.PRODUCER)
    assert producer.status.status_code == StatusCode.ERROR
    assert "conveyor.workflow.id" not in (producer.attributes or {})
    assert q.workflows() == []


def test_an_async_queues_workflow_is_traced_the_same(
    db_url: str, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    import asyncio

    import conveyor.aio

    tp, exporter = provider

    async def enqueue() -> conveyor.WorkflowRun:
        aq = await conveyor.aio.connect(db_url)
        try:
            with tp.get_tracer("test").start_as_current_span("upload"):
                return await aq.enqueue_workflow(_book())
        finally:
            await aq.close()

    run = asyncio.run(enqueue())
    with conveyor.connect(db_url) as q:
        producer = _check_steps_traced(q, run, exporter)
    assert producer.name == "publish default"


def test_a_workflow_through_a_server_is_one_trace(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    with live_server(create_app(q, tokens={})) as url:
        remote = RemoteQueue(url)
        try:
            with tp.get_tracer("test").start_as_current_span("upload") as parent:
                run = remote.enqueue_workflow(_book())
        finally:
            remote.close()
    trace_id = parent.get_span_context().trace_id
    # The client's span, and the server's inside it (instrumented in this process too).
    client, server = sorted(
        _by_kind(exporter.get_finished_spans(), SpanKind.PRODUCER),
        key=lambda s: s.start_time or 0,
    )
    assert {client.context.trace_id, server.context.trace_id} == {trace_id}
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    assert client.attributes["conveyor.workflow.id"] == run.id  # type: ignore[index]
    assert _book_app(q).drain() == 4
    consumers = _by_kind(exporter.get_finished_spans(), SpanKind.CONSUMER)
    assert len(consumers) == 4
    for span in consumers:
        assert span.context.trace_id == trace_id
        assert span.parent is not None and span.parent.span_id == server.context.span_id


def test_an_untraced_server_stores_the_callers_traceparent_with_every_step(
    q: conveyor.Queue,
) -> None:
    header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with live_server(create_app(q, tokens={})) as url:
        import httpx

        answer = httpx.post(
            f"{url}/api/workflows",
            json=_book().to_wire(),
            headers={"traceparent": header},
        )
    assert answer.status_code == 201, answer.text
    run = q.workflow(answer.json()["id"])
    assert len(run.jobs) == 4
    for job in run.jobs.values():
        assert json.loads(job.trace_context or "") == {"traceparent": header}


def test_a_workflow_without_tracing_stores_no_context(q: conveyor.Queue) -> None:
    run = q.enqueue_workflow(_book())
    assert all(q.get(job.id).trace_context is None for job in run.jobs.values())


# -- periodic schedules --------------------------------------------------------------


def _clock(q: conveyor.Queue) -> Callable[[float], datetime]:
    """Moments of the schedulers' passes, from an hour ago (on a minute) so their jobs
    can run now."""
    start = q.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    return lambda seconds: start + timedelta(seconds=seconds)


def _ticking(q: conveyor.Queue) -> conveyor.App:
    app = conveyor.App(q)

    @app.periodic(every=timedelta(seconds=10), queue="ticks")
    @app.task(name="tick")
    def tick(ctx: conveyor.Context) -> None: ...

    return app


def test_each_firing_of_a_schedule_starts_its_own_trace(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    tp, exporter = provider
    app, _at = _ticking(q), _clock(q)
    one, two = Scheduler(q, app.schedules.values()), Scheduler(q, app.schedules.values())
    assert one.run_once(_at(1)) == 0 and two.run_once(_at(2)) == 0
    # A span current in the worker (here, the test's) does not adopt the firings.
    with tp.get_tracer("test").start_as_current_span("worker") as worker:
        assert one.run_once(_at(10.5)) == 1
        # The other worker's scheduler, racing for the same slot, finds it taken.
        assert (
            q.run_schedule_slot("tick", slot=_at(10), next_slot=_at(20), task="tick", queue="ticks")
            is None
        )
        assert two.run_once(_at(20.1)) == 1
    producers = _by_kind(exporter.get_finished_spans(), SpanKind.PRODUCER)
    assert len(producers) == 3  # one per attempt at a slot
    first, lost, second = producers
    for span in producers:
        assert span.name == "send ticks"
        assert span.parent is None
        assert span.context.trace_id != worker.get_span_context().trace_id
    assert first.context.trace_id != second.context.trace_id  # a trace per firing
    jobs = {j.run_at: j for j in q.jobs(task="tick")}
    assert dict(first.attributes or {}) == {
        "messaging.system": "conveyor",
        "messaging.operation.type": "send",
        "messaging.operation.name": "enqueue",
        "messaging.destination.name": "ticks",
        "messaging.message.id": str(jobs[_at(10)].id),
        "conveyor.schedule.name": "tick",
        "conveyor.schedule.slot": _at(10).isoformat(),
        "conveyor.schedule.enqueued": True,
    }
    assert lost.attributes["conveyor.schedule.enqueued"] is False  # type: ignore[index]
    assert "messaging.message.id" not in (lost.attributes or {})
    assert second.attributes["messaging.message.id"] == str(jobs[_at(20)].id)  # type: ignore[index]

    assert app.drain(queues=["ticks"]) == 2
    consumers = _by_kind(exporter.get_finished_spans(), SpanKind.CONSUMER)
    assert len(consumers) == 2
    for producer in (first, second):
        (consumer,) = [c for c in consumers if c.context.trace_id == producer.context.trace_id]
        assert consumer.parent is not None and consumer.parent.span_id == producer.context.span_id
        assert consumer.attributes["messaging.message.id"] == producer.attributes[  # type: ignore[index]
            "messaging.message.id"
        ]  # fmt: skip


def test_a_remote_schedulers_firing_is_one_trace_with_the_server(
    q: conveyor.Queue, provider: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = provider
    app, _at = _ticking(q), _clock(q)
    with live_server(create_app(q, tokens={})) as url:
        remote = RemoteQueue(url)
        try:
            scheduler = Scheduler(remote, app.schedules.values())
            assert scheduler.run_once(_at(1)) == 0
            assert scheduler.run_once(_at(10.5)) == 1
        finally:
            remote.close()
    client, server = sorted(
        _by_kind(exporter.get_finished_spans(), SpanKind.PRODUCER),
        key=lambda s: s.start_time or 0,
    )
    assert client.parent is None  # the firing's own trace
    assert server.context.trace_id == client.context.trace_id
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    (job,) = q.jobs(task="tick")
    assert client.attributes["messaging.message.id"] == str(job.id)  # type: ignore[index]
    stored = json.loads(job.trace_context or "")["traceparent"]
    assert stored.split("-")[1:3] == [
        f"{server.context.trace_id:032x}",
        f"{server.context.span_id:016x}",
    ]
