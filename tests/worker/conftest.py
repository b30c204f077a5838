"""Fixtures for the worker tests: an ``App`` on each database, and a worker run on a
thread of the test process (signals are the process tests' business)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import conveyor
from conveyor.worker import WorkerStats


@pytest.fixture
def app(q: conveyor.Queue) -> conveyor.App:
    """An app on the test's queue (both databases)."""
    return conveyor.App(q)


def burst(app: conveyor.App, **options: Any) -> WorkerStats:
    """Run a worker until no job is claimable and none is running."""
    options.setdefault("concurrency", 4)
    return app.run_worker(burst=True, install_signals=False, **options)


@contextmanager
def running(app: conveyor.App, **options: Any) -> Iterator[conveyor.Worker]:
    """A worker running on a thread for the duration of the block, then stopped."""
    options.setdefault("install_signals", False)
    options.setdefault("grace", 5.0)
    worker = app.worker(**options)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive(), "the worker did not stop"
    if errors:
        raise errors[0]
