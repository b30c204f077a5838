"""Flow control with real ``conveyor worker`` processes on both databases: periodic slots
raced by several schedulers (one of them killed on the way), caps and rates watched
from outside while the workers run, pause, snooze and dependencies.

Waits are bounded, never timed: a test fails on what the jobs show, not on how fast."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import conveyor
from conveyor import Rate, Status
from tests.cli.conftest import cli_env
from tests.worker.procs import REPO, WorkerProcess, effects, start_worker, wait_for

TICKER = "tests.flow.apps:ticker"
FLOW = "tests.flow.apps:flow"


spawn = start_worker


def ready(workers: list[WorkerProcess]) -> None:
    """Wait until every worker process runs its claim loop, so they all race."""
    assert wait_for(lambda: all(", concurrency " in p.log() for p in workers), 60), logs(workers)


def stop(workers: list[WorkerProcess]) -> None:
    for proc in workers:
        proc.signal(signal.SIGTERM)
    for proc in workers:
        if proc.alive():
            assert proc.wait(30) == 0, proc.log()


def logs(workers: list[WorkerProcess]) -> str:
    return "\n".join(p.log()[-3000:] for p in workers)


def running(q: conveyor.Queue, queue: str) -> list[conveyor.Job]:
    return q.jobs(queue=queue, status="running", limit=1000)


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    return max(itertools.accumulate(step for _, step in events), default=0)


def intervals(tmp: Path, group: str | None = None) -> list[tuple[float, float]]:
    starts: dict[str, float] = {}
    spans = []
    for line in effects(tmp / "effects.txt"):
        kind, job, at, job_group = line.split()
        if group is not None and job_group != group:
            continue
        if kind == "start":
            starts[job] = float(at)
        elif kind == "end":
            spans.append((starts.pop(job), float(at)))
    return spans


# -- periodic jobs -------------------------------------------------------------------------
@pytest.mark.slow
def test_many_schedulers_enqueue_each_slot_exactly_once(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """Four worker processes schedule three every-second schedules; one of them is
    SIGKILLed halfway and replaced. Every slot from the first to the last has exactly
    one job: none twice, none lost."""
    args = ("--queues", "ticks", "--concurrency", "2")
    for _ in range(4):
        spawn(workers, TICKER, db_url, tmp_path, *args)

    def per_schedule() -> Counter[str]:
        return Counter(j.payload["schedule"] for j in q.jobs(task="flow.tick", limit=1000))

    assert wait_for(lambda: min(per_schedule().values(), default=0) >= 4, 60), logs(workers)
    workers[0].kill()
    spawn(workers, TICKER, db_url, tmp_path, *args)
    assert wait_for(lambda: min(per_schedule().values(), default=0) >= 9, 60), logs(workers)
    stop(workers)

    jobs = q.jobs(task="flow.tick", limit=1000)
    for schedule in ("a", "b", "c"):
        slots = sorted(j.run_at for j in jobs if j.payload["schedule"] == schedule)
        assert len(slots) == len(set(slots)), f"a slot of {schedule} was enqueued twice"
        gaps = {b - a for a, b in itertools.pairwise(slots)}
        assert gaps == {timedelta(seconds=1)}, f"{schedule}: slots lost or doubled: {gaps}"
        assert all(s.microsecond == 0 for s in slots)
    # The schedules as `conveyor schedules` shows them: the last slot each enqueued.
    shown = subprocess.run(
        [sys.executable, "-m", "conveyor", "schedules", "--json", "--db", db_url],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    import json

    listed = {s["name"]: s for s in json.loads(shown.stdout)["schedules"]}
    assert set(listed) == {"tick-a", "tick-b", "tick-c"}
    for name, info in listed.items():
        last = max(j.run_at for j in jobs if j.payload["schedule"] == name[-1])
        assert info["spec"] == "every 1s" and info["last_slot"] == last.isoformat()
        assert info["next_slot"] == (last + timedelta(seconds=1)).isoformat()


# -- caps ------------------------------------------------------------------------------------
def test_max_running_holds_across_four_worker_processes(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    q.set_limits("capped", max_running=3)
    for _ in range(4):
        # One job each: the fourth worker must be held back by the others' three.
        spawn(workers, FLOW, db_url, tmp_path, "--queues", "capped", "--concurrency", "1")
    ready(workers)
    q.enqueue_many([{"task": "flow.hold", "payload": {"seconds": 0.15}} for _ in range(24)],
                   queue="capped")  # fmt: skip
    samples = []
    deadline = time.monotonic() + 90
    while q.stats("capped").completed < 24 and time.monotonic() < deadline:
        samples.append(len(running(q, "capped")))
        time.sleep(0.01)
    stop(workers)
    assert q.stats("capped").completed == 24, logs(workers)
    assert max(samples) == 3, Counter(samples)  # reached, never passed
    assert max_overlap(intervals(tmp_path)) <= 3  # the tasks themselves agree
    # The three places went to different processes while a fourth asked in vain.
    assert len({j.worker for j in q.jobs(queue="capped", limit=100)}) >= 3


def test_a_group_cap_holds_per_group_while_other_groups_run(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    q.set_limits("books", group_max_running=2)
    items: list[dict[str, Any]] = [
        {"task": "flow.hold", "payload": {"seconds": 0.1}, "group": f"book-{n % 3}"}
        for n in range(30)
    ]
    for _ in range(3):
        spawn(workers, FLOW, db_url, tmp_path, "--queues", "books", "--concurrency", "2")
    ready(workers)
    q.enqueue_many(items, queue="books")
    busiest: Counter[str] = Counter()
    deadline = time.monotonic() + 90
    while q.stats("books").completed < 30 and time.monotonic() < deadline:
        now_running = Counter(j.group for j in running(q, "books"))
        for group, n in now_running.items():
            assert n <= 2, f"{n} jobs of {group} running at once"
            busiest[group] = max(busiest[group], n)  # type: ignore[index]
        time.sleep(0.01)
    stop(workers)
    assert q.stats("books").completed == 30, logs(workers)
    assert max(busiest.values()) == 2, busiest  # the cap was reached, never passed
    for group in ("book-0", "book-1", "book-2"):
        assert max_overlap(intervals(tmp_path, group)) <= 2
    assert max_overlap(intervals(tmp_path)) > 2  # groups ran beside each other


# -- rate ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_rate_of_ten_per_second_holds_over_ten_seconds(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    q.set_limits("metered", rate=Rate(10, per=timedelta(seconds=1)))
    for _ in range(4):
        spawn(workers, FLOW, db_url, tmp_path, "--queues", "metered", "--concurrency", "4")
    ready(workers)
    q.enqueue_many([{"task": "flow.quick"} for _ in range(200)], queue="metered")

    def started() -> list[float]:
        jobs = q.jobs(queue="metered", limit=1000)
        return sorted(j.started_at.timestamp() for j in jobs if j.started_at is not None)

    assert wait_for(lambda: len(started()) >= 100, 90), logs(workers)
    stop(workers)
    starts = started()
    assert starts[-1] - starts[0] >= 9.0  # a hundred starts took ten windows at least
    # Any window a little shorter than the period (the database records a start with
    # the claim, a few milliseconds apart) holds at most ten starts.
    window = 0.95
    busiest = max(sum(1 for s in starts[i:] if s < t + window) for i, t in enumerate(starts))
    assert busiest <= 10, busiest
    assert q.stats("metered").pending > 0  # the rest waited; nothing failed
    assert q.stats("metered").failed == 0


# -- pause -------------------------------------------------------------------------------------
def test_pause_stops_new_claims_at_once_and_running_jobs_finish(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    q.enqueue_many([{"task": "flow.hold", "payload": {"seconds": 0.3}} for _ in range(200)],
                   queue="steady")  # fmt: skip
    for _ in range(2):
        spawn(workers, FLOW, db_url, tmp_path, "--queues", "steady", "--concurrency", "2")
    assert wait_for(lambda: q.stats("steady").completed >= 4, 60), logs(workers)
    q.pause("steady")
    paused_at = q.now()  # every claim from now on sees the pause
    held = [j.id for j in running(q, "steady")]
    assert wait_for(lambda: not running(q, "steady"), 30)
    time.sleep(1.0)  # several polls of both workers
    jobs = q.jobs(queue="steady", limit=1000)
    late = [j.id for j in jobs if j.started_at is not None and j.started_at > paused_at]
    assert late == [], "jobs were claimed after the pause"
    assert all(q.get(i).status == Status.COMPLETED for i in held)  # type: ignore[union-attr]
    done = q.stats("steady").completed
    q.resume("steady")
    assert wait_for(lambda: q.stats("steady").completed > done, 30), logs(workers)
    stop(workers)


# -- snooze ------------------------------------------------------------------------------------
def test_snoozed_jobs_keep_their_attempts_across_worker_processes(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    jobs = [q.enqueue("flow.snoozy", {"snoozes": 2}, queue="waiting", max_attempts=1)
            for _ in range(6)]  # fmt: skip
    for _ in range(2):
        spawn(workers, FLOW, db_url, tmp_path, "--queues", "waiting", "--concurrency", "2")
    assert wait_for(lambda: q.stats("waiting").completed == 6, 60), logs(workers)
    stop(workers)
    runs = Counter(line.split()[1] for line in effects(tmp_path / "effects.txt"))
    for job in jobs:
        done = q.get(job.id)
        assert done is not None and done.result == 3 and runs[str(job.id)] == 3
        assert done.attempts == 1 and done.errors == ()
    # Every run was the first attempt, whichever process ran it.
    assert {line.split()[2] for line in effects(tmp_path / "effects.txt")} == {"1"}


# -- dependencies ----------------------------------------------------------------------------
def test_a_pipeline_releases_in_order_and_cancels_after_a_failure(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    def step(name: str, after: list[conveyor.Job] = (), **options: Any) -> conveyor.Job:  # type: ignore[assignment]
        payload = {"name": name, "fail": options.pop("fail", False)}
        return q.enqueue("book.step", payload, queue="books", after=[j.id for j in after],
                         max_attempts=1, **options)  # fmt: skip

    # Book 1: extract -> 5 pages -> finalize -> publish.
    extract = step("1-extract")
    pages = [step(f"1-page-{n}", [extract]) for n in range(5)]
    final = step("1-finalize", pages)
    publish = step("1-publish", [final])
    # Book 2: page 3 cannot be read: finalize and publish are cancelled, clean-up runs.
    extract2 = step("2-extract")
    pages2 = [step(f"2-page-{n}", [extract2], fail=n == 3) for n in range(5)]
    final2 = step("2-finalize", pages2)
    publish2 = step("2-publish", [final2])
    cleanup2 = step("2-cleanup", pages2, on_dependency_failure="run")
    for _ in range(3):
        spawn(workers, FLOW, db_url, tmp_path, "--queues", "books", "--concurrency", "4")
    ready(workers)

    def settled() -> bool:
        ids = (publish.id, publish2.id, cleanup2.id)
        return all(q.get(i).is_final for i in ids)  # type: ignore[union-attr]

    assert wait_for(settled, 60), logs(workers)
    stop(workers)

    def get(job: conveyor.Job) -> conveyor.Job:
        found = q.get(job.id)
        assert found is not None
        return found

    def before(first: conveyor.Job, then: conveyor.Job) -> None:
        a, b = get(first), get(then)
        assert a.finished_at is not None and b.started_at is not None
        assert a.finished_at <= b.started_at, f"{b.payload['name']} started too early"

    for page in pages:
        before(extract, page)
        before(page, final)
    before(final, publish)
    assert get(publish).status == Status.COMPLETED
    assert get(pages2[3]).status == Status.FAILED
    for page in (p for n, p in enumerate(pages2) if n != 3):
        assert get(page).status == Status.COMPLETED
    for cancelled in (final2, publish2):
        job = get(cancelled)
        assert job.status == Status.CANCELLED and job.started_at is None
    assert f"dependency job {pages2[3].id} failed" in (get(final2).error or "")
    assert str(final2.id) in (get(publish2).error or "")
    assert get(cleanup2).status == Status.COMPLETED  # runs anyway, after all of them
    for page in pages2:
        assert get(cleanup2).started_at >= get(page).finished_at  # type: ignore[operator]
    ran = {line.split()[1] for line in effects(tmp_path / "effects.txt")}
    assert "2-finalize" not in ran and "2-publish" not in ran


def test_schedulers_racing_over_the_same_slots_enqueue_each_once(
    q: conveyor.Queue, db_url: str, tmp_path: Path
) -> None:
    """Six processes pass over the same 100 slots of three schedules in lockstep, as
    fast as they can; one is SIGKILLed on the way. Each slot is enqueued exactly once."""
    slots, start_at = 100, time.time() + 4
    command = [sys.executable, "-m", "tests.flow._race", db_url, str(start_at), str(slots)]
    procs = [
        subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(6)
    ]
    try:
        victim = procs[0]
        assert victim.stdout is not None and victim.stdout.readline().strip() == "ready"
        time.sleep(max(0.0, start_at - time.time()) + 0.05)
        victim.kill()
        outputs = [p.communicate(timeout=120)[0] for p in procs[1:]]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs[1:]), outputs
    won = sum(int(out.split()[-1]) for out in outputs)
    jobs = q.jobs(task="flow.tick", limit=1000)
    per_schedule = Counter((j.payload["schedule"], j.run_at) for j in jobs)
    assert max(per_schedule.values()) == 1, "a slot was enqueued twice"
    assert len(per_schedule) == 3 * slots  # and none was lost to the killed process
    assert won <= len(jobs)  # the survivors' share; the victim took the rest
