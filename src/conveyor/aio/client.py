"""``AsyncRemoteQueue``: the queue contract for asyncio, spoken to a ``conveyor serve``
server over httpx. The twin of ``conveyor.client.RemoteQueue``: the same requests, the
same answers, the same exceptions, and the same retries of the calls that create jobs
(sent again with the same ``Idempotency-Key`` when their answer is lost)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx

from conveyor.aio.contract import AsyncQueueAPI
from conveyor.client import (
    CREATE_ATTEMPTS,
    answer,
    content_headers,
    decode,
    encode_body,
    idempotency_key,
    missing_is_none,
    query_params,
    request_for,
    retry_pause,
    should_retry,
    watch_request,
    watch_result,
)
from conveyor.errors import DatabaseError, InvalidArgument, JobNotFound
from conveyor.job import Job
from conveyor.ops import Call
from conveyor.ops.defaults import Defaults

T = TypeVar("T")


class AsyncRemoteQueue(AsyncQueueAPI):
    """A queue behind a conveyor HTTP server, for asyncio. ``http``: an
    ``httpx.AsyncClient`` of your own (``url`` and ``token`` are then ignored)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        worker_name: str | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.defaults = Defaults() if worker_name is None else Defaults(worker_name=worker_name)
        if http is None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)
        self._http = http

    async def close(self) -> None:
        await self._http.aclose()

    async def _run(self, call: Call[T]) -> T:
        if call.conn is not None:
            raise InvalidArgument("conn: a remote queue cannot join a local database transaction")
        method, path, body, query = request_for(call.op, call.args)
        try:
            data, status = await self._send(method, path, body, query, key=idempotency_key(call.op))
        except JobNotFound:
            if missing_is_none(call.op):
                return None  # type: ignore[return-value]
            raise
        result: T = decode(call.op, data, status)
        return result

    async def _watch(self, job_id: int, left: float | None, poll: float) -> Job | None:
        method, path, query, slice_s = watch_request(job_id, left)
        data, _ = await self._send(method, path, None, query, timeout=self.timeout + slice_s)
        return watch_result(data, left)

    async def _send(
        self,
        method: str,
        path: str,
        body: Any,
        query: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
        key: str | None = None,
    ) -> tuple[Any, int]:
        content = encode_body(body)
        headers = content_headers(method, content, key)
        attempts = CREATE_ATTEMPTS if key is not None else 1
        for attempt in range(attempts):
            try:
                response = await self._http.request(
                    method, path, content=content, headers=headers, params=query_params(query),
                    timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
                )  # fmt: skip
            except httpx.TransportError as exc:
                if attempt + 1 < attempts:
                    await asyncio.sleep(retry_pause(attempt))
                    continue
                raise DatabaseError(
                    f"cannot reach the conveyor server at {self.url}: {exc}"
                ) from None
            if attempt + 1 < attempts and should_retry(response):
                await asyncio.sleep(retry_pause(attempt, response))
                continue
            return answer(response, method, path)
        raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["AsyncRemoteQueue"]
