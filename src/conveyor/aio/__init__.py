"""conveyor for asyncio: the same contract, every operation a coroutine.

    import conveyor.aio

    q = await conveyor.aio.connect("postgresql://…/jobs")
    job = await q.enqueue("emails.send", {"to": "ada@example.com"})
    done = await q.wait(job.id, timeout=30)

``AsyncQueue`` talks to the database (psycopg's async pool on PostgreSQL, aiomysql's on
MySQL; a worker thread on SQLite, which has no asynchronous driver);
``conveyor.aio.client``'s ``AsyncRemoteQueue`` talks to a ``conveyor serve`` server over
httpx.
"""

from __future__ import annotations

import asyncio
from typing import Any

import conveyor
from conveyor.aio.contract import AsyncQueueAPI
from conveyor.aio.queue import AsyncQueue
from conveyor.config import database_url, parse_url
from conveyor.drivers.aio import AsyncDriver
from conveyor.errors import ConfigurationError
from conveyor.ops.defaults import Defaults

_QUEUE_KEYS = ("default_max_attempts", "backoff", "worker_name")


async def connect(
    url: str | None = None,
    *,
    migrate: bool = True,
    schema: str | None = None,
    use_env: bool = True,
    **options: Any,
) -> AsyncQueue:
    """Open the queue for asyncio and bring its schema up to date: the URL, its
    precedence (``$CONVEYOR_DATABASE_URL`` beats ``url`` unless ``use_env=False``) and
    the options of ``conveyor.connect``."""
    target = database_url(url) if use_env or url is None else url
    settings = parse_url(target, schema=schema, **{k: v for k, v in options.items()
                                                    if k not in _QUEUE_KEYS})  # fmt: skip
    if settings.backend == "sqlite":
        queue = await asyncio.to_thread(
            conveyor.connect, target, migrate=migrate, schema=schema, use_env=False, **options
        )
        return AsyncQueue(queue)
    backend: AsyncDriver
    if settings.backend == "mysql":
        try:  # PyMySQL and aiomysql are an optional extra
            from conveyor.drivers.mysql.aio import AsyncMySQLDriver
        except ImportError as exc:
            raise ConfigurationError(
                f"MySQL needs PyMySQL and aiomysql: pip install 'conveyor[mysql]' ({exc})"
            ) from None
        mysql = AsyncMySQLDriver(settings.target, **settings.backend_options)
        backend, opening = mysql, mysql.open
    else:
        try:  # psycopg is an optional extra: imported when a PostgreSQL URL asks for it
            from conveyor.drivers.postgres.aio import AsyncPostgresDriver
        except ImportError as exc:
            raise ConfigurationError(
                "PostgreSQL needs psycopg 3 and psycopg_pool: "
                f"pip install 'conveyor[postgres]' ({exc})"
            ) from None
        postgres = AsyncPostgresDriver(settings.target, **settings.backend_options)
        backend, opening = postgres, postgres.open
    if migrate:  # migrations take their lock on a short-lived synchronous connection
        migrated = await asyncio.to_thread(
            conveyor.connect, target, migrate=True, schema=schema, use_env=False, **options
        )
        await asyncio.to_thread(migrated.close)
    await opening()
    queue_options = {k: options[k] for k in _QUEUE_KEYS if k in options}
    defaults = Defaults(
        max_payload_bytes=settings.queue_options["max_payload_bytes"],
        max_attempts=queue_options.get("default_max_attempts", Defaults().max_attempts),
        **{k: v for k, v in queue_options.items() if k != "default_max_attempts"},
    )
    return AsyncQueue(backend, defaults=defaults)


__all__ = ["AsyncQueue", "AsyncQueueAPI", "connect"]
