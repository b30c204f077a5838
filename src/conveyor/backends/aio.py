"""The asynchronous seam between a queue and a database: the twin of ``Backend`` for
``conveyor.aio.AsyncQueue``. Sessions run the same named statements; only waiting for
the database is done with ``await``."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from conveyor.backends.values import Row, Values


class AsyncSession(ABC):
    """One transaction. Statements are named; parameters are a mapping."""

    def __init__(self) -> None:
        self.queues_touched: set[str] = set()
        self.jobs_finished: set[int] = set()

    @abstractmethod
    async def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]: ...

    @abstractmethod
    async def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement, return how many rows it changed."""

    def notify(self, *, queues: Iterable[str] = (), finished: Iterable[int] = ()) -> None:
        self.queues_touched.update(queues)
        self.jobs_finished.update(finished)


class AsyncBackend(Values):
    """A database reached without blocking the event loop. The change counter and its
    waiters live on the loop the backend was opened on."""

    supports_listen_notify = False

    def __init__(self) -> None:
        self._generation = 0
        self._changed = asyncio.Event()

    @abstractmethod
    def session(
        self, *, write: bool = True, conn: Any = None
    ) -> AbstractAsyncContextManager[AsyncSession]: ...

    async def write_once(
        self,
        query: str,
        params: Mapping[str, Any],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        async with self.session() as s:
            rows = await s.all(query, params)
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
