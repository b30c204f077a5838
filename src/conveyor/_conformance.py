"""Read by mypy, never imported: each queue class implements the whole contract.

Subclassing the contract makes mypy check every override against the contract's
signature; building one here makes it prove that no operation is left abstract."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from conveyor.aio.client import AsyncRemoteQueue
    from conveyor.aio.contract import AsyncQueueAPI
    from conveyor.aio.queue import AsyncQueue
    from conveyor.client import RemoteQueue
    from conveyor.contract import QueueAPI
    from conveyor.drivers.aio import AsyncDriver
    from conveyor.drivers.base import Driver
    from conveyor.queue import Queue

    def queues(backend: Driver, http: httpx.Client) -> list[QueueAPI]:
        return [Queue(backend), RemoteQueue("http://queue", http=http)]

    def async_queues(backend: AsyncDriver, http: httpx.AsyncClient) -> list[AsyncQueueAPI]:
        return [AsyncQueue(backend), AsyncRemoteQueue("http://queue", http=http)]
