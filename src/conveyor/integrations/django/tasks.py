"""A backend for Django's task framework (``django.tasks``, Django 6; the ``django-tasks``
backport, module ``django_tasks``, on Django 4.2 to 5.x) that keeps tasks in conveyor.

    # settings.py
    INSTALLED_APPS = [..., "conveyor.integrations.django"]
    TASKS = {"default": {"BACKEND": "conveyor.integrations.django.tasks.ConveyorBackend"}}

    # shop/tasks.py
    from django.tasks import task          # or: from django_tasks import task

    @task(priority=10, queue_name="mail")
    def send_receipt(order_id: int) -> str: ...

    result = send_receipt.enqueue(order_id=7)   # a TaskResult; result.id is the job id
    result.refresh(); result.status, result.return_value, result.errors

    $ python manage.py conveyor_worker          # runs Django's tasks beside conveyor's

- The queue's database: ``OPTIONS["DATABASE_URL"]``, else the Django integration's
  (``settings.CONVEYOR["DATABASE_URL"]``, ``settings.CONVEYOR_DATABASE_URL``, else the
  Django database ``CONVEYOR["USING"]``).
- Where that is Django's own database (SQLite, PostgreSQL, MySQL/MariaDB), an enqueue
  inside ``transaction.atomic()`` runs on Django's connection: the job commits or rolls
  back with the transaction.
- A task's ``priority`` (higher first, -100..100) becomes the job's (lower first, so
  negated); ``queue_name`` is the job's queue, ``run_after`` its ``run_at``. Async task
  functions and ``takes_context`` are supported. ``OPTIONS["MAX_ATTEMPTS"]`` (default 1,
  as Django's task API has no retries) bounds the attempts of each job.
- Jobs are named by the task's module path. The worker knows the tasks of the
  ``tasks`` module of each installed app, and of the modules in ``OPTIONS["MODULES"]``;
  nothing is imported by name from job data.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from dataclasses import replace
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from django.apps import apps as django_apps
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

import conveyor
from conveyor.errors import ConveyorError, JobNotFound
from conveyor.integrations import django as integration
from conveyor.integrations.django.config import database_url, settings
from conveyor.job import Job, Status
from conveyor.queue import Queue
from conveyor.task import Context
from conveyor.task.registered import Task as ConveyorTask


def _api() -> tuple[ModuleType, ModuleType, ModuleType, ModuleType]:
    """Django's task framework: ``django.tasks`` where Django has it, else the backport."""
    for package in ("django.tasks", "django_tasks"):
        try:
            return (
                importlib.import_module(f"{package}.base"),
                importlib.import_module(f"{package}.backends.base"),
                importlib.import_module(f"{package}.exceptions"),
                importlib.import_module(f"{package}.signals"),
            )
        except ImportError:
            continue
    raise ImproperlyConfigured(
        "conveyor's tasks backend needs Django 6 (django.tasks) or the django-tasks package"
    )


_base, _backends, _exceptions, _signals = _api()
BaseTaskBackend: Any = _backends.BaseTaskBackend
TaskResultStatus: Any = _base.TaskResultStatus

KNOWN_OPTIONS = {"DATABASE_URL", "MAX_ATTEMPTS", "MODULES"}
_STATUSES = {
    Status.PENDING: "READY",
    Status.RUNNING: "RUNNING",
    Status.COMPLETED: "SUCCESSFUL",
    Status.FAILED: "FAILED",
    Status.CANCELLED: "FAILED",
}
# Django's tasks that use a conveyor backend, by module path (a job's task name).
_known: dict[str, Any] = {}


class ConveyorBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = dict(self.options)
        unknown = set(options) - KNOWN_OPTIONS
        if unknown:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS']: unknown key(s) {', '.join(sorted(unknown))}; "
                f"known: {', '.join(sorted(KNOWN_OPTIONS))}"
            )
        self.database_url: str | None = options.get("DATABASE_URL")
        attempts = options.get("MAX_ATTEMPTS", 1)
        if type(attempts) is not int or attempts < 1:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS']['MAX_ATTEMPTS']: expected a whole number >= 1"
            )
        self.max_attempts = attempts
        modules = options.get("MODULES", ())
        if isinstance(modules, str) or not all(isinstance(m, str) for m in modules):
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS']['MODULES']: expected a list of module names"
            )
        self.modules: tuple[str, ...] = tuple(modules)

    # -- the queue ------------------------------------------------------------------
    @property
    def queue(self) -> Queue:
        return integration.queue(self.database_url)

    def _shared_connection(self) -> Any:
        """Django's DB-API connection when the queue lives in Django's database and a
        transaction is open on it; else None (the queue's own connection)."""
        using = settings().using
        wrapper = connections[using]
        if not wrapper.in_atomic_block:
            return None
        mine = self.database_url or settings().url()
        try:
            django_url = database_url(wrapper.settings_dict)
        except ConveyorError:
            return None
        if not _same_database(mine, django_url):
            return None
        return integration.db_connection(using)

    # -- the backend's API ------------------------------------------------------------
    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        _known[task.module_path] = _original(task)
        job = self.queue.enqueue(
            task.module_path,
            {"args": list(args), "kwargs": dict(kwargs)},
            queue=task.queue_name,
            priority=-task.priority,
            run_at=task.run_after,
            max_attempts=self.max_attempts,
            conn=self._shared_connection(),
        )
        result = self._result(task, job)
        _signals.task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        try:
            job = self.queue.get(int(result_id))
        except (ValueError, TypeError, JobNotFound, ConveyorError):
            job = None
        task = None if job is None else self.known_task(job.task)
        if job is None or task is None:
            raise _exceptions.TaskResultDoesNotExist(result_id)
        return self._result(task, job)

    def known_task(self, name: str) -> Any:
        """The Django task whose module path is ``name``, among those enqueued in this
        process or defined in the modules the worker reads (see ``discover``)."""
        if name not in _known:
            self.discover()
        return _known.get(name)

    def discover(self) -> dict[str, Any]:
        """Import the ``tasks`` module of each installed app and ``OPTIONS["MODULES"]``;
        answer the tasks found there that use this backend, by module path."""
        names = [f"{config.name}.tasks" for config in django_apps.get_app_configs()]
        found: dict[str, Any] = {}
        for name in [*names, *self.modules]:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name is not None and name.startswith(exc.name):
                    continue  # an app without a tasks module
                raise
            for value in vars(module).values():
                if isinstance(value, _base.Task) and value.backend == self.alias:
                    found[value.module_path] = value
        _known.update(found)
        return found

    # -- results ------------------------------------------------------------------------
    def _result(self, task: Any, job: Job) -> Any:
        payload = job.payload if isinstance(job.payload, dict) else {}
        workers = [e.worker or "" for e in job.errors]
        if job.status in (Status.RUNNING, Status.COMPLETED) or len(workers) < job.attempts:
            workers.append(job.worker or "")
        workers = workers[-job.attempts :] if job.attempts else []
        result = _base.TaskResult(
            task=replace(
                task,
                priority=-job.priority,
                queue_name=job.queue,
                run_after=task.run_after,
            ),
            id=str(job.id),
            status=TaskResultStatus[_STATUSES[job.status]],
            enqueued_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            last_attempted_at=job.claimed_at or job.started_at,
            args=list(payload.get("args") or []),
            kwargs=dict(payload.get("kwargs") or {}),
            backend=self.alias,
            errors=[_error(e.error) for e in job.errors],
            worker_ids=workers,
        )
        if job.status == Status.COMPLETED:
            object.__setattr__(result, "_return_value", job.result)
        return result


def _same_database(a: str, b: str) -> bool:
    """Whether two conveyor URLs name the same database (options aside)."""
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc, pa.path) == (pb.scheme, pb.netloc, pb.path)


def _original(task: Any) -> Any:
    """The task as defined (``using()`` makes copies with other defaults)."""
    module = sys.modules.get(task.func.__module__)
    defined = getattr(module, task.func.__name__, None) if module else None
    return defined if isinstance(defined, _base.Task) else task


def _error(text: str) -> Any:
    """A ``TaskError`` from an attempt's error text (``Name: message``, then the
    traceback, whose last line names the exception's class with its module)."""
    head, _, trace = text.partition("\n\n")
    last = (trace.strip().splitlines() or [head])[-1]
    name = last.split(":", 1)[0].strip() or head.split(":", 1)[0].strip()
    path = name if "." in name else f"builtins.{name}"
    return _base.TaskError(exception_class_path=path, traceback=trace or head)


# -- running Django's tasks in a conveyor worker ----------------------------------------


def add_tasks(app: conveyor.App) -> list[str]:
    """Register in ``app`` a conveyor task for each Django task of the conveyor backends
    of ``settings.TASKS``, so that its worker runs them too; answers the queues those
    backends accept (``QUEUES``), for the worker to watch beside the tasks' own."""
    registry = importlib.import_module(_base.__name__.rpartition(".")[0]).task_backends
    queues: list[str] = []
    for alias in registry:
        backend = registry[alias]
        if not isinstance(backend, ConveyorBackend):
            continue
        for name, task in sorted(backend.discover().items()):
            if name not in app.tasks:
                app.add(ConveyorTask(app, _runner(backend, task), name=name, queue=task.queue_name))
        queues.extend(sorted(backend.queues))
    return queues


def _runner(backend: ConveyorBackend, task: Any) -> Any:
    if inspect.iscoroutinefunction(task.func):

        async def run_async(
            ctx: Context, args: list[Any] | None = None, kwargs: dict[str, Any] | None = None
        ) -> Any:
            call_args = _arguments(backend, task, ctx, args)
            return _json(await task.func(*call_args, **(kwargs or {})))

        return run_async

    def run(
        ctx: Context, args: list[Any] | None = None, kwargs: dict[str, Any] | None = None
    ) -> Any:
        call_args = _arguments(backend, task, ctx, args)
        return _json(task.func(*call_args, **(kwargs or {})))

    return run


def _arguments(backend: ConveyorBackend, task: Any, ctx: Context, args: Any) -> list[Any]:
    if not task.takes_context:
        return list(args or [])
    context = _base.TaskContext(task_result=backend._result(task, ctx.job))
    return [context, *(args or [])]


def _json(value: Any) -> Any:
    with contextlib.suppress(AttributeError, ImportError):
        utils = importlib.import_module(_base.__name__.rpartition(".")[0] + ".utils")
        return utils.normalize_json(value)
    return value


__all__ = ["ConveyorBackend", "add_tasks"]
