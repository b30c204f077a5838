"""``raise conveyor.Snooze(delay)``: the job goes back to pending for ``delay`` without
spending an attempt or recording an error; in a worker, in ``app.drain()`` and in
immediate mode, on both databases."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import conveyor
from conveyor import Status
from tests.worker.conftest import running
from tests.worker.procs import wait_for


def test_snooze_in_a_worker_keeps_the_attempts(q: conveyor.Queue) -> None:
    app = conveyor.App(q)
    runs: dict[int, int] = {}

    @app.task(max_attempts=1)
    def wait_for_supplier(ctx: conveyor.Context) -> int:
        runs[ctx.job.id] = runs.get(ctx.job.id, 0) + 1
        if runs[ctx.job.id] <= 3:
            raise conveyor.Snooze(timedelta(milliseconds=50))
        return ctx.attempt

    @app.task
    async def wait_async(ctx: conveyor.Context) -> str:
        runs[ctx.job.id] = runs.get(ctx.job.id, 0) + 1
        if runs[ctx.job.id] == 1:
            raise conveyor.Snooze(0.05)
        return "done"

    job = wait_for_supplier.enqueue()
    other = wait_async.enqueue()
    with running(app, concurrency=2) as worker:
        assert wait_for(lambda: q.stats().completed == 2, 30)
    stats = worker.stats
    done = q.get(job.id)
    assert done is not None and done.status == Status.COMPLETED
    assert done.result == 1 and done.attempts == 1  # one attempt, however many snoozes
    assert done.error is None and done.errors == ()
    assert runs[job.id] == 4
    assert q.get(other.id).status == Status.COMPLETED  # type: ignore[union-attr]
    assert stats.snoozed == 4 and stats.retried == 0 and stats.failed == 0


def test_snooze_in_drain_and_immediate_mode() -> None:
    app = conveyor.App(immediate=True)
    ready = {"now": False}

    @app.task(max_attempts=1)
    def poll(ctx: conveyor.Context) -> str:
        if not ready["now"]:
            raise conveyor.Snooze(0.05)
        return "ok"

    job = poll.enqueue()
    assert job.status == Status.PENDING and job.attempts == 0
    assert job.run_at > job.updated_at  # not before its delay
    assert app.drain() == 0  # nothing claimable yet
    ready["now"] = True
    time.sleep(0.06)
    assert app.drain() == 1
    done = app.queue.get(job.id)
    assert done is not None and done.status == Status.COMPLETED and done.attempts == 1


def test_a_bad_snooze_delay_fails_the_attempt_saying_why() -> None:
    app = conveyor.App(immediate=True)

    @app.task(max_attempts=1)
    def broken(ctx: conveyor.Context) -> None:
        raise conveyor.Snooze(-1)

    job = broken.enqueue()
    assert job.status == Status.FAILED
    assert job.error is not None and "Snooze(delay)" in job.error
    with pytest.raises(conveyor.InvalidArgument, match="Snooze"):
        conveyor.Snooze("soon")  # type: ignore[arg-type]
    assert conveyor.Snooze(timedelta(minutes=1)).delay == 60.0
