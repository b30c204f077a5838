"""Calling one job's task function, and turning how it ended into an ``Outcome``.

Shared by the worker (its task pool) and by inline runs (``app.drain``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    try:
        args, kwargs = task.binding.to_call(job.payload)
    except PayloadMismatch as exc:
        return outcome.failed(job, f"the payload does not fit task {task.name}: {exc}")
    return Prepared(task, args, kwargs, task.backoff or backoff)


def call(prepared: Prepared, ctx: Context) -> Outcome:
    """Run a synchronous task here."""
    task, job = prepared.task, ctx.job
    try:
        result = task.fn(ctx, *prepared.args, **prepared.kwargs)
    except Exception as exc:
        return from_exception(job, exc, backoff=prepared.backoff, retry_on=task.retry_on)
    return outcome.succeeded(job, result, max_bytes=_max_bytes(ctx))


async def call_async(prepared: Prepared, ctx: Context) -> Outcome:
    """Run an ``async def`` task on the current event loop."""
    task, job = prepared.task, ctx.job
    try:
        result = await task.fn(ctx, *prepared.args, **prepared.kwargs)
    except Exception as exc:
        return from_exception(job, exc, backoff=prepared.backoff, retry_on=task.retry_on)
    return outcome.succeeded(job, result, max_bytes=_max_bytes(ctx))


def _max_bytes(ctx: Context) -> int:
    return int(getattr(ctx.queue, "max_payload_bytes", DEFAULT_MAX_PAYLOAD_BYTES))
