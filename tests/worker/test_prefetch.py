"""Jobs claimed ahead of a free slot (prefetch), on both databases: their leases are
renewed while they wait, a stop gives them back at once (their attempt not spent), and a
killed worker's come back through the rescuer. Waits are bounded, never timed."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import conveyor
from conveyor import App, Context
from conveyor.job import Status
from tests.worker.conftest import burst, running
from tests.worker.procs import WorkerProcess, effects, start_worker, wait_for

SHUTDOWN_APP = "tests.worker.apps:shutdown"


def spawn(workers: list[WorkerProcess], url: str, tmp: Path, *args: str) -> WorkerProcess:
    return start_worker(workers, SHUTDOWN_APP, url, tmp, *args)


def starts(tmp: Path) -> list[int]:
    """Ids of the jobs whose task started, in order (one entry per run)."""
    return [int(line.split()[1]) for line in effects(tmp / "effects.txt") if line[:5] == "start"]


def test_jobs_waiting_for_a_slot_keep_their_leases(app: App, q: conveyor.Queue) -> None:
    release = threading.Event()
    ran: list[int] = []

    @app.task
    def hold(ctx: Context) -> None:
        ran.append(ctx.job.id)
        release.wait(10)

    jobs = [hold.enqueue() for _ in range(3)]
    rescued = []
    with running(app, concurrency=1, prefetch=2, lease=0.5):
        assert wait_for(lambda: q.stats().running == 3, 10)  # one runs, two wait
        assert wait_for(lambda: len(ran) == 1, 10)
        # Four leases long, with a rescuer on another machine working hard meanwhile.
        stop_at = threading.Event()
        threading.Timer(2.0, stop_at.set).start()
        while not stop_at.is_set():
            rescued.append(q.recover())
            stop_at.wait(0.05)
        assert q.stats().running == 3  # the waiting jobs are still this worker's
        release.set()
        assert wait_for(lambda: q.stats().completed == 3, 20)
    assert sum(rescued) == 0
    for job in jobs:
        done = q.get(job.id)
        assert done is not None and done.status == Status.COMPLETED and done.attempts == 1
    assert sorted(ran) == sorted(j.id for j in jobs)  # each ran exactly once


def test_a_burst_drain_with_prefetch_runs_every_job_exactly_once(
    app: App, q: conveyor.Queue
) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    @app.task
    def note(ctx: Context, i: int) -> int:
        with lock:
            seen.append(i)
        return i

    @app.task
    async def note_async(ctx: Context, i: int) -> int:
        with lock:
            seen.append(i)
        return i

    note.enqueue_many([{"i": i} for i in range(300)])
    note_async.enqueue_many([{"i": i} for i in range(300, 600)])
    stats = burst(app, concurrency=4, prefetch=50)
    assert sorted(seen) == list(range(600))
    assert stats.completed == 600 and stats.claimed == 600
    counts = q.stats()
    assert counts.completed == 600 and not counts.pending and not counts.running
    assert all(j.attempts == 1 for j in q.jobs(limit=1000))


def test_sigterm_releases_the_jobs_claimed_ahead_at_once(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    first = q.enqueue("shutdown.nap", {"seconds": 3})
    ahead = [q.enqueue("shutdown.nap", {"seconds": 3}) for _ in range(3)]
    args = ("--concurrency", "1", "--prefetch", "3", "--grace", "20", "--lease", "30")
    proc = spawn(workers, db_url, tmp_path, *args)
    assert wait_for(lambda: starts(tmp_path) == [first.id], 30), proc.log()
    assert wait_for(lambda: q.stats().running == 4, 10), proc.log()
    proc.signal(signal.SIGTERM)
    # Given back while the running task still has its grace period to finish.
    assert wait_for(lambda: q.stats().pending == 3, 10), proc.log()
    assert q.get(first.id).status == Status.RUNNING  # type: ignore[union-attr]
    for job in ahead:
        back = q.get(job.id)
        assert back and back.status == Status.PENDING and back.claim_id is None
        assert back.attempts == 0  # never started: no attempt spent
    assert proc.wait(30) == 0, proc.log()
    assert "released 3 job(s) claimed ahead" in proc.log()
    assert q.get(first.id).status == Status.COMPLETED  # type: ignore[union-attr]
    assert starts(tmp_path) == [first.id]  # none of the released ones ran here


def test_a_killed_workers_jobs_claimed_ahead_come_back_through_the_rescuer(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    first = q.enqueue("shutdown.nap", {"seconds": 60})
    ahead = [q.enqueue("shutdown.nap", {"seconds": 60}) for _ in range(3)]
    args = ("--concurrency", "1", "--prefetch", "3", "--lease", "1", "--grace", "1")
    doomed = spawn(workers, db_url, tmp_path, *args)
    assert wait_for(lambda: starts(tmp_path) == [first.id], 30), doomed.log()
    assert wait_for(lambda: q.stats().running == 4, 10), doomed.log()
    doomed.kill()
    # Another worker's rescuer finds the expired leases; it runs each job once more.
    rescuer = spawn(workers, db_url, tmp_path, "--concurrency", "4", *args[2:])
    everything = [first, *ahead]
    assert wait_for(
        lambda: all(q.get(j.id).status == Status.COMPLETED for j in everything),  # type: ignore[union-attr]
        30,
    ), rescuer.log()
    runs = starts(tmp_path)
    assert sorted(runs) == sorted([first.id, *(j.id for j in everything)])
    assert q.get(first.id).attempts == 2  # type: ignore[union-attr]
    for job in ahead:  # claimed once by the killed worker without running, then run once
        assert runs.count(job.id) == 1
        assert q.get(job.id).attempts == 2  # type: ignore[union-attr]


def test_by_default_short_tasks_are_claimed_ahead_in_larger_batches(
    app: App, q: conveyor.Queue
) -> None:
    @app.task
    def quick(ctx: Context, i: int) -> int:
        return i

    limits: list[int] = []
    claim = q.claim

    def spy_claim(*args: object, **kwargs: object) -> object:
        limits.append(kwargs["limit"])  # type: ignore[arg-type]
        return claim(*args, **kwargs)  # type: ignore[arg-type]

    q.claim = spy_claim  # type: ignore[assignment, method-assign]
    quick.enqueue_many([{"i": i} for i in range(3000)])
    stats = burst(app, concurrency=2)
    assert stats.completed == 3000
    assert limits[0] == 4  # before any pace is known: the slots, and as many ahead
    assert max(limits) > 4  # then as many as the pace calls for
    assert max(limits) <= 2 + 1000


def test_no_job_is_claimed_ahead_from_a_queue_under_flow_control(
    app: App, q: conveyor.Queue
) -> None:
    release = threading.Event()

    @app.task(queue="capped")
    def hold(ctx: Context) -> None:
        release.wait(10)

    q.set_limits("capped", max_running=3)
    hold.enqueue_many([{} for _ in range(6)])
    with running(app, concurrency=1, prefetch=5):
        assert wait_for(lambda: q.stats("capped").running == 1, 10)
        # Places under the cap stay free for other workers: none is held here waiting.
        assert not wait_for(lambda: q.stats("capped").running > 1, 1.0)
        release.set()
        assert wait_for(lambda: q.stats("capped").completed == 6, 20)
