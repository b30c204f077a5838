"""procrastinate on PostgreSQL (fsync on), through its psycopg connector.

Enqueue one is ``defer_async`` (one INSERT, one commit); bulk is ``batch_defer_async``.
Its drains (``procrastinate worker`` processes) are in ``benchmarks.drains``."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from benchmarks.harness import Timed, pg_database, time_calls_async

CHUNK = 1000


class ProcrastinatePeer:
    name = "procrastinate"
    backend = "postgresql"

    def __init__(self, pg_url: str) -> None:
        self.pg_url = pg_url
        logging.getLogger("procrastinate").setLevel(logging.WARNING)

    @staticmethod
    def _app(url: str) -> tuple[Any, Any]:
        import procrastinate

        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

        @app.task(name="noop", queue="bench")
        async def noop(i: int) -> None:
            pass

        return app, noop

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        async def run(url: str) -> Timed:
            app, noop = self._app(url)
            async with app.open_async():
                await app.schema_manager.apply_schema_async()

                async def defer(i: int) -> Any:
                    return await noop.defer_async(i=i)

                lat: Timed = await time_calls_async(defer, n, warmup)
            return lat

        with pg_database(self.pg_url) as url:
            return asyncio.run(run(url))

    @staticmethod
    async def _fill(noop: Any, n: int) -> float:
        started = time.perf_counter()
        for start in range(0, n, CHUNK):
            await noop.batch_defer_async(*({"i": i} for i in range(start, min(n, start + CHUNK))))
        return time.perf_counter() - started

    def bulk(self, n: int) -> float | None:
        async def run(url: str) -> float:
            app, noop = self._app(url)
            async with app.open_async():
                await app.schema_manager.apply_schema_async()
                return await self._fill(noop, n)

        with pg_database(self.pg_url) as url:
            return asyncio.run(run(url))
