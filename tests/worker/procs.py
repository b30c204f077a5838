"""Starting and stopping real worker processes for the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

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


def start_worker(
    started: list[WorkerProcess], app: str, url: str, tmp: Path, *args: str
) -> WorkerProcess:
    """Start a ``conveyor worker`` process, tagged by its place in ``started`` (where it
    is kept, so the ``workers`` fixture kills it after the test)."""
    proc = WorkerProcess(app, url, tmp, tmp / "effects.txt", *args, tag=str(len(started)))
    started.append(proc.start())
    return proc
