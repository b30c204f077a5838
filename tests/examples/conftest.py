"""Running the examples as their users do: ``python -m examples.NAME serve`` in a process
of its own, from a directory that is not the repository, on SQLite, PostgreSQL and
MySQL (MariaDB)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import conveyor

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def backend_name(request: pytest.FixtureRequest) -> str:
    """The examples keep their own tables beside the queue's (examples/_db.py), with DDL
    for each database and the statements MySQL spells differently."""
    return str(request.param)


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ``serve`` process of an example; its output goes to a log file."""

    def __init__(self, name: str, db_url: str, cwd: Path, *args: str, workers: int = 2) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = cwd / f"{name}-{self.port}.log"
        command = [sys.executable, "-m", f"examples.{name}", "serve", "--db", db_url,
                   "--port", str(self.port), "--workers", str(workers), *args]  # fmt: skip
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                command, cwd=cwd, env=ENV, stdout=out, stderr=subprocess.STDOUT
            )
        self.wait_ready()

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited: {self.output()}")
            try:
                answer = httpx.get(f"{self.url}/healthz", timeout=1)
                if answer.status_code in (200, 401):  # up (401: behind a token)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"{self.name} did not start: {self.output()}")

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``start_server(name, db_url, *args, workers=N)``; every server is stopped after."""
    started: list[Server] = []

    def start(name: str, db_url: str, *args: str, workers: int = 2) -> Server:
        server = Server(name, db_url, tmp_path, *args, workers=workers)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def run_module(name: str, *args: str, cwd: Path, timeout: float = 240) -> Any:
    """Run ``python -m examples.NAME ARGS`` to the end; returns the completed process."""
    return subprocess.run(
        [sys.executable, "-m", f"examples.{name}", *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_until(check: Callable[[], Any], *, timeout: float = 60.0, every: float = 0.05) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout}s: {check}")
        time.sleep(every)


def conflicting(monkeypatch: pytest.MonkeyPatch, queue: Any, method: str, times: int) -> list[Any]:
    """``queue.<method>`` raises ``TransactionConflict`` (what conveyor says when MySQL
    rolled a transaction back to break a deadlock) on its first ``times`` calls, then
    does its work. Returns the first argument of every call, as they come."""
    real = getattr(queue, method)
    calls: list[Any] = []

    def deadlocked(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else None)
        if len(calls) <= times:
            raise conveyor.TransactionConflict("MySQL broke a deadlock by rolling back")
        return real(*args, **kwargs)

    monkeypatch.setattr(queue, method, deadlocked)
    return calls
