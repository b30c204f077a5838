"""The worker registry as real ``conveyor worker`` processes keep it (both databases):
each registers when it starts, idle or not, signs off on SIGTERM, and an entry whose
worker was SIGKILLed expires and is later deleted by another worker. Waits are
bounded, never timed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import conveyor
from conveyor.info import WorkerInfo
from tests.worker.procs import REPO, WorkerProcess, start_worker, wait_for

APP = "tests.worker.apps:shutdown"
# A 3 s lease: heartbeats every second, and an entry outlives its last refresh by 3 s.
ARGS = ("--concurrency", "3", "--lease", "3", "--queues", "default,other")


def spawn(workers: list[WorkerProcess], url: str, tmp: Path) -> WorkerProcess:
    return start_worker(workers, APP, url, tmp, *ARGS)


def entry(q: conveyor.Queue, pid: int) -> WorkerInfo | None:
    return next((w for w in q.workers() if w.pid == pid), None)


def test_an_idle_worker_is_listed_with_its_fields_and_signs_off_on_sigterm(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    proc = spawn(workers, db_url, tmp_path)
    assert wait_for(lambda: entry(q, proc.pid) is not None, 30), proc.log()
    found = entry(q, proc.pid)
    assert found is not None
    assert found.name == f"{socket.gethostname()}:{proc.pid}"
    assert found.host == socket.gethostname()
    assert found.queues == ("default", "other")
    assert found.concurrency == 3 and found.running == 0
    assert found.version == conveyor.__version__
    assert found.started_at <= found.last_seen_at < found.expires_at
    first_seen = found.last_seen_at
    # Idle, it keeps its entry fresh with its heartbeats.
    assert wait_for(lambda: (entry(q, proc.pid) or found).last_seen_at > first_seen, 30)

    listed = _cli("workers", "--db", db_url, "--json")
    assert [w["pid"] for w in json.loads(listed)["workers"]] == [proc.pid]
    info = json.loads(_cli("info", "--db", db_url, "--json"))
    assert [(w["worker"], w["jobs"], w["registered"]) for w in info["workers"]] == [
        (found.name, 0, True)
    ]

    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert entry(q, proc.pid) is None  # removed as it stopped, not left to expire


def test_a_killed_worker_expires_and_the_next_worker_forgets_it(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    q.enqueue("shutdown.nap", {"seconds": 60})
    doomed = spawn(workers, db_url, tmp_path)

    def busy() -> bool:
        found = entry(q, doomed.pid)
        return found is not None and found.running == 1

    assert wait_for(busy, 30), doomed.log()
    last = entry(q, doomed.pid)
    doomed.kill()  # SIGKILL: no chance to sign off
    final = entry(q, doomed.pid) or last  # refreshed no more from here on
    assert final is not None
    assert wait_for(lambda: entry(q, doomed.pid) is None, 30)  # expired
    # Expired for over a TTL (3 s): the next worker deletes the entry as it starts.
    assert wait_for(lambda: q.now() > final.expires_at + timedelta(seconds=3.5), 30)
    heir = spawn(workers, db_url, tmp_path)
    assert wait_for(lambda: "forgot 1 worker(s)" in heir.log(), 30), heir.log()


def _cli(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    done = subprocess.run(
        [sys.executable, "-m", "conveyor", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_entry_lists_the_jobs_its_tasks_run_and_not_those_claimed_ahead(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    jobs = [q.enqueue("shutdown.nap", {"seconds": 60}) for _ in range(5)]
    proc = start_worker(workers, APP, db_url, tmp_path, *ARGS, "--prefetch", "2")

    def settled() -> bool:
        found = entry(q, proc.pid)
        return found is not None and len(found.busy) == 3

    assert wait_for(settled, 30), proc.log()
    found = entry(q, proc.pid)
    assert found is not None and found.running == 3
    claimed = {j.id for j in q.jobs(status="running")}
    assert claimed == {j.id for j in jobs}  # three running, two claimed ahead
    busy = {b.id for b in found.busy}
    assert busy < claimed and len(claimed - busy) == 2
    assert all(b.started_at <= found.last_seen_at for b in found.busy)
