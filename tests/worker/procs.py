"""Starting and stopping real worker processes for the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import conveyor
from tests.worker.apps import EFFECTS_ENV

REPO = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """``conveyor worker`` in a subprocess; its log goes to a file of its own."""

    def __init__(self, app: str, url: str, tmp: Path, effects: Path, *args: str, tag: str) -> None:
        self.log_path = tmp / f"worker-{tag}.log"
        self.command = [
            sys.executable,
            "-m",
            "conveyor",
            "worker",
            "--app",
            app,
            "--db",
            url,
            *args,
        ]
        self.env = {**os.environ, EFFECTS_ENV: str(effects)}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)  # a stopped process cannot die until it runs
            self.signal(signal.SIGKILL)
            self.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_for(condition: Callable[[], bool], timeout: float, every: float = 0.05) -> bool:
    """Poll ``condition`` until true or ``timeout`` seconds pass (a bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return condition()


def effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def audit_runs(q: conveyor.Queue, jobs: int, effects_path: Path) -> tuple[list[str], int]:
    """Check a drain of ``jobs`` jobs whose task wrote "<job id> <claim id>" per run to
    ``effects_path``: every job completed, each by a claim that ran exactly once, and no
    claim ran twice. The problems found, and how many runs were recorded."""
    problems: list[str] = []
    stats = q.stats()
    if stats.completed != jobs or stats.running or stats.pending or stats.failed:
        problems.append(f"expected {jobs} completed and nothing else, got {stats}")
    runs: dict[int, list[str]] = defaultdict(list)
    for line in effects(effects_path):
        job_id, claim = line.split()
        runs[int(job_id)].append(claim)
    after = 0
    while batch := q.jobs(limit=1000, after=after):
        for job in batch:
            claims = runs.get(job.id, [])
            if job.status == "completed" and claims.count(job.claim_id or "") != 1:
                problems.append(
                    f"job {job.id} completed by claim {job.claim_id}, which ran "
                    f"{claims.count(job.claim_id or '')} time(s)"
                )
            if len(claims) != len(set(claims)):
                problems.append(f"job {job.id}: a claim ran twice: {claims}")
        after = batch[-1].id
    return problems, sum(len(v) for v in runs.values())


def start_worker(
    started: list[WorkerProcess], app: str, url: str, tmp: Path, *args: str
) -> WorkerProcess:
    """Start a ``conveyor worker`` process, tagged by its place in ``started`` (where it
    is kept, so the ``workers`` fixture kills it after the test)."""
    proc = WorkerProcess(app, url, tmp, tmp / "effects.txt", *args, tag=str(len(started)))
    started.append(proc.start())
    return proc
