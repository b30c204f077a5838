"""conveyor in a FastAPI (or Starlette) application.

    from typing import Annotated
    from fastapi import Depends, FastAPI
    from conveyor.aio import AsyncQueue
    from conveyor.integrations.fastapi import Conveyor

    conveyor_ = Conveyor("postgresql://app@db/app", tokens={"s3cret": "admin"})
    app = FastAPI(lifespan=conveyor_.lifespan)
    app.mount("/queue", conveyor_.api())          # the HTTP API and the dashboard

    @app.post("/signups")
    async def signup(queue: Annotated[AsyncQueue, Depends(conveyor_)]) -> dict[str, int]:
        job = await queue.enqueue("emails.welcome", {"to": "ada@example.com"})
        return {"job": job.id}

The lifespan opens one ``AsyncQueue`` for the process and closes it on shutdown; every
handler awaits it, so enqueueing never blocks the event loop (PostgreSQL through
psycopg's async pool; SQLite on worker threads). ``api()`` is conveyor's HTTP service
(``conveyor.web.create_app``) over the same database, ready to mount under any path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

import conveyor
import conveyor.aio
from conveyor.aio.queue import AsyncQueue
from conveyor.config import database_url, parse_url
from conveyor.errors import ConfigurationError
from conveyor.queue import Queue
from conveyor.web import Limits, Role, create_app
from conveyor.web.envelope import error_response


class Conveyor:
    """One queue for a FastAPI application, opened and closed by its lifespan.

    ``url``: the database, read when the lifespan starts; ``$CONVEYOR_DATABASE_URL``,
    when set, beats it (else ``sqlite:///conveyor.db``). ``tokens`` and ``limits``
    configure the mounted HTTP API as for ``create_app`` (by default tokens come from
    ``$CONVEYOR_TOKENS``). Other keyword options go to ``conveyor.aio.connect``.
    Use the object itself as a dependency: ``Depends(conveyor_)`` gives the
    ``AsyncQueue``."""

    def __init__(
        self,
        url: str | None = None,
        *,
        tokens: Mapping[str, Role | str] | None = None,
        limits: Limits | None = None,
        **options: Any,
    ) -> None:
        self._url = url
        self._tokens = tokens
        self._limits = limits
        self._options = options
        self._queue: AsyncQueue | None = None
        self._sync: Queue | None = None
        self._api: ASGIApp | None = None
        self._wants_api = False

    # -- lifecycle ------------------------------------------------------------------
    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """``FastAPI(lifespan=conveyor_.lifespan)``, or inside a lifespan of your own:
        ``async with conveyor_.lifespan(app): yield``."""
        await self.open()
        try:
            yield
        finally:
            await self.close()

    async def open(self) -> AsyncQueue:
        """Open the queue (and the mounted API's), bringing the schema up to date."""
        if self._queue is not None:
            return self._queue
        url = database_url(self._url)
        if parse_url(url).backend == "sqlite":
            # SQLite has no asynchronous driver: the AsyncQueue runs a Queue on worker
            # threads, and the API serves that same Queue.
            self._sync = await asyncio.to_thread(conveyor.connect, url, **self._options)
            self._queue = AsyncQueue(self._sync)
        else:
            self._queue = await conveyor.aio.connect(url, **self._options)
            if self._wants_api:  # the HTTP service is synchronous: a pool of its own
                try:
                    self._sync = await asyncio.to_thread(
                        conveyor.connect, url, migrate=False, **self._options
                    )
                except BaseException:
                    await self.close()
                    raise
        if self._wants_api:
            assert self._sync is not None
            self._api = create_app(self._sync, tokens=self._tokens, limits=self._limits)
        return self._queue

    async def close(self) -> None:
        queue, sync = self._queue, self._sync
        self._queue = self._sync = self._api = None
        if queue is not None:
            await queue.close()  # on SQLite, this closes the API's queue too
        if sync is not None and sync.dialect != "sqlite":
            await asyncio.to_thread(sync.close)

    # -- what handlers use ----------------------------------------------------------------
    @property
    def queue(self) -> AsyncQueue:
        """The open queue; outside the lifespan, a ``ConfigurationError``."""
        if self._queue is None:
            raise ConfigurationError(
                "the conveyor queue is not open: pass lifespan=conveyor_.lifespan to FastAPI "
                "(or enter it from your own lifespan)"
            )
        return self._queue

    async def __call__(self) -> AsyncQueue:
        """The dependency: ``queue: Annotated[AsyncQueue, Depends(conveyor_)]``."""
        return self.queue

    def api(self) -> ASGIApp:
        """conveyor's HTTP API and dashboard, to mount: ``app.mount("/queue",
        conveyor_.api())`` (before the application starts). It is built when the
        lifespan opens the queue (until then it answers 503) and works under any mount
        path."""
        self._wants_api = True
        return _Mounted(self)


class _Mounted:
    """Forwards to the HTTP service once the lifespan has built it."""

    def __init__(self, owner: Conveyor) -> None:
        self._owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._owner._api
        if app is not None:
            await app(scope, receive, send)
        elif scope["type"] == "http":
            response = error_response(
                503, "unavailable", "the queue is not open (the application's lifespan has not run)"
            )
            await response(scope, receive, send)


__all__ = ["Conveyor"]
