"""Claim and report: every allowed transition, every refused one, and fencing."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

import conveyor
from conveyor import InvalidArgument, InvalidTransition, JobNotFound, StaleClaim, Status


def _running(q: conveyor.Queue, **enqueue: object) -> tuple[conveyor.Job, conveyor.Claim]:
    job = q.enqueue("t", **enqueue)  # type: ignore[arg-type]
    claim = q.claim(job.queue)
    assert [j.id for j in claim.jobs] == [job.id]
    return claim.jobs[0], claim


# -- claim --------------------------------------------------------------------------
def test_claim_takes_jobs_by_priority_then_fifo(q: conveyor.Queue) -> None:
    low = q.enqueue("t", priority=5)
    first = q.enqueue("t")
    second = q.enqueue("t")
    urgent = q.enqueue("t", priority=-1)
    claim = q.claim(limit=10)
    assert [j.id for j in claim.jobs] == [urgent.id, first.id, second.id, low.id]


def test_claim_marks_jobs_running_under_one_claim(q: conveyor.Queue) -> None:
    for _ in range(3):
        q.enqueue("t")
    claim = q.claim(limit=2, lease=timedelta(seconds=60), worker="w1")
    assert len(claim.jobs) == 2 and claim.remaining == 1 and claim.queue == "default"
    for job in claim.jobs:
        assert job.status == Status.RUNNING
        assert job.claim_id == claim.id and job.worker == "w1" and job.attempts == 1
        assert job.claimed_at is not None and job.started_at is not None
        assert job.lease_expires_at is not None
        lease = (job.lease_expires_at - job.claimed_at).total_seconds()
        assert 59.9 < lease < 60.1


def test_claim_on_an_empty_queue_returns_an_empty_claim(q: conveyor.Queue) -> None:
    claim = q.claim("nothing-here", limit=100)
    assert claim.jobs == [] and claim.remaining == 0 and claim.id


def test_claim_only_sees_its_queue_and_due_jobs(q: conveyor.Queue) -> None:
    q.enqueue("t", queue="other")
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    q.enqueue("t", run_at=later)
    due = q.enqueue("t", run_at=datetime.now(timezone.utc) - timedelta(seconds=1))
    claim = q.claim(limit=10)
    assert [j.id for j in claim.jobs] == [due.id]
    assert claim.remaining == 0  # the scheduled job is not claimable now


def test_claim_with_ack_completes_the_previous_claim_first(q: conveyor.Queue) -> None:
    jobs = q.enqueue_many([{"task": "t"} for _ in range(5)])
    first = q.claim(limit=2)
    second = q.claim(limit=2, ack=first.id)
    assert second.acked == 2 and second.remaining == 1
    assert all(q.get(j.id).status == Status.COMPLETED for j in first.jobs)  # type: ignore[union-attr]
    assert {j.id for j in second.jobs}.isdisjoint(j.id for j in first.jobs)
    third = q.claim(limit=2, ack="no-such-claim")  # an unknown ack changes nothing
    assert third.acked == 0 and len(third.jobs) == 1
    assert q.stats().completed == 2 and len(jobs) == 5


def test_claim_without_counting_leaves_remaining_unknown(q: conveyor.Queue) -> None:
    q.enqueue("t")
    assert q.claim(count_remaining=False).remaining is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": -1}, "limit"),
        ({"limit": 10**6}, "limit"),
        ({"lease": 0}, "lease"),
        ({"lease": -5}, "lease"),
        ({"lease": "soon"}, "lease"),
        ({"queue": ""}, "queue"),
    ],
)
def test_bad_claim_arguments_write_nothing(
    q: conveyor.Queue, kwargs: dict[str, object], message: str
) -> None:
    q.enqueue("t")
    with pytest.raises(InvalidArgument, match=message):
        q.claim(**kwargs)  # type: ignore[arg-type]
    assert q.stats().pending == 1


# -- complete -----------------------------------------------------------------------
def test_complete_stores_the_result(q: conveyor.Queue) -> None:
    job, claim = _running(q)
    done = q.complete(job.id, claim.id, result={"path": "/tmp/x.mp4"})
    assert done.status == Status.COMPLETED and done.result == {"path": "/tmp/x.mp4"}
    assert done.finished_at is not None and done.lease_expires_at is None
    assert done.is_final


def test_complete_twice_is_an_invalid_transition(q: conveyor.Queue) -> None:
    job, claim = _running(q)
    q.complete(job.id, claim.id)
    with pytest.raises(InvalidTransition, match="expected status running, found completed"):
        q.complete(job.id, claim.id)


def test_complete_unknown_job(q: conveyor.Queue) -> None:
    with pytest.raises(JobNotFound, match="job 999999"):
        q.complete(999999, "claim")


def test_complete_many_skips_stale_items(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(3)])
    claim = q.claim(limit=3)
    a, b, c = claim.jobs
    q.release(claim.id)
    again = q.claim(limit=1)
    done = q.complete_many([(again.jobs[0].id, again.id, 1), (b.id, claim.id, 2)])
    assert [j.id for j in done] == [again.jobs[0].id]
    assert q.stats().completed == 1 and q.stats().pending == 2
    assert a.id == again.jobs[0].id and c.id


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda q, j, c: q.complete_many([(j, c)]),
            r"items\[0\]: expected \(job_id, claim_id, result\), got 2 values",
        ),
        (
            lambda q, j, c: q.complete_many([j]),
            r"items\[0\]: expected \(job_id, claim_id, result\), got int",
        ),
        (
            lambda q, j, c: q.complete_many("abc"),
            r"items: expected a list of \(job_id, claim_id, result\), got str",
        ),
        (
            lambda q, j, c: q.fail_many([(j, c, "boom")]),
            r"items\[0\]: expected \(job_id, claim_id, error, retryable, delay\), got 3 values",
        ),
        (
            lambda q, j, c: q.heartbeat_many([(j, c, 30)], extend=30),
            r"items\[0\]: expected \(job_id, claim_id\), got 3 values",
        ),
        (
            lambda q, j, c: q.report(completed=[(j, c)]),
            r"report.completed\[0\]: expected \(job_id, claim_id, result\)",
        ),
        (
            lambda q, j, c: q.report(snoozed=[(j, c, 1, 2)]),
            r"report.snoozed\[0\]: expected \(job_id, claim_id, delay\), got 4 values",
        ),
        (
            lambda q, j, c: q.claim(report=conveyor.Report(failed=[(j, c, "x")])),
            r"report.failed\[0\]: expected \(job_id, claim_id, error, retryable, delay\)",
        ),
    ],
)
def test_items_of_the_wrong_shape_are_refused_and_change_nothing(
    q: conveyor.Queue, call: Callable[[conveyor.Queue, int, str], object], message: str
) -> None:
    job, claim = _running(q)
    with pytest.raises(InvalidArgument, match=message) as refused:
        call(q, job.id, claim.id)
    assert claim.id not in str(refused.value)  # a claim id is a secret
    assert q.get(job.id).status == Status.RUNNING and q.stats().completed == 0
    assert q.complete(job.id, claim.id).status == Status.COMPLETED  # still its claim's


# -- fencing ------------------------------------------------------------------------
def test_a_stale_claim_changes_nothing(q: conveyor.Queue) -> None:
    job, old = _running(q)
    q.release(old.id)
    new = q.claim()
    for write in (
        lambda: q.complete(job.id, old.id, result="zombie"),
        lambda: q.fail(job.id, old.id, "zombie"),
        lambda: q.heartbeat(job.id, old.id),
        lambda: q.progress(job.id, old.id, completed=99),
    ):
        with pytest.raises(StaleClaim, match="the claim given no longer holds it") as refused:
            write()
        # Claim ids are secrets: a refusal names neither the stale nor the current one.
        assert old.id not in str(refused.value) and new.id not in str(refused.value)
    current = q.get(job.id)
    assert current is not None
    # Over HTTP a read shows no claim id (a secret of its holder); the new claim's write
    # below shows it holds the job.
    assert current.status == Status.RUNNING and current.claim_id in (new.id, None)
    assert current.result is None and current.progress.completed is None
    assert q.complete(job.id, new.id, result="real").result == "real"


def test_a_reset_claim_cannot_complete_after_recovery(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    old = q.claim(lease=0.05)
    time.sleep(0.2)
    assert q.recover() == 1
    with pytest.raises(StaleClaim):
        q.complete(job.id, old.id)
    assert q.get(job.id).status == Status.PENDING  # type: ignore[union-attr]


# -- fail and backoff ---------------------------------------------------------------
def test_retryable_failure_goes_back_to_pending_after_backoff(
    open_queue: Callable[..., conveyor.Queue], db_url: str
) -> None:
    with open_queue(db_url, backoff=conveyor.Backoff(base=2, jitter=0)) as q:
        job, claim = _running(q, max_attempts=5)
        failed = q.fail(job.id, claim.id, "rate limited")
        assert failed.status == Status.PENDING and failed.error == "rate limited"
        assert failed.error_kind == "retryable" and failed.claim_id is None
        assert 1.9 < (failed.run_at - failed.updated_at).total_seconds() < 2.1
        assert q.claim().jobs == []  # not before run_at


def test_backoff_doubles_with_each_attempt(
    open_queue: Callable[..., conveyor.Queue], db_url: str
) -> None:
    with open_queue(db_url, backoff=conveyor.Backoff(base=0.05, jitter=0)) as q:
        job = q.enqueue("t", max_attempts=5)
        delays = []
        for _ in range(4):
            claim = q.claim()
            deadline = time.monotonic() + 5
            while not claim.jobs and time.monotonic() < deadline:
                time.sleep(0.02)
                claim = q.claim()
            assert claim.jobs, "the job never became claimable again"
            failed = q.fail(job.id, claim.id, "again")
            delays.append(round((failed.run_at - failed.updated_at).total_seconds(), 2))
        assert delays == [0.05, 0.1, 0.2, 0.4]


def test_explicit_delay_overrides_the_backoff(q: conveyor.Queue) -> None:
    job, claim = _running(q)
    failed = q.fail(job.id, claim.id, "later", delay=timedelta(minutes=10))
    assert 599 < (failed.run_at - failed.updated_at).total_seconds() < 601
    job2, claim2 = _running(q)
    now_again = q.fail(job2.id, claim2.id, "now", delay=0)
    assert q.claim().jobs[0].id == now_again.id


def test_failure_is_final_when_attempts_are_spent(q: conveyor.Queue) -> None:
    job = q.enqueue("t", max_attempts=2)
    for attempt in (1, 2):
        claim = q.claim()
        assert claim.jobs[0].attempts == attempt
        result = q.fail(job.id, claim.id, f"boom {attempt}", delay=0)
    assert result.status == Status.FAILED and result.error == "boom 2"
    assert result.finished_at is not None and result.error_kind == "retryable"
    assert q.claim().jobs == []


def test_terminal_failure_is_never_retried(q: conveyor.Queue) -> None:
    job, claim = _running(q, max_attempts=10)
    failed = q.fail(job.id, claim.id, "bad input", retryable=False)
    assert failed.status == Status.FAILED and failed.error_kind == "terminal"
    assert failed.attempts == 1


def test_fail_refusals(q: conveyor.Queue) -> None:
    job, claim = _running(q)
    with pytest.raises(InvalidArgument, match="error: expected a string"):
        q.fail(job.id, claim.id, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="delay"):
        q.fail(job.id, claim.id, "x", delay=-1)
    with pytest.raises(InvalidArgument, match="retryable"):
        q.fail(job.id, claim.id, "x", retryable="no")  # type: ignore[arg-type]
    assert q.get(job.id).status == Status.RUNNING  # type: ignore[union-attr]
    q.complete(job.id, claim.id)
    with pytest.raises(InvalidTransition, match="found completed"):
        q.fail(job.id, claim.id, "late")


def test_fail_many(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t", "max_attempts": 1}, {"task": "t", "max_attempts": 3}])
    claim = q.claim(limit=2)
    a, b = claim.jobs
    out = q.fail_many(
        [
            (a.id, claim.id, "x", True, None),
            (b.id, claim.id, "y", True, 0),
            (b.id, "stale", "z", True, 0),
        ]
    )
    assert {j.id: j.status for j in out} == {a.id: Status.FAILED, b.id: Status.PENDING}


# -- heartbeat and progress ---------------------------------------------------------
def test_heartbeat_extends_the_lease(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    claim = q.claim(lease=timedelta(seconds=30))
    beat = q.heartbeat(job.id, claim.id)
    assert beat.heartbeat_at is not None and beat.lease_expires_at is not None
    assert 29 < (beat.lease_expires_at - beat.heartbeat_at).total_seconds() < 31
    longer = q.heartbeat(job.id, claim.id, extend=timedelta(hours=1))
    assert 3599 < (longer.lease_expires_at - longer.heartbeat_at).total_seconds() < 3601  # type: ignore[operator]
    assert [j.id for j in q.heartbeat_many([(job.id, claim.id), (job.id, "old")])] == [job.id]


def test_heartbeat_keeps_a_job_from_recovery(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    claim = q.claim(lease=0.3)
    for _ in range(4):
        time.sleep(0.1)
        q.heartbeat(job.id, claim.id)
    assert q.recover() == 0
    assert q.get(job.id).status == Status.RUNNING  # type: ignore[union-attr]
    assert q.heartbeat(job.id, claim.id).status == Status.RUNNING  # still this claim's


def test_progress_records_absolute_values(q: conveyor.Queue) -> None:
    job, claim = _running(q)
    q.progress(job.id, claim.id, total=300, completed=10, current="page 11", checkpoint=10)
    same = q.progress(job.id, claim.id, total=300, completed=10, current="page 11", checkpoint=10)
    assert same.progress.completed == 10  # a replay changes nothing
    later = q.progress(job.id, claim.id, completed=20, failed=1, detail={"errors": {"7": "ocr"}})
    p = later.progress
    assert (p.total, p.completed, p.failed, p.current, p.checkpoint) == (300, 20, 1, "page 11", 10)
    assert p.detail == {"errors": {"7": "ocr"}}
    assert p.fraction == pytest.approx(21 / 300)
    with pytest.raises(InvalidArgument, match="completed"):
        q.progress(job.id, claim.id, completed=-1)


def test_checkpoint_survives_retry_recover_and_release(q: conveyor.Queue) -> None:
    job, claim = _running(q, max_attempts=5)
    q.progress(job.id, claim.id, checkpoint={"page": 41})
    q.fail(job.id, claim.id, "transient", delay=0)
    claim = q.claim()
    assert claim.jobs[0].progress.checkpoint == {"page": 41}
    q.release(claim.id)
    claim = q.claim(lease=0.05)
    time.sleep(0.2)
    q.recover()
    assert q.claim().jobs[0].progress.checkpoint == {"page": 41}


# -- ack, release, reset, recover ----------------------------------------------------
def test_ack_completes_a_claims_running_jobs(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(3)])
    claim = q.claim(limit=3)
    q.complete(claim.jobs[0].id, claim.id)
    assert q.ack(claim.id) == 2
    assert q.ack(claim.id) == 0
    assert q.stats().completed == 3


def test_release_puts_jobs_back_and_clears_the_claim(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(2)])
    claim = q.claim(limit=2)
    assert q.release(claim.id) == 2
    for job in q.jobs():
        assert job.status == Status.PENDING
        assert (job.claim_id, job.claimed_at, job.lease_expires_at, job.worker) == (
            None,
            None,
            None,
            None,
        )
    assert q.release(claim.id) == 0
    assert q.release("never-existed") == 0


def test_reset_claims_older_than(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(2)])
    old = q.claim()
    claimed_old = time.monotonic()
    time.sleep(2.0)
    young = q.claim()
    # The cut-off falls half-way between the two claims, so a slow round trip (a loaded
    # machine, a queue reached over HTTP) leaves a second of margin on either side.
    halfway = claimed_old + 1.0
    assert q.reset_claims(timedelta(seconds=time.monotonic() - halfway)) == 1
    assert q.get(old.jobs[0].id).status == Status.PENDING  # type: ignore[union-attr]
    assert q.get(young.jobs[0].id).status == Status.RUNNING  # type: ignore[union-attr]
    assert q.reset_claims(0) == 1
    with pytest.raises(InvalidArgument, match="older_than"):
        q.reset_claims(-1)


def test_recover_requeues_or_fails_by_attempts(q: conveyor.Queue) -> None:
    spare = q.enqueue("t", max_attempts=2)
    last = q.enqueue("t", max_attempts=1)
    q.claim(limit=2, lease=0.05, worker="crashed-worker")
    held = q.enqueue("t")
    q.claim(lease=60)
    time.sleep(0.2)
    assert q.recover() == 2
    again = q.get(spare.id)
    dead = q.get(last.id)
    assert again is not None and dead is not None
    assert again.status == Status.PENDING and again.claim_id is None
    assert dead.status == Status.FAILED and dead.finished_at is not None
    assert dead.error is not None and "lease expired" in dead.error
    assert "crashed-worker" in dead.error
    assert q.get(held.id).status == Status.RUNNING  # type: ignore[union-attr]
    assert q.recover() == 0


# -- retry, cancel, complete_by_key -------------------------------------------------
def test_retry_reopens_a_final_job_with_fresh_attempts(q: conveyor.Queue) -> None:
    job = q.enqueue("t", max_attempts=1)
    claim = q.claim()
    q.fail(job.id, claim.id, "x")
    again = q.retry(job.id)
    assert again.status == Status.PENDING and again.attempts == 0 and again.finished_at is None
    claim = q.claim()
    q.complete(job.id, claim.id, result=1)
    reopened = q.retry(job.id)  # an explicit retry re-opens even a completed job
    assert reopened.status == Status.PENDING and reopened.result is None
    q.cancel(job.id)
    assert q.retry(job.id).status == Status.PENDING


def test_retry_refusals(q: conveyor.Queue) -> None:
    job = q.enqueue("t", key="k")
    with pytest.raises(InvalidTransition, match="expected status completed, failed or cancelled"):
        q.retry(job.id)
    with pytest.raises(JobNotFound):
        q.retry(123456789)
    q.cancel(job.id)
    q.enqueue("t", key="k")
    with pytest.raises(InvalidTransition, match="another active job has its key"):
        q.retry(job.id)


def test_cancel_pending_and_running(q: conveyor.Queue) -> None:
    pending = q.enqueue("t")
    cancelled = q.cancel(pending.id)
    assert cancelled.status == Status.CANCELLED and cancelled.finished_at is not None
    job, claim = _running(q)
    q.cancel(job.id)
    with pytest.raises(InvalidTransition, match="found cancelled"):
        q.complete(job.id, claim.id)
    with pytest.raises(InvalidTransition, match="expected status pending or running"):
        q.cancel(job.id)


def test_complete_by_key(q: conveyor.Queue) -> None:
    job = q.enqueue("subtitles", key="video-9")
    q.enqueue("subtitles", key="video-9", queue="other")
    assert q.complete_by_key("video-9", result={"found": "on disk"}) == 1
    done = q.get(job.id)
    assert done is not None and done.status == Status.COMPLETED
    assert done.result == {"found": "on disk"}
    assert q.complete_by_key("video-9") == 0
    assert q.complete_by_key("video-9", queue="other") == 1


# -- the whole transition table -------------------------------------------------------
def _in_state(q: conveyor.Queue, status: Status) -> tuple[conveyor.Job, str | None]:
    job = q.enqueue("t", max_attempts=1)
    if status == Status.PENDING:
        return job, None
    claim = q.claim()
    if status == Status.COMPLETED:
        q.complete(job.id, claim.id)
    elif status == Status.FAILED:
        q.fail(job.id, claim.id, "x")
    elif status == Status.CANCELLED:
        q.cancel(job.id)
    return job, claim.id


ALLOWED = {
    ("complete", Status.RUNNING),
    ("fail", Status.RUNNING),
    ("heartbeat", Status.RUNNING),
    ("progress", Status.RUNNING),
    ("cancel", Status.PENDING),
    ("cancel", Status.RUNNING),
    ("retry", Status.COMPLETED),
    ("retry", Status.FAILED),
    ("retry", Status.CANCELLED),
}


@pytest.mark.parametrize("status", list(Status))
@pytest.mark.parametrize(
    "operation", ["complete", "fail", "heartbeat", "progress", "cancel", "retry"]
)
def test_transition_table(q: conveyor.Queue, status: Status, operation: str) -> None:
    job, claim_id = _in_state(q, status)
    calls = {
        "complete": lambda: q.complete(job.id, claim_id or "none"),
        "fail": lambda: q.fail(job.id, claim_id or "none", "x"),
        "heartbeat": lambda: q.heartbeat(job.id, claim_id or "none"),
        "progress": lambda: q.progress(job.id, claim_id or "none", completed=1),
        "cancel": lambda: q.cancel(job.id),
        "retry": lambda: q.retry(job.id),
    }
    before = q.get(job.id)
    if (operation, status) in ALLOWED:
        calls[operation]()
    else:
        with pytest.raises((InvalidTransition, StaleClaim)):
            calls[operation]()
        assert q.get(job.id) == before  # a refused transition writes nothing
