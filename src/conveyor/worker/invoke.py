"""Calling one job's task function, and turning how it ended into an ``Outcome``.

Shared by the worker (its task pool) and by inline runs (``app.drain``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conveyor import crypto, tracing
from conveyor.job import Job
from conveyor.retry import Backoff, BackoffPolicy
from conveyor.task import Context, PayloadMismatch
from conveyor.validation import DEFAULT_MAX_PAYLOAD_BYTES
from conveyor.worker import outcome
from conveyor.worker.classify import from_exception
from conveyor.worker.outcome import Outcome

if TYPE_CHECKING:
    from conveyor.task.registered import Task
    from conveyor.worker.host import WorkerApp


class Prepared:
    """A job whose task is known and whose payload fits it."""

    __slots__ = ("args", "backoff", "kwargs", "task")

    def __init__(
        self, task: Task[Any, Any], args: list[Any], kwargs: dict[str, Any], backoff: BackoffPolicy
    ) -> None:
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.backoff = backoff


def prepare(app: WorkerApp, job: Job) -> Prepared | Outcome:
    """The task and arguments for ``job``, or the failure to record when there are none."""
    task = app.get_task(job.task)
    # A remote queue has no backoff policy of its own: the library default applies.
    backoff: BackoffPolicy = getattr(app.queue, "backoff", None) or Backoff()
    if task is None:
        known = ", ".join(sorted(app.tasks)[:10]) or "none"
        # Retryable: a worker of a newer release may know the task.
        return outcome.failed(
            job,
            f"no task named {job.task!r} is registered in this worker (known: {known})",
            retryable=True,
            delay=backoff.delay(job.attempts),
        )
    if crypto.sealed(job.payload):
        # Retryable: a worker that holds the key may open it.
        return outcome.failed(
            job,
            f"the payload of task {task.name} is encrypted and this worker holds no key "
            f"that opens it (set {crypto.ENV_KEYS})",
            retryable=True,
            delay=backoff.delay(job.attempts),
        )
    try:
        args, kwargs = task.binding.to_call(crypto.without_redaction(job.payload))
    except PayloadMismatch as exc:
        return outcome.failed(job, f"the payload does not fit task {task.name}: {exc}")
    return Prepared(task, args, kwargs, task.backoff or backoff)


def call(prepared: Prepared, ctx: Context) -> Outcome:
    """Run a synchronous task here."""
    if tracing.hooks is None:
        return _call(prepared, ctx, None)
    with tracing.hooks.processing(ctx.job) as span:
        return _call(prepared, ctx, span)


def _call(prepared: Prepared, ctx: Context, span: tracing.Processing | None) -> Outcome:
    task, job = prepared.task, ctx.job
    try:
        result = task.fn(ctx, *prepared.args, **prepared.kwargs)
    except Exception as exc:
        ending = from_exception(job, exc, backoff=prepared.backoff, retry_on=task.retry_on)
        if span is not None:
            span.ended(_status(ending), exc)
        return ending
    ending = outcome.succeeded(job, task.sealed(result), max_bytes=_max_bytes(ctx))
    if span is not None:
        span.ended(_status(ending))
    return ending


async def call_async(prepared: Prepared, ctx: Context) -> Outcome:
    """Run an ``async def`` task on the current event loop."""
    if tracing.hooks is None:
        return await _call_async(prepared, ctx, None)
    with tracing.hooks.processing(ctx.job) as span:
        return await _call_async(prepared, ctx, span)


async def _call_async(prepared: Prepared, ctx: Context, span: tracing.Processing | None) -> Outcome:
    task, job = prepared.task, ctx.job
    try:
        result = await task.fn(ctx, *prepared.args, **prepared.kwargs)
    except Exception as exc:
        ending = from_exception(job, exc, backoff=prepared.backoff, retry_on=task.retry_on)
        if span is not None:
            span.ended(_status(ending), exc)
        return ending
    ending = outcome.succeeded(job, task.sealed(result), max_bytes=_max_bytes(ctx))
    if span is not None:
        span.ended(_status(ending))
    return ending


def _status(ending: Outcome) -> str:
    """How an attempt ended, as a span records it."""
    if ending.snooze is not None:
        return "snoozed"
    if ending.error is None:
        return "completed"
    if ending.retryable and ending.job.attempts < ending.job.max_attempts:
        return "retry"
    return "failed"


def _max_bytes(ctx: Context) -> int:
    return int(getattr(ctx.queue, "max_payload_bytes", DEFAULT_MAX_PAYLOAD_BYTES))
