"""``conveyor demo``: every demo job reaches a final state, and Ctrl-C stops it cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

import conveyor
from conveyor import Status
from conveyor.demo import tasks, workload
from tests.cli.conftest import COMMAND_TIMEOUT_S, Cli, cli_env

# Generous: at pace 0 the demo takes about a second on SQLite.
DEMO_TIMEOUT_S = 120


@pytest.mark.slow
def test_every_demo_job_reaches_a_final_state(cli: Cli, db_url: str) -> None:
    result = cli(
        "demo", "--jobs", "40", "--exit-when-done", "--no-serve", "--pace", "0", "--json",
        "--db", db_url,
    )  # fmt: skip
    summary = result.json()
    assert summary["all_final"] is True
    assert summary["worker_errors"] == []
    ids = summary["job_ids"]
    assert len(ids) == summary["jobs"] >= 40 - 5  # repeat requests share a job
    with conveyor.connect(db_url) as q:
        jobs = [q.get(i) for i in ids]
        subscribers = {i: q.subscribers(i) for i in ids}
    assert all(job is not None and job.is_final for job in jobs)
    done = [job for job in jobs if job is not None]
    # The mix behaves like the systems it stands for:
    assert {job.queue for job in done} == set(tasks.QUEUES)
    assert any(j.status == Status.COMPLETED and j.attempts > 1 for j in done)  # retried
    assert any(j.status == Status.FAILED and j.error_kind == "terminal" for j in done)  # 404
    assert any(len(s) > 1 for s in subscribers.values())  # a key shared by requests
    books = [j for j in done if j.queue == "demo.books"]
    assert books
    assert all(b.progress.total == b.payload["pages"] == b.progress.checkpoint for b in books)
    jammed = [b for b in books if b.payload.get("jam_at")]
    assert jammed
    assert all(b.attempts == 2 and b.progress.detail == {"resumed": True} for b in jammed)


def test_the_workload_is_reproducible_and_mixed() -> None:
    first = workload.plan(60, seed=3)
    assert first == workload.plan(60, seed=3)
    assert first != workload.plan(60, seed=4)
    assert {p.task for p in first} == set(tasks.app.tasks)
    assert any(len(p.subscribers) > 1 for p in first)


def test_the_demo_refuses_a_bad_database_url(cli: Cli) -> None:
    result = cli("demo", "--db", "sqlite:///no/such/dir/demo.db", "--no-serve")
    assert result.code == 1
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_ctrl_c_stops_the_demo_cleanly_with_the_dashboard_up(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "demo", "--jobs", "30", "--port", "0", "--db", url],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        dashboard = _dashboard_url(proc.stdout)
        with urllib.request.urlopen(dashboard + "healthz", timeout=10) as response:
            assert response.status == 200
        with conveyor.connect(url) as q:
            _wait_for(lambda: q.stats().running > 0 or q.stats().completed > 0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "look around:" in stdout
    with conveyor.connect(url) as q:
        assert q.stats().running == 0  # finished, or released back to pending


def _dashboard_url(stdout: IO[str]) -> str:
    deadline = time.monotonic() + DEMO_TIMEOUT_S
    while time.monotonic() < deadline:
        line = stdout.readline()
        if not line:
            break
        if line.startswith("dashboard: "):
            return str(line.split(" ", 1)[1].strip())
    raise AssertionError("the demo never printed its dashboard URL")


def _wait_for(condition: Callable[[], bool], timeout: float = DEMO_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")
