"""pgqueuer on PostgreSQL (fsync on), through its psycopg driver.

Enqueue one is ``Queries.enqueue`` of one job; bulk passes lists of 1,000. Its drains
(its runner in worker processes, at ``batch_size`` 10 and 100) are in
``benchmarks.drains``."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from benchmarks.harness import Timed, pg_database, time_calls_async

CHUNK = 1000


class PgQueuerPeer:
    name = "pgqueuer"
    backend = "postgresql"

    def __init__(self, pg_url: str) -> None:
        self.pg_url = pg_url
        logging.getLogger("pgqueuer").setLevel(logging.WARNING)

    @staticmethod
    async def _open(url: str) -> tuple[Any, Any]:
        import psycopg
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries

        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        queries = Queries(PsycopgDriver(conn))
        await queries.install()
        return conn, queries

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        async def run(url: str) -> Timed:
            conn, queries = await self._open(url)

            async def put(i: int) -> Any:
                return await queries.enqueue("noop", json.dumps({"i": i}).encode())

            lat: Timed = await time_calls_async(put, n, warmup)
            await conn.close()
            return lat

        with pg_database(self.pg_url) as url:
            return asyncio.run(run(url))

    @staticmethod
    async def _fill(queries: Any, n: int) -> float:
        started = time.perf_counter()
        for start in range(0, n, CHUNK):
            count = min(n, start + CHUNK) - start
            payloads = [json.dumps({"i": i}).encode() for i in range(start, start + count)]
            await queries.enqueue(["noop"] * count, payloads, [0] * count)
        return time.perf_counter() - started

    def bulk(self, n: int) -> float | None:
        async def run(url: str) -> float:
            conn, queries = await self._open(url)
            took = await self._fill(queries, n)
            await conn.close()
            return took

        with pg_database(self.pg_url) as url:
            return asyncio.run(run(url))
