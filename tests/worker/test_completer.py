"""The completer leaves endings for the next claim while the worker says one is coming
(they are then written in the claim's transaction), and writes them on its own as soon
as it says none is. Waits are bounded, never timed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import conveyor
from conveyor.job import Status
from conveyor.worker.completer import Completer, Flushed
from conveyor.worker.outcome import Outcome


class Recording:
    """The queue, with its ``report`` calls counted."""

    def __init__(self, q: conveyor.Queue) -> None:
        self.q = q
        self.reports = 0

    def report(self, **kwargs: Any) -> Any:
        self.reports += 1
        return self.q.report(**kwargs)


def claimed_ending(q: conveyor.Queue) -> Outcome:
    q.enqueue("t.noop")
    (job,) = q.claim("default", limit=1).jobs
    return Outcome(job, result={"ok": True})


def test_endings_wait_for_a_claim_that_is_coming(tmp_path: Path) -> None:
    q = conveyor.connect(f"sqlite:///{tmp_path / 'q.db'}", use_env=False)
    rec = Recording(q)
    flushed: list[Flushed] = []
    completer = Completer(rec, flushed.append, hold=60.0, claim_soon=lambda: True)  # type: ignore[arg-type]
    completer.start()
    ending = claimed_ending(q)
    assert completer.put(ending)
    taken = completer.take()  # the claim loop's claim takes it
    assert taken == [ending]
    statuses = q.report(completed=[(ending.job.id, ending.claim_id, ending.result)])
    completer.finish(taken, statuses)
    assert completer.close(timeout=5.0)
    assert rec.reports == 0  # never written on its own
    assert [f.statuses for f in flushed] == [{ending.job.id: Status.COMPLETED}]
    q.close()


def test_endings_are_written_alone_once_no_claim_is_coming(tmp_path: Path) -> None:
    q = conveyor.connect(f"sqlite:///{tmp_path / 'q.db'}", use_env=False)
    rec = Recording(q)
    coming = threading.Event()
    coming.set()
    written = threading.Event()
    flushed: list[Flushed] = []

    def on_flushed(f: Flushed) -> None:
        flushed.append(f)
        written.set()

    completer = Completer(rec, on_flushed, hold=60.0, claim_soon=coming.is_set)  # type: ignore[arg-type]
    completer.start()
    ending = claimed_ending(q)
    assert completer.put(ending)
    coming.clear()  # the queues ran dry: no claim will take it
    assert written.wait(30.0)
    assert rec.reports == 1
    assert flushed[0].statuses == {ending.job.id: Status.COMPLETED}
    assert completer.close(timeout=5.0)
    assert q.get(ending.job.id).status == Status.COMPLETED  # type: ignore[union-attr]
    q.close()


def test_endings_a_claim_gave_back_are_written_without_waiting(tmp_path: Path) -> None:
    q = conveyor.connect(f"sqlite:///{tmp_path / 'q.db'}", use_env=False)
    rec = Recording(q)
    written = threading.Event()
    flushed: list[Flushed] = []

    def on_flushed(f: Flushed) -> None:
        flushed.append(f)
        written.set()

    completer = Completer(rec, on_flushed, hold=60.0, claim_soon=lambda: True)  # type: ignore[arg-type]
    completer.start()
    ending = claimed_ending(q)
    assert completer.put(ending)
    taken = completer.take()
    assert taken == [ending]
    completer.give_back(taken, doubtful=False)  # the claim could not write it
    assert written.wait(30.0)  # not held for the next claim again
    assert rec.reports == 1
    assert flushed[0].statuses == {ending.job.id: Status.COMPLETED}
    assert completer.close(timeout=5.0)
    q.close()
