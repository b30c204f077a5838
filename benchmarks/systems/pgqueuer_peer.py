"""pgqueuer on PostgreSQL (fsync on), through its psycopg driver.

Enqueue one is ``Queries.enqueue`` of one job; bulk passes lists of 1,000. Drain runs
pgqueuer's own ``QueueManager`` in ``drain`` mode with its default batch size (10):
it picks batches of jobs and writes their completion log in buffered batches. It is also
run with ``batch_size=100`` (drain only), the batch conveyor's drain claims. The clock
runs from the first job's start to the last job's end, leaving out the worker's start-up
and shutdown (a few seconds of fixed cost)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import timedelta
from typing import Any

from benchmarks.harness import Span, pg_database
from conveyor.cli.bench import Latency, verify_once

CHUNK = 1000


class PgQueuerPeer:
    name = "pgqueuer"
    backend = "postgresql"

    def __init__(self, pg_url: str, batch_size: int = 10) -> None:
        self.pg_url = pg_url
        self.batch_size = batch_size
        if batch_size != 10:  # not its default: say so wherever the figure shows
            self.name = f"pgqueuer (batch_size={batch_size})"
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

    def enqueue_one(self, n: int) -> Latency:
        async def run(url: str) -> list[float]:
            conn, queries = await self._open(url)
            took = []
            for i in range(n):
                payload = json.dumps({"i": i}).encode()
                started = time.perf_counter()
                await queries.enqueue("noop", payload)
                took.append(time.perf_counter() - started)
            await conn.close()
            return took

        with pg_database(self.pg_url) as url:
            return Latency.of(asyncio.run(run(url)))

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

    def drain(self, n: int) -> float:
        async def run(url: str) -> tuple[float, list[int]]:
            import psycopg
            from pgqueuer.db import PsycopgDriver
            from pgqueuer.qm import QueueManager
            from pgqueuer.queries import Queries
            from pgqueuer.types import QueueExecutionMode

            conn, queries = await self._open(url)
            await self._fill(queries, n)
            worker_conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
            qm = QueueManager(Queries(PsycopgDriver(worker_conn)))
            ran: list[int] = []
            clock = Span()

            @qm.entrypoint("noop")
            async def noop(job: Any) -> None:
                clock.tick()
                ran.append(json.loads(job.payload)["i"])

            await qm.run(mode=QueueExecutionMode.drain, batch_size=self.batch_size,
                         dequeue_timeout=timedelta(seconds=1))  # fmt: skip
            await worker_conn.close()
            await conn.close()
            return clock.seconds(len(ran)), ran

        with pg_database(self.pg_url) as url:
            took, ran = asyncio.run(run(url))
        verify_once(ran, n, len(ran), what="pgqueuer drain")
        return took
