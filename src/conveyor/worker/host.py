"""What a worker needs of the app whose tasks it runs (``conveyor.App`` is one): its
tasks, the queues they use, its periodic schedules and its notifier. A protocol, so the
runtime depends on no ``App``, and the app loads the runtime only when it runs one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from conveyor.task.registered import Task, TaskHost

if TYPE_CHECKING:
    from conveyor.notify import Notifier
    from conveyor.schedule import Periodic


class WorkerApp(TaskHost, Protocol):
    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]: ...

    @property
    def schedules(self) -> Mapping[str, Periodic]: ...

    @property
    def notifier(self) -> Notifier | None: ...

    @property
    def queues(self) -> list[str]: ...

    def get_task(self, name: str) -> Task[Any, Any] | None: ...


__all__ = ["WorkerApp"]
