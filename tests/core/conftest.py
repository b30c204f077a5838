"""The conformance suite runs against every kind of queue: ``Queue`` (the database),
``AsyncQueue`` (asyncio), ``RemoteQueue`` and ``AsyncRemoteQueue`` (a conveyor server
in this process), each on SQLite and PostgreSQL. The asynchronous ones are driven from
the test's thread through a loop of their own, so one test body serves all four.

A test that needs the database queue itself (its caller's-connection enqueue, its
schema) says so with ``@pytest.mark.queue_kinds("queue")``."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import conveyor
import conveyor.aio
from conveyor import Status
from conveyor.aio.client import AsyncRemoteQueue
from conveyor.client import RemoteQueue
from conveyor.drivers import operations as db
from conveyor.web import create_app
from conveyor.web.limits import Limits

QUEUE_KINDS = ("queue", "async", "remote", "async-remote")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "queue_kinds(*kinds): run the test only against these kinds of queue"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        marker = item.get_closest_marker("queue_kinds")
        kind = getattr(item, "callspec", None) and item.callspec.params.get("queue_kind")
        if marker is not None and kind is not None and kind not in marker.args:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


class _Loop:
    """An event loop on a thread of its own, for driving asynchronous queues."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class Blocking:
    """An asynchronous queue seen from synchronous code: each coroutine method runs on
    the loop and its result is waited for."""

    def __init__(self, inner: Any, loop: _Loop) -> None:
        self._inner = inner
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if inspect.iscoroutinefunction(value):

            @functools.wraps(value)
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._loop.run(value(*args, **kwargs))

            return call
        return value

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.run(self._inner.close())


@pytest.fixture(params=QUEUE_KINDS)
def queue_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_queue(queue_kind: str) -> Iterator[Callable[..., Any]]:
    """Opens queues of the test's kind: ``open_queue(url, **options)`` takes what
    ``conveyor.connect`` takes; everything opened is closed after the test."""
    loop = _Loop() if "async" in queue_kind else None
    closers: list[Callable[[], None]] = []

    def open_one(url: str, **options: Any) -> Any:
        if queue_kind == "queue":
            queue = conveyor.connect(url, **options)
            closers.append(queue.close)
            return queue
        if queue_kind == "async":
            assert loop is not None
            blocking = Blocking(loop.run(conveyor.aio.connect(url, **options)), loop)
            closers.append(lambda: blocking.__exit__())
            return blocking
        server_queue = conveyor.connect(url, **options)
        # Tests use leases of a fraction of a second, below a server's usual minimum.
        app = create_app(server_queue, tokens={}, limits=Limits(min_lease_seconds=0.01))
        closers.append(server_queue.close)
        # A server without tokens answers only loopback Host names.
        if queue_kind == "remote":
            client = TestClient(app, base_url="http://127.0.0.1")
            client.__enter__()
            closers.append(lambda: client.__exit__(None, None, None))
            return RemoteQueue(str(client.base_url), http=client)
        assert loop is not None
        local = "http://127.0.0.1"
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=local)
        remote = Blocking(AsyncRemoteQueue(local, http=http), loop)
        closers.append(lambda: remote.__exit__())
        return remote

    yield open_one
    for close in reversed(closers):
        close()
    if loop is not None:
        loop.stop()


@pytest.fixture
def q(open_queue: Callable[..., Any], db_url: str) -> Iterator[Any]:
    """A migrated queue of each kind on each backend. When the test is over, the counts
    the database keeps (``queue_stats``, ``task_stats``) must equal a count of its jobs,
    whatever the test did to them."""
    yield open_queue(db_url)
    with conveyor.connect(db_url) as queue:
        counted, kept = count_jobs(queue), _kept(queue)
    assert kept == counted, "the counts kept disagree with the jobs in the table"


def count_jobs(q: conveyor.Queue) -> dict[tuple[str, str, str], int]:
    """(queue, task, status): how many jobs, counted one by one."""
    counted: Counter[tuple[str, str, str]] = Counter()
    after = None
    while page := q.jobs(limit=1000, after=after):
        counted.update((j.queue, j.task, str(j.status)) for j in page)
        after = page[-1].id
    return dict(counted)


def waiting_deltas(q: conveyor.Queue) -> int:
    """How many count deltas wait to be folded (PostgreSQL and MySQL; SQLite has none)."""
    with q.driver.session(write=False) as s:
        return int(s.run(db.CountDeltas(limit=1_000_000))[0]["n"])


def _kept(q: conveyor.Queue) -> dict[tuple[str, str, str], int]:
    """(queue, task, status): how many jobs, from the counts the database keeps, which
    must also add up to the counts per queue."""
    kept: dict[tuple[str, str, str], int] = {}
    for name, per_queue in q.queue_stats().items():
        per_task = q.task_stats(name)
        for status in Status:
            of_tasks = {task: getattr(s, str(status)) for task, s in per_task.items()}
            assert sum(of_tasks.values()) == getattr(per_queue, str(status)), (name, status)
            kept.update({(name, task, str(status)): n for task, n in of_tasks.items() if n})
    return kept
