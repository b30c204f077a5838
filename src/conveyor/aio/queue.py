"""``AsyncQueue``: the queue contract for asyncio, run against a database.

On PostgreSQL it runs each operation's plan (the same plans as ``Queue``) on psycopg's
async connections and pool, and waits for changes through LISTEN/NOTIFY. SQLite has no
asynchronous driver: there it runs the synchronous queue's operations on a worker
thread, so the event loop never waits for the file."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, TypeVar

from conveyor.aio.contract import AsyncQueueAPI
from conveyor.drivers.aio import AsyncDriver, AsyncSession
from conveyor.drivers.operations import Operation
from conveyor.errors import ConveyorError, TransactionConflict
from conveyor.job import Job
from conveyor.ops import Announce, Call, Later, Once, Plan, settled
from conveyor.ops.defaults import Defaults
from conveyor.ops.enqueue import plain_job
from conveyor.queue import NeedsWrite, Queue
from conveyor.retry import CONFLICT_RETRIES, conflict_pause

T = TypeVar("T")
# An AsyncQueue on SQLite learns of changes by looking at its counter this often.
_SQLITE_WATCH = 0.02


class AsyncQueue(AsyncQueueAPI):
    """A job queue in a SQL database, for asyncio. Build one with
    ``await conveyor.aio.connect(url)``."""

    def __init__(self, backend: AsyncDriver | Queue, *, defaults: Defaults | None = None) -> None:
        self._listening = False
        if isinstance(backend, Queue):
            self._threaded: Queue | None = backend
            self._backend: AsyncDriver | None = None
            self.defaults = backend.defaults
        else:
            self._threaded, self._backend = None, backend
            self.defaults = defaults or Defaults()

    async def _run(self, call: Call[T]) -> T:
        if self._threaded is not None:
            return await asyncio.to_thread(self._threaded._run, call)
        attempt = 0
        while True:
            try:
                return await self._run_once(call)
            except TransactionConflict:
                # As ``Queue._run``: our own transaction runs again, the caller's not.
                if call.conn is not None or attempt >= CONFLICT_RETRIES:
                    raise
                await asyncio.sleep(conflict_pause(attempt))
                attempt += 1

    async def _insert_plain(
        self, task: Any, payload: Any, options: Mapping[str, Any]
    ) -> Job | None:
        # As ``Queue._insert_plain``: the usual enqueue without the plan around it.
        if self._threaded is not None:
            return await asyncio.to_thread(self._threaded._insert_plain, task, payload, options)
        backend = self._backend
        assert backend is not None
        job = plain_job(self.defaults, task, payload, options)
        try:
            rows = await backend.write_once(job.insert(backend), queues=(job.queue,))
        except TransactionConflict:
            return None  # nothing was written: the plan runs it again
        return job.inserted(backend, rows[0])

    async def _run_once(self, call: Call[T]) -> T:
        backend = self._backend
        assert backend is not None
        work = call.build(backend)
        plan: Plan[T] | Plan[Later[T]]
        if isinstance(work, Once):
            rows = await backend.write_once(work.op, queues=work.queues, finished=work.finished)
            if rows or work.if_empty is None:
                return work.then(rows)
            plan = work.if_empty()
        else:
            plan = work
        # PostgreSQL and MySQL readers never block writers: every plan runs in one session.
        async with backend.session(conn=call.conn) as session:
            result = await drive(plan, session)
        return settled(result)

    # -- lifecycle ------------------------------------------------------------------
    async def close(self) -> None:
        if self._threaded is not None:
            await asyncio.to_thread(self._threaded.close)
        elif self._backend is not None:
            await self._backend.close()

    @property
    def url(self) -> str:
        if self._threaded is not None:
            return self._threaded.url
        assert self._backend is not None
        return self._backend.describe()

    @property
    def dialect(self) -> str:
        if self._threaded is not None:
            return self._threaded.dialect
        assert self._backend is not None
        return self._backend.dialect

    @property
    def listens(self) -> bool:
        """Whether other processes' changes wake this one (LISTEN/NOTIFY)."""
        return self._backend is not None and self._backend.capabilities.listen_notify

    # -- waiting for changes -----------------------------------------------------------
    def generation(self) -> int:
        if self._threaded is not None:
            return self._threaded.generation()
        assert self._backend is not None
        return self._backend.generation()

    async def wait_for_change(self, since: int, timeout: float) -> bool:
        if self._backend is not None:
            return await self._backend.wait_for_change(since, timeout)
        threaded = self._threaded
        assert threaded is not None
        if threaded.driver.hears_other_processes and not self._listening:
            # A synchronous queue starts its listener (PostgreSQL) or watcher (SQLite)
            # thread on the first wait; from then on its counter moves with other
            # processes' changes.
            await asyncio.to_thread(threaded.wait_for_change, since, 0)
            self._listening = True
        deadline = time.monotonic() + max(0.0, timeout)
        while self.generation() == since:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(_SQLITE_WATCH, left))
        return True


async def drive(plan: Plan[T] | Plan[Later[T]], session: AsyncSession) -> T | Later[T]:
    """Run a plan's operations in ``session`` (the twin of ``conveyor.queue.drive``)."""
    try:
        step = next(plan)
        while True:
            reply: Any = None
            try:
                if isinstance(step, Operation):
                    reply = await session.run(step)
                elif isinstance(step, Announce):
                    session.notify(queues=step.queues, finished=step.finished)
            except ConveyorError as exc:
                step = plan.throw(exc)
                continue
            step = plan.send(reply)
    except StopIteration as done:
        result: T | Later[T] = done.value
        return result


__all__ = ["AsyncQueue", "NeedsWrite"]
