"""Real processes racing on one database: nothing claimed twice, one job per key, and
no half-written state when a process is SIGKILLed in the middle of a claim."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import conveyor
from conveyor import Status

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.queue_kinds("queue")]


def _all(q: conveyor.Queue, status: str) -> list[conveyor.Job]:
    found: list[conveyor.Job] = []
    while page := q.jobs(status=status, limit=5000, after=found[-1].id if found else None):
        found.extend(page)
    return found


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.core._procs", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_eight_processes_claim_ten_thousand_jobs_exactly_once(
    q: conveyor.Queue, db_url: str
) -> None:
    jobs = q.enqueue_many([{"task": "t", "payload": {"n": i}} for i in range(10_000)])
    workers = [_spawn("claim", db_url, "50") for _ in range(8)]
    claimed: Counter[int] = Counter()
    per_worker = []
    for proc in workers:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        ids = [i for line in out.splitlines() for i in json.loads(line)["claimed"]]
        per_worker.append(len(ids))
        claimed.update(ids)
    assert set(claimed) == {j.id for j in jobs}
    assert max(claimed.values()) == 1, "a job was claimed twice"
    stats = q.stats()
    assert stats.completed == 10_000 and stats.pending == stats.running == 0
    assert all(j.attempts == 1 for j in _all(q, "completed"))
    assert sum(1 for n in per_worker if n) >= 2, f"work was not shared: {per_worker}"


def test_claims_taken_at_the_same_instant_each_get_a_full_batch(
    q: conveyor.Queue, db_url: str
) -> None:
    """Six processes claim 100 at the same instant from a backlog of 1,000 just put in
    one queue of a new table: each gets 100, in each of three tries. On MySQL the
    server's plan for such a table (its statistics still those of an empty one) read
    it whole and sorted it, locking every row it read, so the claims beside it skipped
    the whole backlog and came back empty: in three tries of four before the fix, and
    a client that took an empty batch for the end stopped."""
    for _ in range(3):
        q.drop_schema()
        q.migrate()
        for i in range(1000):
            q.enqueue("t", {"i": i}, queue="race", key=f"k{i}")
        start_at = time.time() + 1.0
        procs = [_spawn("first-claims", db_url, str(start_at), "1", "100") for _ in range(6)]
        got = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            got.extend(json.loads(out))
        assert got == [100] * 6, got


def test_eight_processes_enqueuing_the_same_keys_make_one_job_each(
    q: conveyor.Queue, db_url: str
) -> None:
    start_at = time.time() + 2.0  # every process starts enqueuing at the same instant
    procs = [_spawn("enqueue", db_url, str(start_at), "50") for _ in range(8)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    for key in answers[0]:
        assert len({a[key] for a in answers}) == 1, f"{key} got more than one job"
    assert q.stats().pending == 50


@pytest.mark.parametrize("kill_after", [0.3, 0.7, 1.1])
def test_sigkill_during_batch_claims_leaves_no_half_written_state(
    q: conveyor.Queue, db_url: str, backend_name: str, kill_after: float
) -> None:
    batch = 250
    q.enqueue_many([{"task": "t"} for _ in range(40_000)])
    proc = _spawn("claim-forever", db_url, str(batch))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(kill_after + random.random() * 0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # Every claim is all there or not there at all.
    running = _all(q, "running")
    per_claim = Counter(j.claim_id for j in running)
    assert all(n == batch for n in per_claim.values()), per_claim
    assert all(j.attempts == 1 and j.lease_expires_at and j.worker for j in running)
    pending = _all(q, "pending")
    assert all(j.claim_id is None and j.attempts == 0 for j in pending)
    stats = q.stats()
    assert stats.running == len(running) and stats.pending + stats.running == 40_000
    # The database is whole and still works.
    if backend_name == "sqlite":
        path = db_url.removeprefix("sqlite:///")
        import sqlite3

        assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert q.release(next(iter(per_claim))) == batch if per_claim else True
    assert q.claim(limit=batch).jobs[0].status == Status.RUNNING


def test_max_running_holds_across_four_processes(q: conveyor.Queue, db_url: str) -> None:
    """Four processes claim from a queue capped at three running jobs while the test
    samples the table: never more than three run at once, each job runs once."""
    jobs = q.enqueue_many([{"task": "t", "queue": "capped"} for _ in range(120)])
    q.set_limits("capped", max_running=3)
    procs = [_spawn("claim-capped", db_url, "0.02") for _ in range(4)]
    most = 0
    while any(p.poll() is None for p in procs):
        most = max(most, len(q.jobs(queue="capped", status="running", limit=100)))
        time.sleep(0.002)
    claimed: Counter[int] = Counter()
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        for line in out.splitlines():
            claimed.update(json.loads(line)["claimed"])
    assert most <= 3
    assert most >= 2  # the processes did run side by side
    assert sorted(claimed) == sorted(j.id for j in jobs) and max(claimed.values()) == 1


def test_many_processes_take_each_schedule_slot_once(q: conveyor.Queue, db_url: str) -> None:
    q.save_schedule("race", task="tick", queue="ticks", spec="every 1m", first_slot=None,
                    next_slot=None)  # fmt: skip
    start_at = time.time() + 1.5
    procs = [_spawn("slots", db_url, str(start_at), "40") for _ in range(6)]
    won: Counter[int] = Counter()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        won.update(json.loads(out.strip().splitlines()[-1]))
    assert sorted(won) == list(range(40)) and set(won.values()) == {1}
    assert q.stats("ticks").pending == 40
    assert len(won) == 40
