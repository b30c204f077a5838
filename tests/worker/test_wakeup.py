"""Waking for other processes' commits on SQLite: the backend's change watch, which
``Queue.wait`` and idle workers sleep on. Polls are set far longer than the waits
allowed, so a pass shows that a change woke the waiter, not that a poll came round."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import conveyor
from conveyor.drivers.sqlite.watch import FileWatch
from conveyor.job import Status
from tests.worker.conftest import running
from tests.worker.procs import REPO, wait_for

LONG_POLL = 60.0  # no waiter below looks again on its own before this


def in_another_process(url: str, code: str) -> str:
    """Run ``code`` with ``q`` connected to ``url`` in a fresh interpreter; its output."""
    script = f"import conveyor\nq = conveyor.connect({url!r})\n{code}\nq.close()\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'wake.db'}"
    conveyor.connect(url).close()  # migrated before anyone waits
    return url


@pytest.mark.parametrize("inotify", [True, False], ids=["inotify", "timer"])
def test_wait_for_change_hears_a_commit_made_by_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inotify: bool
) -> None:
    if not inotify:  # as where inotify is not to be had: the value is read on a timer
        monkeypatch.setattr(FileWatch, "open", classmethod(lambda cls, path: None))
    url = sqlite_url(tmp_path)
    q = conveyor.connect(url)
    try:
        assert q.driver.hears_other_processes
        q.wait_for_change(q.generation(), 0.5)  # starts the watch (which looks once)
        since = q.generation()
        assert not q.wait_for_change(since, 0.5)  # quiet: nothing to hear
        since = q.generation()
        in_another_process(url, "q.enqueue('elsewhere.task')")
        assert q.wait_for_change(since, LONG_POLL)  # a change, not a timeout
    finally:
        q.close()


def test_queue_wait_returns_when_another_process_finishes_the_job(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    q = conveyor.connect(url)
    try:
        job = q.enqueue("elsewhere.task")
        finisher = subprocess.Popen(
            [sys.executable, "-c",
             "import time, conveyor\n"
             f"q = conveyor.connect({url!r})\n"
             "time.sleep(1.0)\n"
             "c = q.claim('default')\n"
             "q.complete(c.jobs[0].id, c.jobs[0].claim_id, 'done there')\n"],
            cwd=REPO,
        )  # fmt: skip
        try:
            start = time.monotonic()
            done = q.wait(job.id, timeout=LONG_POLL, poll=LONG_POLL)
            waited = time.monotonic() - start
        finally:
            assert finisher.wait(60) == 0
        assert done.status == Status.COMPLETED and done.result == "done there"
        assert waited < LONG_POLL / 2  # woken by the commit, long before a poll
    finally:
        q.close()


def test_an_idle_worker_starts_a_job_enqueued_by_another_process_without_polling(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path)
    q = conveyor.connect(url)
    app = conveyor.App(q)
    started: list[float] = []

    @app.task(name="wake.note")
    def note(ctx: conveyor.Context) -> None:
        started.append(time.monotonic())

    try:
        with running(app, poll_interval=LONG_POLL):
            warm = q.enqueue("wake.note")
            assert wait_for(lambda: (q.get(warm.id) or warm).is_final, 30)
            # Idle, the worker's looks back off from 25 ms, doubling: after 14 s it is
            # in its 12.8 s sleep (12.775 s to 25.575 s), so a poll would find the job
            # 11.5 s or more after it is enqueued.
            time.sleep(14.0)
            in_another_process(url, "q.enqueue('wake.note')")
            enqueued = time.monotonic()
            assert wait_for(lambda: len(started) == 2, 5.0), "the worker was not woken"
        assert started[1] - enqueued < 5.0
    finally:
        q.close()
