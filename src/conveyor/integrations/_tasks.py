"""Running an app's tasks inside what a framework sets up around its own work (an
application context, fresh database connections), the way it does around a request."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from conveyor.app import App

Around = Callable[[], AbstractContextManager[Any]]
_ORIGINAL = "__conveyor_task__"


def run_tasks_inside(app: App, around: Around, *, sync_only: bool = False) -> None:
    """Make each task of ``app`` (each synchronous one, with ``sync_only``) run inside
    ``around()`` (in this process: the workers that frameworks' commands start). Called
    again, it replaces the earlier ``around``."""
    for task in app.tasks.values():
        if task.is_async and sync_only:
            continue
        fn: Any = getattr(task.fn, _ORIGINAL, task.fn)
        task.fn = _async_inside(fn, around) if task.is_async else _inside(fn, around)


def _inside(fn: Callable[..., Any], around: Around) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with around():
            return fn(*args, **kwargs)

    setattr(run, _ORIGINAL, fn)
    return run


def _async_inside(fn: Callable[..., Any], around: Around) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        with around():
            return await fn(*args, **kwargs)

    setattr(run, _ORIGINAL, fn)
    return run
