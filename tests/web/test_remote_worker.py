"""``conveyor worker --server URL``: a worker with no database access, only HTTP and a
worker token, runs tasks, reports progress and results, and tells subscribers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

import conveyor
from tests.web.conftest import TOKEN_OF, bearer
from tests.worker.procs import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _worker(
    server: str, token: str, effects: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CONVEYOR_DATABASE_URL"}
    env["CONVEYOR_TEST_EFFECTS"] = str(effects)
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "worker", "--app", "tests.web.remote_apps:remote",
         "--server", server, "--token", token, "--burst", "--lease", "10", *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_worker_runs_through_the_server(
    server_url: str, queue: conveyor.Queue, tmp_path: Path
) -> None:
    squares = [
        queue.enqueue(
            "remote.square", {"n": n}, queue="remote", subscriber="chat:7" if n == 3 else None
        )
        for n in range(20)
    ]
    refused = queue.enqueue("remote.refuse", queue="remote")
    effects = tmp_path / "effects"
    done = _worker(server_url, TOKEN_OF["worker"], effects)
    assert done.returncode == 0, done.stderr
    for n, job in enumerate(squares):
        final = queue.get(job.id)
        assert final is not None and final.status == "completed" and final.result == n * n
        assert final.progress.checkpoint == n
    failed = queue.get(refused.id)
    assert failed is not None and failed.status == "failed" and failed.error_kind == "terminal"
    lines = effects.read_text().splitlines()
    assert sorted(lines.count(f"ran {j.id}") for j in squares) == [1] * 20
    assert lines.count(f"told chat:7 {squares[3].id} completed") == 1
    assert queue.take_notifications() == []  # marked as told, through the server


def test_worker_server_mistakes_are_one_line(server_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects"
    reader = _worker(server_url, TOKEN_OF["reader"], effects)
    assert reader.returncode != 0
    last = reader.stderr.strip().splitlines()[-1]  # after the worker's start-up log line
    assert last.startswith("error:") and "worker role" in last
    assert "Traceback" not in reader.stderr
    both = _worker(server_url, TOKEN_OF["worker"], effects, "--db", "sqlite:///x.db")
    assert both.returncode != 0 and "--db and --server" in both.stderr


def test_a_worker_through_the_server_registers_and_signs_off(
    server_url: str, queue: conveyor.Queue, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CONVEYOR_DATABASE_URL"}
    env["CONVEYOR_TEST_EFFECTS"] = str(tmp_path / "effects")
    with open(tmp_path / "worker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "conveyor", "worker", "--app", "tests.web.remote_apps:remote",
             "--server", server_url, "--token", TOKEN_OF["worker"], "--lease", "3",
             "--concurrency", "2"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        assert wait_for(lambda: [w.pid for w in queue.workers()] == [proc.pid], 30), (
            tmp_path / "worker.log"
        ).read_text()
        (found,) = queue.workers()
        assert found.queues == ("remote",) and found.concurrency == 2 and found.running == 0
        listed = httpx.get(f"{server_url}/api/workers", headers=bearer("reader"), timeout=30)
        assert listed.status_code == 200
        assert [(w["name"], w["pid"], w["running"]) for w in listed.json()["workers"]] == [
            (found.name, proc.pid, 0)
        ]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert queue.workers() == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_http_client_does_not_log_each_request(
    server_url: str, queue: conveyor.Queue, tmp_path: Path
) -> None:
    for n in range(3):
        queue.enqueue("remote.square", {"n": n}, queue="remote")
    done = _worker(server_url, TOKEN_OF["worker"], tmp_path / "effects")
    assert done.returncode == 0, done.stderr
    assert "HTTP Request" not in done.stderr, done.stderr
    assert "worker " in done.stderr  # the worker's own INFO lines are still there


def test_a_burst_worker_gives_up_on_a_server_that_is_down(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = _worker(f"http://127.0.0.1:{port}", TOKEN_OF["worker"], tmp_path / "effects",
                   "--burst-give-up", "1", "--log-level", "error")  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: burst worker: giving up"), done.stderr
    assert "cannot reach the conveyor server" in lines[0]
