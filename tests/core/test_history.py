"""Every failed attempt's error is kept on the job; the current error is cleared when
the job completes."""

from __future__ import annotations

import time

import conveyor
from conveyor import ErrorKind, Status


def test_each_failed_attempt_joins_the_history(q: conveyor.Queue) -> None:
    job = q.enqueue("t", max_attempts=3)
    for n in (1, 2):
        claim = q.claim(worker=f"w{n}")
        q.fail(job.id, claim.id, f"boom {n}", delay=0)
    claim = q.claim(worker="w3")
    done = q.complete(job.id, claim.id, result="ok")
    assert done.status == Status.COMPLETED
    assert done.error is None and done.error_kind is None  # cleared on success
    assert [(e.attempt, e.error, e.kind, e.worker) for e in done.errors] == [
        (1, "boom 1", ErrorKind.RETRYABLE, "w1"),
        (2, "boom 2", ErrorKind.RETRYABLE, "w2"),
    ]
    assert done.errors[0].at <= done.errors[1].at <= done.finished_at  # type: ignore[operator]


def test_a_terminal_failure_and_a_lost_lease_are_recorded(q: conveyor.Queue) -> None:
    job = q.enqueue("t", max_attempts=5)
    q.claim(lease=0.05, worker="gone")
    time.sleep(0.2)
    assert q.recover() == 1
    claim = q.claim()
    failed = q.fail(job.id, claim.id, "bad input", retryable=False)
    assert failed.status == Status.FAILED and failed.error == "bad input"
    first, second = failed.errors
    assert first.attempt == 1 and "lease expired" in first.error and first.worker == "gone"
    assert second.attempt == 2 and second.kind == ErrorKind.TERMINAL


def test_the_history_keeps_the_latest_twenty(q: conveyor.Queue) -> None:
    job = q.enqueue("t", max_attempts=30)
    for n in range(25):
        claim = q.claim()
        q.fail(job.id, claim.id, f"attempt {n + 1}", delay=0)
    latest = q.get(job.id)
    assert latest is not None and len(latest.errors) == 20
    assert [e.attempt for e in latest.errors] == list(range(6, 26))
    assert latest.error == "attempt 25"


def test_a_long_error_is_kept_whole_as_the_error_and_its_end_in_the_history(
    q: conveyor.Queue,
) -> None:
    job = q.enqueue("t")
    claim = q.claim()
    text = "x" * 5000 + "the cause"
    failed = q.fail(job.id, claim.id, text, delay=0)
    assert failed.error == text
    assert failed.errors[0].error.endswith("the cause") and len(failed.errors[0].error) == 4000
