"""The asynchronous seam between a queue and a database: the twin of ``Driver`` for
``conveyor.aio.AsyncQueue``. Sessions run the same operations, with the same
statements and the same handlers (an async session awaits a handler's coroutine);
only waiting for the database is done with ``await``."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, TypeVar, cast

from conveyor.drivers.base import Capabilities
from conveyor.drivers.operations import Operation
from conveyor.drivers.values import Row, Values

R = TypeVar("R")
AsyncHandler = Callable[[Any, Any], Awaitable[Any]]


class AsyncSession(ABC):
    """One transaction, in which operations run (see ``Session``)."""

    handlers: ClassVar[Mapping[str, AsyncHandler]] = {}

    def __init__(self) -> None:
        self.queues_touched: set[str] = set()
        self.jobs_finished: set[int] = set()

    async def run(self, op: Operation[R]) -> R:
        handler = self.handlers.get(op.op)
        if handler is not None:
            return cast(R, await handler(self, op))
        if op.returns_rows:
            return cast(R, await self.all(op.op, op.params()))
        return cast(R, await self.execute(op.op, op.params()))

    @abstractmethod
    async def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]: ...

    @abstractmethod
    async def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement, return how many rows it changed."""

    def notify(self, *, queues: Iterable[str] = (), finished: Iterable[int] = ()) -> None:
        self.queues_touched.update(queues)
        self.jobs_finished.update(finished)


class AsyncDriver(Values):
    """A database reached without blocking the event loop. The change counter and its
    waiters live on the loop the backend was opened on."""

    capabilities: ClassVar[Capabilities]

    def __init__(self) -> None:
        self._generation = 0
        self._changed = asyncio.Event()

    @abstractmethod
    def session(
        self, *, write: bool = True, conn: Any = None
    ) -> AbstractAsyncContextManager[AsyncSession]: ...

    async def write_once(
        self,
        op: Operation[list[Row]],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        async with self.session() as s:
            rows = await s.run(op)
            if rows:
                s.notify(queues=queues, finished=finished)
        return rows

    def generation(self) -> int:
        return self._generation

    async def wait_for_change(self, since: int, timeout: float) -> bool:
        if self._generation != since:
            return True
        try:
            await asyncio.wait_for(self._wait(since), timeout)
        except TimeoutError:
            return False
        return True

    async def _wait(self, since: int) -> None:
        while self._generation == since:
            await self._changed.wait()

    def _announce(self) -> None:
        self._generation += 1
        # Wake every waiter, then arm the event again for the next change.
        self._changed.set()
        self._changed = asyncio.Event()

    @abstractmethod
    async def ping(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    def describe(self) -> str: ...
