"""``App`` and ``Task``: register functions as tasks, enqueue them, run them.

    app = conveyor.App("sqlite:///conveyor.db")

    @app.task(queue="fics", max_attempts=5, timeout=60)
    def parse(ctx: conveyor.Context, url: str) -> dict[str, str]:
        ...

    parse.enqueue(url="https://…", key="https://…")     # or parse.enqueue("https://…")
    app.run_worker(concurrency=4)                          # or: conveyor worker --app mod:app

Only registered task names ever run: a job names its task, never code to import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta, tzinfo
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from conveyor import crypto
from conveyor import validation as check
from conveyor.errors import ConfigurationError, InvalidArgument
from conveyor.ops.defaults import Duration
from conveyor.queue import Queue, connect
from conveyor.retry import BackoffPolicy
from conveyor.schedule import OnMissed, Periodic
from conveyor.task.context import Context
from conveyor.task.registered import Task, TaskCall

if TYPE_CHECKING:
    from conveyor.notify import Notifier
    from conveyor.worker.runtime import Worker, WorkerStats

P = ParamSpec("P")
R = TypeVar("R")

IMMEDIATE_URL = "sqlite:///:memory:"


class App:
    """Tasks, and the queue they are enqueued on. ``url_or_queue``: a database URL (the
    connection opens on first use; ``$CONVEYOR_DATABASE_URL``, when set, beats it, and
    ``conveyor worker --db`` beats both) or an open ``Queue``. ``immediate=True`` runs each
    enqueued job before ``enqueue`` returns (for tests; an in-memory database unless a
    URL is given). ``notifier``: who tells a job's subscribers that it finished."""

    def __init__(
        self,
        url_or_queue: str | Queue | None = None,
        *,
        immediate: bool = False,
        notifier: Notifier | None = None,
        encrypt: bool = False,
        encryption_keys: Sequence[str | bytes] | None = None,
    ) -> None:
        self.immediate = immediate
        # Every task's payload and result sealed (``conveyor.crypto``), unless the task
        # says otherwise; the keys given, else those of $CONVEYOR_ENCRYPTION_KEYS.
        self.encrypt = encrypt
        if encryption_keys is not None:
            crypto.use(encryption_keys)
        elif encrypt:
            crypto.required()
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, Periodic] = {}  # periodic jobs, by schedule name
        self._lock = threading.RLock()
        self._queue: Queue | None = None
        self._url: str | None = None
        self._owns_queue = False
        self._draining = threading.local()
        self.bind(url_or_queue)
        self.notifier: Notifier | None = None
        if notifier is not None:
            self.use_notifier(notifier)

    # -- the queue ------------------------------------------------------------------
    def bind(self, url_or_queue: str | Queue | None) -> None:
        """Use another database from now on: an open ``Queue`` as it is (``conveyor
        worker --db`` binds one), or a URL, which ``$CONVEYOR_DATABASE_URL`` beats as
        any URL in code. A queue-like object with ``Queue``'s methods (a remote queue)
        is accepted too."""
        with self._lock:
            old, owned = self._queue, self._owns_queue
            if url_or_queue is None or isinstance(url_or_queue, str):
                url = url_or_queue or (IMMEDIATE_URL if self.immediate else None)
                self._queue, self._url, self._owns_queue = None, url, True
            elif isinstance(url_or_queue, Queue) or _queue_like(url_or_queue):
                # Typed as Queue: a remote queue offers the same methods.
                self._queue, self._url, self._owns_queue = url_or_queue, None, False
            else:
                raise ConfigurationError(
                    f"App: expected a database URL or a Queue, got {type(url_or_queue).__name__}"
                )
            if old is not None and owned and old is not self._queue:
                old.close()

    @property
    def queue(self) -> Queue:
        """The queue, connected (and migrated) on first use."""
        with self._lock:
            if self._queue is None:
                # An immediate app (tests) stays on its own database whatever the environment.
                self._queue = connect(self._url, use_env=not self.immediate)
            return self._queue

    def close(self) -> None:
        with self._lock:
            if self._queue is not None and self._owns_queue:
                self._queue.close()
            self._queue = None

    # -- tasks ----------------------------------------------------------------------
    @overload
    def task(self, fn: Callable[Concatenate[Context, P], R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
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
    ) -> Callable[[Callable[Concatenate[Context, P], R]], Task[P, R]]: ...

    def task(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a task: ``@app.task`` or ``@app.task(name=..., queue=..., ...)``."""

        def register(function: Callable[Concatenate[Context, P], R]) -> Task[P, R]:
            task = Task(self, function, **options)
            self.add(task)
            return task

        return register if fn is None else register(fn)

    def add(self, task: Task[Any, Any]) -> None:
        with self._lock:
            # ``!=``, not ``is not``: a bound method is a new object at every access.
            if task.name in self.tasks and self.tasks[task.name].fn != task.fn:
                raise ConfigurationError(f"a task named {task.name!r} is already registered")
            self.tasks[task.name] = task

    def periodic(
        self,
        *,
        cron: str | None = None,
        every: timedelta | float | None = None,
        tz: str | tzinfo | None = None,
        name: str | None = None,
        payload: Mapping[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        on_missed: OnMissed = "run_once",
    ) -> Callable[[Callable[Concatenate[Context, P], R]], Task[P, R]]:
        """Enqueue a task on a schedule: ``@app.periodic(cron="*/5 * * * *",
        tz="Europe/Paris")`` or ``@app.periodic(every=timedelta(seconds=30))``, above
        ``@app.task`` or on a plain function (registered as a task). ``payload``: the
        task's keyword arguments; ``queue``, ``priority``, ``max_attempts``: the job's
        (default: the task's); ``name``: the schedule's (default: the task's name).
        ``on_missed``: a slot that went by while no worker ran is enqueued once on
        start-up (``"run_once"``) or not at all (``"skip"``). Workers enqueue each slot
        once between them. Bad options raise ``ConfigurationError`` here."""
        from conveyor import schedule

        what = "periodic" if name is None else f"periodic {name!r}"
        timing = schedule.timing(cron, every, tz, what=what)
        missed = schedule.on_missed(on_missed, what)
        if payload is not None and not isinstance(payload, Mapping):
            raise ConfigurationError(f"{what}: payload: expected a dict of the task's arguments")

        def declare(target: Callable[Concatenate[Context, P], R]) -> Task[P, R]:
            if isinstance(target, Task):
                if target.app is not self:
                    raise ConfigurationError(f"{what}: {target.name} is a task of another app")
                task: Task[P, R] = target
            elif callable(target):
                task = self.task(target)
            else:
                raise ConfigurationError(f"{what}: expected a task or a function")
            label = task.name if name is None else name
            try:
                arguments = task.binding.to_payload((), dict(payload or {}))
                check.encode_json(arguments, "payload")
                if max_attempts is not None:
                    check.integer(max_attempts, "max_attempts", low=1, high=1_000_000)
                entry = Periodic(
                    name=check.name(label, "schedule name"),
                    task=task.name,
                    timing=timing,
                    payload=arguments or None,
                    queue=check.name(task.queue if queue is None else queue, "queue"),
                    priority=check.integer(
                        task.priority if priority is None else priority, "priority"
                    ),
                    max_attempts=task.max_attempts if max_attempts is None else max_attempts,
                    on_missed=missed,
                )
            except InvalidArgument as exc:
                raise ConfigurationError(f"periodic {label!r}: {exc}") from None
            with self._lock:
                if label in self.schedules:
                    raise ConfigurationError(
                        f"a periodic schedule named {label!r} is already declared "
                        "(give this one another name=)"
                    )
                self.schedules[label] = entry
            return task

        return declare

    def get_task(self, name: str) -> Task[Any, Any] | None:
        return self.tasks.get(name)

    @property
    def queues(self) -> list[str]:
        """The queues the registered tasks use, in order of first registration."""
        return list(dict.fromkeys(t.queue for t in self.tasks.values()))

    def use_notifier(self, notifier: Notifier) -> None:
        """Tell subscribers of finished jobs through ``notifier`` (see ``conveyor.notify``)."""
        attach = getattr(notifier, "attach", None)
        if callable(attach):
            attach(self)
        self.notifier = notifier

    # -- running --------------------------------------------------------------------
    def worker(self, **options: Any) -> Worker:
        """A ``Worker`` for this app; see its arguments."""
        # Loaded when a worker is made, not with ``import conveyor``: apps that only
        # enqueue never load the runtime.
        from conveyor.worker.runtime import Worker

        return Worker(self, **options)

    def run_worker(self, **options: Any) -> WorkerStats:
        """Run a worker until it is stopped (a signal, or ``burst=True`` and no work)."""
        return self.worker(**options).run()

    def drain(self, queues: Iterable[str] | None = None) -> int:
        """Run every claimable job of ``queues`` (default: the tasks' queues) here, one at
        a time, until none is left; returns how many ran. Jobs scheduled for later stay."""
        if getattr(self._draining, "active", False):
            return 0  # enqueued from a task that drain is running: the loop picks it up
        from conveyor.worker.inline import drain  # loaded here, as in ``worker``

        self._draining.active = True
        try:
            return drain(self, list(queues) if queues is not None else self.queues)
        finally:
            self._draining.active = False


def _queue_like(value: object) -> bool:
    """Anything with the queue's claim and report operations (a remote queue) will do."""
    return all(callable(getattr(value, m, None)) for m in ("claim", "complete_many", "fail_many"))


__all__ = ["App", "Context", "Task", "TaskCall"]
