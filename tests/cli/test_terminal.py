"""The CLI in a real terminal (tmux, 80 columns), as a person at a keyboard uses it:
prune asks before it deletes, and tables fit the window."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from tests.conftest import IN_CI

pytestmark = pytest.mark.slow


class Terminal:
    """A tmux server of its own (its own socket), one window of 80 by 30."""

    def __init__(self, cwd: Path) -> None:
        if shutil.which("tmux") is None:
            if IN_CI:
                pytest.fail("tmux is needed for the terminal tests")
            pytest.skip("no tmux on this machine")
        self.socket = f"conveyor-test-{uuid.uuid4().hex[:8]}"
        self.cwd = cwd

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=30, check=True)  # fmt: skip
        return done.stdout

    def run(self, *conveyor_args: str) -> None:
        command = shlex.join([sys.executable, "-m", "conveyor", *conveyor_args])
        shell = f"cd {shlex.quote(str(self.cwd))} && {command}; echo EXIT=$?; sleep 60"
        self._tmux("new-session", "-d", "-x", "80", "-y", "30", "-s", "t", shell)

    def type(self, keys: str) -> None:
        self._tmux("send-keys", "-t", "t", keys, "Enter")

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, text: str, bound_s: float = 30) -> str:
        deadline = time.monotonic() + bound_s
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            assert time.monotonic() < deadline, f"{text!r} never appeared:\n{screen}"
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30, check=False)  # fmt: skip


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    yield term
    term.close()


def _done_jobs(url: str, n: int) -> None:
    with conveyor.connect(url) as q:
        q.enqueue_many([{"task": "t"}] * n)
        claim = q.claim(limit=n)
        q.complete_many([(j.id, claim.id, None) for j in claim.jobs])


@pytest.mark.parametrize(("answer", "left", "code"), [("y", 0, 0), ("n", 2, 1)])
def test_prune_asks_on_a_terminal(
    terminal: Terminal, tmp_path: Path, answer: str, left: int, code: int
) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    _done_jobs(url, 2)
    terminal.run("prune", "--older-than", "0s", "--db", url)
    terminal.wait_for("delete 2 job(s) (completed) finished more than 0s ago? [y/N]")
    terminal.type(answer)
    screen = terminal.wait_for("EXIT=")
    assert f"EXIT={code}" in screen
    assert ("removed 2 job(s)" in screen) == (answer == "y")
    with conveyor.connect(url) as q:
        assert q.stats().completed == left


def test_a_table_fits_an_80_column_terminal(terminal: Terminal, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with conveyor.connect(url) as q:
        q.enqueue("emails.send_welcome_message", queue="notifications-of-high-priority")
        q.enqueue("t", queue="b")
    terminal.run("stats", "--db", url)
    screen = terminal.wait_for("EXIT=0")
    rows = [line for line in screen.splitlines() if line.strip()]
    assert rows[0].split()[0] == "queue"
    assert all(len(line) <= 80 for line in screen.splitlines())
    assert rows[1].split()[0] == "b"
    assert rows[2].split()[0] == "notifications-of-high-priority"  # whole, on one line
    assert rows[3].startswith("all queues")
