"""SQLite writers take turns on a file beside the database (conveyor.drivers.sqlite.writers):
a waiting writer blocks in the kernel until the holder lets go, a killed holder's turn
is released, and the turn never makes a writer wait on itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import conveyor
from conveyor.errors import DatabaseError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")

# A child that opens a write transaction through conveyor's driver, says so, and holds
# it until killed (or for ``hold`` seconds, then commits).
_HOLDER = textwrap.dedent(
    """
    import sys, time
    import conveyor
    q = conveyor.connect(sys.argv[1], migrate=False)
    with q.driver.session() as session:
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
    print("done", flush=True)
    """
)


def _holder(url: str, hold: float) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, url, str(hold)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "holding"
    return child


def _turn_files_open(path: Path) -> int:
    """How many of this process's descriptors are open on the turn's file."""
    turn = os.path.realpath(f"{path}-writers")
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == turn
        except OSError:
            continue
    return found


def test_a_database_file_gets_its_writers_turn_file_beside_it(tmp_path: Path) -> None:
    with conveyor.connect(f"sqlite:///{tmp_path / 'q.db'}") as q:
        q.enqueue("t")
    assert (tmp_path / "q.db-writers").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_the_turn_is_shared_by_the_queues_of_a_process_and_closed_after_the_last(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    first = conveyor.connect(f"sqlite:///{path}")
    second = conveyor.connect(f"sqlite:///{path}")
    assert _turn_files_open(path) == 1
    first.close()
    second.enqueue("t")  # the turn is still the second queue's
    assert _turn_files_open(path) == 1
    second.close()
    assert _turn_files_open(path) == 0


def test_a_writer_waits_for_another_process_holding_the_turn_and_goes_on_after_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with conveyor.connect(url) as q:
        child = _holder(url, 1.0)
        try:
            started = time.monotonic()
            job = q.enqueue("t")  # waits for the child's transaction, then commits
            waited = time.monotonic() - started
        finally:
            assert child.wait(timeout=30) == 0
        assert child.stdout is not None and child.stdout.read().strip() == "done"
        assert waited > 0.5  # it did wait for the holder rather than write beside it
        assert q.get(job.id) is not None


def test_a_writer_whose_turn_does_not_come_in_its_timeout_says_busy_and_writes_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with conveyor.connect(url) as q:
        q.enqueue("first")
    with conveyor.connect(url + "?timeout=0.3") as q:
        child = _holder(url, 3.0)
        try:
            started = time.monotonic()
            with pytest.raises(DatabaseError, match="busy"):
                q.enqueue("refused")
            assert time.monotonic() - started < 2.5  # told within its timeout, not after
            with pytest.raises(DatabaseError, match="busy"):
                q.claim()  # a session, as the single statement above
        finally:
            assert child.wait(timeout=30) == 0
        assert [j.task for j in q.jobs()] == ["first"]
        assert q.enqueue("later").task == "later"  # the turn came back once it was let go


def test_a_killed_holders_turn_is_released_and_the_waiting_writer_goes_on(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    with conveyor.connect(url) as q:
        before = q.enqueue("t")
        child = _holder(url, 3600)
        try:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            job = q.enqueue("t")
        finally:
            if child.poll() is None:
                child.kill()
        assert [j.id for j in q.jobs()] == [before.id, job.id]


def test_a_write_through_a_second_queue_inside_a_first_ones_transaction_is_busy_not_stuck(
    tmp_path: Path,
) -> None:
    """The turn is reentrant in a thread: the inner write meets SQLite's own lock (held by
    the outer transaction) and its busy timeout, as it would without turns."""
    path = tmp_path / "q.db"
    outer = conveyor.connect(f"sqlite:///{path}")
    inner = conveyor.connect(f"sqlite:///{path}?timeout=0.2")
    try:
        with outer.driver.session(), pytest.raises(DatabaseError, match="busy"):
            inner.enqueue("t")
        assert inner.enqueue("t").id  # and once the outer one ended, it writes
    finally:
        inner.close()
        outer.close()


def test_a_folder_where_the_turn_file_cannot_be_made_leaves_writes_to_sqlite_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.db"
    conveyor.connect(f"sqlite:///{path}").close()
    (tmp_path / "q.db-writers").unlink()
    # A directory where the turn's file would be: opening it for writing fails.
    (tmp_path / "q.db-writers").mkdir()
    with conveyor.connect(f"sqlite:///{path}") as q:
        job = q.enqueue("t")
        assert q.get(job.id) is not None
