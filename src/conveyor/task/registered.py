"""A registered task: ``Task`` (what ``@app.task`` returns) and ``TaskCall`` (a task
with its job options chosen). A task knows its app only as a ``TaskHost``: the queue it
enqueues on, and whether jobs run at once (``App(immediate=True)``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, Unpack

from conveyor import crypto
from conveyor import validation as check
from conveyor.errors import ConfigurationError, InvalidArgument
from conveyor.job import Job
from conveyor.ops.defaults import Duration
from conveyor.options import OPTIONS, EnqueueOptions, resolved
from conveyor.retry import BackoffPolicy, seconds
from conveyor.task.binding import Binding
from conveyor.task.context import Context

if TYPE_CHECKING:
    from conveyor.queue import Queue

P = ParamSpec("P")
R = TypeVar("R")


class TaskHost(Protocol):
    """What a task needs of the app that holds it (``conveyor.App`` is one)."""

    immediate: bool

    @property
    def queue(self) -> Queue: ...

    def add(self, task: Task[Any, Any]) -> None: ...

    def drain(self, queues: Iterable[str] | None = None) -> int: ...


class Task(Generic[P, R]):
    """A registered task function. Call it directly (with a context) in unit tests, or
    ``enqueue`` it to have a worker run it."""

    def __init__(
        self,
        app: TaskHost,
        fn: Callable[Concatenate[Context, P], R],
        *,
        name: str | None = None,
        queue: str = "default",
        max_attempts: int | None = None,
        backoff: BackoffPolicy | None = None,
        timeout: Duration | None = None,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        priority: int = 0,
        encrypt: bool | None = None,
        redact: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = check.name(name or f"{fn.__module__}.{fn.__qualname__}", "task name")
        self.queue = check.name(queue, "queue")
        self.max_attempts = (
            None
            if max_attempts is None
            else check.integer(max_attempts, "max_attempts", low=1, high=1_000_000)
        )
        if backoff is not None and not callable(getattr(backoff, "delay", None)):
            raise ConfigurationError(f"task {self.name}: backoff needs a delay(attempt) method")
        self.backoff = backoff
        self.timeout = None if timeout is None else seconds(timeout, "timeout", allow_zero=False)
        self.retry_on = _exception_types(retry_on, self.name)
        self.priority = check.integer(priority, "priority")
        if isinstance(redact, str) or not all(isinstance(f, str) for f in redact):
            raise ConfigurationError(f"task {self.name}: redact expects a list of field names")
        # Payload fields hidden from readers, the console and logs (``conveyor.crypto``).
        self.redact = tuple(redact)
        # None: as the app says (``App(encrypt=...)``).
        self._encrypt = encrypt
        if encrypt:
            crypto.required()
        self.is_async = inspect.iscoroutinefunction(fn)
        self.binding = Binding(fn, self.name)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @property
    def encrypt(self) -> bool:
        """Whether its payloads and results are sealed (``conveyor.crypto``)."""
        if self._encrypt is not None:
            return self._encrypt
        return bool(getattr(self.app, "encrypt", False))

    def sealed(self, value: Any) -> Any:
        """A result as stored: sealed when the task encrypts."""
        return crypto.required().seal(value) if self.encrypt else value

    def stored_payload(self, payload: Any) -> Any:
        """A payload as stored: sealed when the task encrypts, else with the fields it
        redacts listed."""
        if self.encrypt:
            return crypto.required().seal(payload)
        return crypto.with_redaction(payload, self.redact)

    def __call__(self, ctx: Context, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(ctx, *args, **kwargs)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Enqueue a run with these arguments. A keyword that names an option of
        ``conveyor.options.EnqueueOptions`` (``key``, ``run_at``, ``priority``,
        ``queue``, ``max_attempts``, ``subscriber``, ``group``, ``after``,
        ``on_dependency_failure``, the dedupe policy, ``conn``) is that option of the
        job (see ``using``), unless the task has a parameter of that name."""
        options: dict[str, Any] = {
            k: kwargs.pop(k)
            for k in list(kwargs)
            if k in OPTIONS and k not in self.binding.parameters
        }
        return self.using(**options).enqueue(*args, **kwargs)

    def using(self, **options: Unpack[EnqueueOptions]) -> TaskCall[P]:
        """Job options, type-checked apart from the task's own arguments:
        ``parse.using(key=url).enqueue(url=url)``. Those left out are the task's
        (``queue``, ``priority``, ``max_attempts``), else the queue's defaults."""
        chosen = dict(resolved(options, "using()"))
        for name, own in (("queue", self.queue), ("priority", self.priority),
                          ("max_attempts", self.max_attempts)):  # fmt: skip
            if options.get(name) is None:
                chosen[name] = own
        return TaskCall(self, chosen)

    def enqueue_many(self, calls: Iterable[Mapping[str, Any]], *, conn: Any = None) -> list[Job]:
        """Enqueue one job per mapping of keyword arguments, in one transaction."""
        items = []
        for call in calls:
            if not isinstance(call, Mapping):
                raise InvalidArgument(f"calls: expected keyword-argument dicts, got {call!r}")
            items.append(
                {
                    "task": self.name,
                    "payload": self.stored_payload(self.binding.to_payload((), call)),
                    "queue": self.queue,
                    "priority": self.priority,
                    "max_attempts": self.max_attempts,
                }
            )
        jobs = self.app.queue.enqueue_many(items, conn=conn)
        if self.app.immediate and conn is None:
            self.app.drain()
            return [self.app.queue.get(j.id) or j for j in jobs]
        return jobs

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.queue}>"


class TaskCall(Generic[P]):
    """A task with its job options chosen, ready to ``enqueue`` arguments."""

    def __init__(self, task: Task[P, Any], options: dict[str, Any]) -> None:
        self.task = task
        self.options = options

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        task = self.task
        payload = task.stored_payload(task.binding.to_payload(args, kwargs))
        job = task.app.queue.enqueue(task.name, payload, **self.options)
        if task.app.immediate and self.options["conn"] is None:
            task.app.drain()
            return task.app.queue.get(job.id) or job
        return job


def _exception_types(
    value: type[BaseException] | tuple[type[BaseException], ...] | None, task: str
) -> tuple[type[BaseException], ...] | None:
    if value is None:
        return None
    types = value if isinstance(value, tuple) else (value,)
    if not types or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise ConfigurationError(f"task {task}: retry_on expects exception classes")
    return types


__all__ = ["Task", "TaskCall", "TaskHost"]
