"""Real ``conveyor worker`` processes: signals, crashes and the command line (both
databases). Leases are short so recovery is quick; waits are bounded, never timed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import conveyor
from conveyor.job import Status
from tests.worker import latency
from tests.worker.procs import REPO, WorkerProcess, effects, start_worker, wait_for

SHUTDOWN_APP = "tests.worker.apps:shutdown"


spawn = start_worker


def started(tmp: Path) -> int:
    return sum(line.startswith("start") for line in effects(tmp / "effects.txt"))


def test_sigterm_finishes_what_it_can_releases_the_rest_and_a_restart_picks_it_up(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    short = q.enqueue("shutdown.nap", {"seconds": 0.3})
    long = q.enqueue("shutdown.nap", {"seconds": 60})
    args = ("--concurrency", "2", "--grace", "1.5", "--lease", "30")
    first = spawn(workers, SHUTDOWN_APP, db_url, tmp_path, *args)
    assert wait_for(lambda: started(tmp_path) == 2, 30), first.log()
    first.signal(signal.SIGTERM)
    assert first.wait(20) == 0
    assert "released 1 unfinished job(s)" in first.log()
    assert q.get(short.id).status == Status.COMPLETED  # type: ignore[union-attr]
    released = q.get(long.id)
    assert released and released.status == Status.PENDING and released.claim_id is None
    assert released.attempts == 1  # given back at once, not left for its lease to expire

    second = spawn(workers, SHUTDOWN_APP, db_url, tmp_path, *args)
    assert wait_for(lambda: q.get(long.id).status == Status.COMPLETED, 30), second.log()  # type: ignore[union-attr]
    assert q.get(long.id).attempts == 2  # type: ignore[union-attr]


def test_a_second_signal_exits_at_once(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    job = q.enqueue("shutdown.nap", {"seconds": 60})
    proc = spawn(workers, SHUTDOWN_APP, db_url, tmp_path, "--grace", "60", "--lease", "30")
    assert wait_for(lambda: started(tmp_path) == 1, 30), proc.log()
    proc.signal(signal.SIGTERM)
    assert wait_for(lambda: "waiting up to 60s" in proc.log(), 10), proc.log()
    proc.signal(signal.SIGINT)
    assert proc.wait(5) == 128 + signal.SIGINT
    assert "second signal" in proc.log()
    still = q.get(job.id)
    assert still and still.status == Status.RUNNING  # left for its lease to run out


def test_a_poison_job_that_kills_its_worker_is_claimed_max_attempts_times_then_failed(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    poison = q.enqueue("poison.die", max_attempts=3)
    fine = [q.enqueue("poison.ok", max_attempts=10) for _ in range(3)]
    args = ("--concurrency", "1", "--lease", "1")
    proc = spawn(workers, "tests.worker.apps:poison", db_url, tmp_path, *args)
    deaths = 0

    def settled() -> bool:
        nonlocal proc, deaths
        if not proc.alive():
            deaths += 1
            proc = spawn(workers, "tests.worker.apps:poison", db_url, tmp_path, *args)
        job = q.get(poison.id)
        return bool(job and job.is_final) and q.stats().completed == len(fine)

    assert wait_for(settled, 90, every=0.1), proc.log()
    job = q.get(poison.id)
    assert job and job.status == Status.FAILED and job.attempts == 3
    assert "lease expired" in (job.error or "")
    runs = [line for line in effects(tmp_path / "effects.txt") if line.startswith("die")]
    assert runs == [f"die {poison.id} {n}" for n in (1, 2, 3)]
    assert deaths == 3


def test_burst_from_the_command_line_runs_the_backlog_and_exits(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    q.enqueue_many([{"task": "chaos.work", "payload": {"n": n}} for n in range(20)])
    proc = spawn(workers, "tests.worker.apps:chaos", db_url, tmp_path, "--burst")
    assert proc.wait(60) == 0, proc.log()
    assert q.stats().completed == 20
    assert "claimed 20, completed 20" in proc.log()


def test_an_idle_worker_process_starts_jobs_enqueued_by_another_process(
    db_url: str, tmp_path: Path
) -> None:
    waits = latency.measure(db_url, tmp_path, samples=2, gap=(0.5, 0.6))
    assert len(waits) == 2 and all(w >= 0 for w in waits)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--app", "tests.worker.nope:app"], "no module named 'tests.worker.nope'"),
        (["--app", "tests.worker.apps"], "expected module:attribute"),
        (["--app", "tests.worker.apps:missing"], "has no attribute 'missing'"),
        (["--app", "tests.worker.apps:EFFECTS_ENV"], "expected a conveyor.App"),
        (["--app", "tests.worker.apps:chaos", "--queues", ","], "--queues"),
        (["--app", "tests.worker.apps:chaos", "--retain", "done=1d"], "--retain"),
        (["--app", "tests.worker.apps:chaos", "--db", "oracle://x"], "unsupported scheme"),
    ],
)
def test_command_line_mistakes_are_one_line_on_stderr(
    args: list[str], message: str, tmp_path: Path
) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 'x.db'}"] if "--db" not in args else []
    done = subprocess.run(
        [sys.executable, "-m", "conveyor", "worker", *args, *db, "--burst"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], done.stderr
