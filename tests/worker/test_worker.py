"""The worker on a thread of the test process: running tasks, classifying their
endings, batching, leases, timeouts, stopping (both databases)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

import conveyor
from conveyor import App, Context
from conveyor.job import ErrorKind, Status
from conveyor.worker.runtime import MAX_AUTO_PREFETCH
from tests.worker.conftest import burst, running
from tests.worker.procs import wait_for


def test_burst_runs_every_job_and_stores_results(app: App, q: conveyor.Queue) -> None:
    @app.task
    def square(ctx: Context, n: int) -> dict[str, int]:
        return {"square": n * n}

    jobs = square.enqueue_many([{"n": n} for n in range(30)])
    stats = burst(app)
    assert (stats.claimed, stats.completed, stats.failed) == (30, 30, 0)
    for job in jobs:
        done = q.get(job.id)
        assert done is not None and done.status == Status.COMPLETED
        assert done.result == {"square": job.payload["n"] ** 2}


def test_endings_follow_retry_terminal_and_the_task_classification(
    app: App, q: conveyor.Queue
) -> None:
    @app.task(max_attempts=3)
    def later(ctx: Context) -> None:
        raise conveyor.Retry("not yet", delay=3600)

    @app.task(max_attempts=3)
    def refuse(ctx: Context) -> None:
        raise conveyor.Terminal("bad input")

    @app.task(max_attempts=3, retry_on=(TimeoutError,), backoff=conveyor.Fixed(0))
    def picky(ctx: Context, fatal: bool) -> None:
        raise (KeyError("nope") if fatal else TimeoutError("slow"))

    retried, refused = later.enqueue(), refuse.enqueue()
    fatal, transient = picky.enqueue(fatal=True), picky.enqueue(fatal=False)
    burst(app)

    job = q.get(retried.id)
    assert job and (job.status, job.error_kind, job.attempts) == (Status.PENDING, "retryable", 1)
    assert job.error == "Retry: not yet" and job.run_at > q.now() + timedelta(minutes=59)
    job = q.get(refused.id)
    assert job and (job.status, job.error_kind, job.attempts) == (Status.FAILED, "terminal", 1)
    job = q.get(fatal.id)
    assert job and (job.status, job.error_kind, job.attempts) == (Status.FAILED, "terminal", 1)
    assert job.error and job.error.startswith("KeyError: 'nope'") and "Traceback" in job.error
    job = q.get(transient.id)  # retried without delay until its attempts ran out
    assert job and (job.status, job.error_kind, job.attempts) == (Status.FAILED, "retryable", 3)


def test_a_result_that_is_not_json_fails_the_job_for_good(app: App, q: conveyor.Queue) -> None:
    @app.task
    def odd(ctx: Context) -> object:
        return object()

    @app.task
    def fine(ctx: Context) -> int:
        return 1

    bad, good = odd.enqueue(), fine.enqueue()
    burst(app)
    job = q.get(bad.id)
    assert job and job.status == Status.FAILED and job.error_kind == ErrorKind.TERMINAL
    assert "cannot store" in (job.error or "")
    assert q.get(good.id).status == Status.COMPLETED  # type: ignore[union-attr]


def test_unknown_tasks_and_payloads_that_do_not_fit_fail_with_a_reason(
    app: App, q: conveyor.Queue
) -> None:
    @app.task(name="known")
    def known(ctx: Context, a: int) -> int:
        return a

    stranger = q.enqueue("unknown.task", {}, max_attempts=1)
    misfit = q.enqueue("known", {"b": 1})
    burst(app, queues=["default"])
    job = q.get(stranger.id)
    assert (
        job and job.status == Status.FAILED and "no task named 'unknown.task'" in (job.error or "")
    )
    job = q.get(misfit.id)
    assert job and job.status == Status.FAILED and job.error_kind == ErrorKind.TERMINAL
    assert "does not fit task known" in (job.error or "")


def test_async_tasks_run_concurrently_on_the_event_loop(app: App, q: conveyor.Queue) -> None:
    active, peak = [0], [0]

    @app.task
    async def nap(ctx: Context, n: int) -> int:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        await asyncio.sleep(0.2)
        active[0] -= 1
        return n

    nap.enqueue_many([{"n": n} for n in range(6)])
    stats = burst(app, concurrency=6)
    assert stats.completed == 6
    assert peak[0] > 1


@pytest.mark.parametrize("prefetch", [0, None, 3])
def test_claims_fill_free_slots_plus_prefetch_and_endings_are_written_in_batches(
    app: App, q: conveyor.Queue, prefetch: int | None
) -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    @app.task
    def gated(ctx: Context) -> None:
        started.release()
        release.wait(10)

    limits: list[int] = []
    batches: list[int] = []
    claim, report = q.claim, q.report

    def spy_claim(*args: Any, **kwargs: Any) -> Any:
        limits.append(kwargs["limit"])
        if kwargs.get("report"):  # endings written in the claim's own transaction
            batches.append(len(kwargs["report"].completed))
        return claim(*args, **kwargs)

    def spy_report(**kwargs: Any) -> Any:
        batches.append(len(kwargs["completed"]))
        return report(**kwargs)

    q.claim, q.report = spy_claim, spy_report  # type: ignore[method-assign]
    gated.enqueue_many([{} for _ in range(12)])
    ahead = 5 if prefetch is None else prefetch  # the default: as many as concurrency
    with running(app, concurrency=5, prefetch=prefetch):
        for _ in range(5):
            assert started.acquire(timeout=10)
        # Every slot is busy, and the jobs claimed ahead wait for one.
        assert wait_for(lambda: q.stats().running == 5 + ahead, 10)
        assert not started.acquire(timeout=0.3)
        before_release = len(limits)
        release.set()
        assert wait_for(lambda: q.stats().completed == 12, 20)
    assert limits[0] == 5 + ahead  # the first claim fills every slot, and claims ahead
    assert max(limits[:before_release]) <= 5 + ahead
    # Once jobs end, the default prefetch follows the pace (up to its bound); a set one holds.
    assert max(limits) <= 5 + (MAX_AUTO_PREFETCH if prefetch is None else prefetch)
    assert sum(batches) == 12 and len(batches) < 12  # several endings per statement


def test_heartbeats_keep_a_long_task_its_lease(app: App, q: conveyor.Queue) -> None:
    @app.task
    def long(ctx: Context) -> str:
        time.sleep(2.0)  # four leases long
        return "kept"

    job = long.enqueue()
    rescues = []
    with running(app, lease=0.5):
        deadline = time.monotonic() + 20
        while q.get(job.id).status != Status.COMPLETED and time.monotonic() < deadline:  # type: ignore[union-attr]
            rescues.append(q.recover())  # a rescuer on another machine, working hard
            time.sleep(0.05)
    done = q.get(job.id)
    assert done and (done.status, done.result, done.attempts) == (Status.COMPLETED, "kept", 1)
    assert sum(rescues) == 0


def test_a_task_is_told_when_its_claim_is_reset_and_its_ending_is_refused(
    app: App, q: conveyor.Queue
) -> None:
    seen: list[tuple[bool, str | None, str]] = []

    @app.task(max_attempts=5)
    def patient(ctx: Context) -> str:
        if ctx.attempt == 1:
            ctx.lost.wait(20)
            try:
                ctx.progress(completed=1)
                outcome = "written"
            except conveyor.StaleClaim:
                outcome = "refused"
            seen.append((ctx.cancelled, ctx.reason, outcome))
            return "late"
        return "second run"

    job = patient.enqueue()
    with running(app, lease=0.6) as worker:
        assert wait_for(lambda: q.get(job.id).status == Status.RUNNING, 10)  # type: ignore[union-attr]
        first = q.get(job.id)
        assert first is not None and first.claim_id
        assert q.release(first.claim_id) == 1  # an admin resets the claim
        assert wait_for(lambda: q.get(job.id).status == Status.COMPLETED, 20)  # type: ignore[union-attr]
        assert wait_for(lambda: bool(seen), 10)
    cancelled, reason, outcome = seen[0]
    assert cancelled and outcome == "refused" and reason and "claim lost" in reason
    assert first.claim_id not in reason  # claim ids never appear in a reason
    done = q.get(job.id)
    assert done and done.result == "second run" and done.attempts == 2
    assert worker.stats.leases_lost == 1


def test_a_running_task_is_told_when_its_job_is_cancelled(app: App, q: conveyor.Queue) -> None:
    reasons: list[str | None] = []

    @app.task
    def wait_to_be_cancelled(ctx: Context) -> None:
        ctx.lost.wait(20)
        reasons.append(ctx.reason)

    job = wait_to_be_cancelled.enqueue()
    with running(app, lease=0.6):
        assert wait_for(lambda: q.get(job.id).status == Status.RUNNING, 10)  # type: ignore[union-attr]
        q.cancel(job.id)
        assert wait_for(lambda: bool(reasons), 10)
    assert "cancelled" in (reasons[0] or "")
    assert q.get(job.id).status == Status.CANCELLED  # type: ignore[union-attr]


def test_an_overrunning_task_fails_its_attempt_and_the_job_runs_again(
    app: App, q: conveyor.Queue
) -> None:
    told = threading.Event()

    @app.task(timeout=0.3, max_attempts=2, backoff=conveyor.Fixed(0))
    def slow_once(ctx: Context) -> str:
        if ctx.attempt == 1:
            if ctx.lost.wait(10):
                told.set()
            time.sleep(0.2)  # then ignores the news for a while, like real code
            return "too late"
        return "in time"

    @app.task(timeout=0.3, max_attempts=1)
    async def slow_async(ctx: Context) -> None:
        await asyncio.sleep(30)  # cancelled at the timeout

    sync_job, async_job = slow_once.enqueue(), slow_async.enqueue()
    stats = burst(app)
    assert told.is_set()
    done = q.get(sync_job.id)
    assert done and (done.status, done.result, done.attempts) == (Status.COMPLETED, "in time", 2)
    failed = q.get(async_job.id)
    assert (
        failed and failed.status == Status.FAILED and "timed out after 0.3s" in (failed.error or "")
    )
    assert stats.timeouts == 2


def test_stop_lets_running_tasks_finish_within_the_grace_period(
    app: App, q: conveyor.Queue
) -> None:
    started = threading.Event()

    @app.task
    def short(ctx: Context) -> str:
        started.set()
        time.sleep(0.3)
        return "finished"

    job = short.enqueue()
    with running(app, grace=10) as worker:
        assert started.wait(10)
    done = q.get(job.id)
    assert done and done.status == Status.COMPLETED and worker.stats.released == 0


def test_stop_releases_jobs_still_running_after_the_grace_period(
    app: App, q: conveyor.Queue
) -> None:
    started = threading.Event()
    told: list[str | None] = []

    @app.task
    def endless(ctx: Context) -> None:
        started.set()
        ctx.lost.wait(20)
        told.append(ctx.reason)

    job = endless.enqueue()
    with running(app, grace=0.2) as worker:
        assert started.wait(10)
    released = q.get(job.id)
    assert released and released.status == Status.PENDING and released.claim_id is None
    assert worker.stats.released == 1
    assert wait_for(lambda: bool(told), 5) and "released" in (told[0] or "")


def test_a_worker_wakes_for_jobs_enqueued_while_it_is_idle(app: App, q: conveyor.Queue) -> None:
    @app.task
    def hello(ctx: Context) -> str:
        return "hi"

    with running(app):
        time.sleep(0.5)  # long enough for polling to back off
        job = hello.enqueue()
        assert wait_for(lambda: q.get(job.id).status == Status.COMPLETED, 10)  # type: ignore[union-attr]


def test_a_worker_serves_each_of_its_queues(app: App, q: conveyor.Queue) -> None:
    @app.task(queue="high")
    def high(ctx: Context) -> str:
        return "high"

    @app.task(queue="low")
    def low(ctx: Context) -> str:
        return "low"

    for _ in range(5):
        high.enqueue()
        low.enqueue()
    assert burst(app).completed == 10
    assert burst(app, queues=["low"]).claimed == 0


@pytest.mark.parametrize("backend_name", ["sqlite"], indirect=True)
def test_a_worker_outlasts_a_locked_sqlite_database(tmp_path: Any, backend_name: str) -> None:
    import sqlite3

    path = tmp_path / "locked.db"
    app = App(f"sqlite:///{path}?timeout=0.05")

    @app.task
    def hello(ctx: Context) -> str:
        return "hi"

    job = hello.enqueue()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # every write (and read) now fails with "locked"
    try:
        with running(app) as worker:
            assert wait_for(lambda: worker.stats.db_errors > 0, 10)
            blocker.execute("COMMIT")
            assert wait_for(lambda: app.queue.get(job.id).status == Status.COMPLETED, 10)  # type: ignore[union-attr]
    finally:
        blocker.close()
        app.close()


def test_sync_tasks_share_at_most_concurrency_threads(q: conveyor.Queue) -> None:
    app = App(q)
    threads: set[str] = set()

    @app.task
    def note(ctx: Context, n: int) -> int:
        threads.add(threading.current_thread().name)
        return n

    note.enqueue_many({"n": n} for n in range(60))
    app.run_worker(burst=True, concurrency=4, install_signals=False)
    assert q.stats().completed == 60
    assert 1 <= len(threads) <= 4, threads  # reused, never one per job


def test_a_deliberate_cancel_is_logged_at_info_not_as_a_warning(
    app: App, q: conveyor.Queue, caplog: pytest.LogCaptureFixture
) -> None:
    told = threading.Event()

    @app.task
    def long_one(ctx: Context) -> str:
        ctx.lost.wait(20)
        told.set()
        return "late"

    job = long_one.enqueue()
    with caplog.at_level("INFO", logger="conveyor"), running(app, lease=0.6) as worker:
        assert wait_for(lambda: q.get(job.id).status == Status.RUNNING, 10)  # type: ignore[union-attr]
        q.cancel(job.id)
        assert told.wait(10)
        assert wait_for(lambda: worker.stats.stale_refused == 1, 10)
    about = [r for r in caplog.records if f"job {job.id}" in r.getMessage()]
    assert about, caplog.text
    assert all(r.levelname == "INFO" for r in about), caplog.text
    assert any("cancelled" in r.getMessage() for r in about)
    assert q.get(job.id).status == Status.CANCELLED  # type: ignore[union-attr]
