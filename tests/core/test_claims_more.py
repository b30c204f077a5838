"""Claiming one job by id, snoozing, writing many endings at once, renewing leases,
admin resets scoped to queues, and recovery of a stale job by the next reader."""

from __future__ import annotations

import contextlib
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import conveyor
from conveyor import InvalidArgument, InvalidTransition, JobNotFound, StaleClaim, Status


def test_claim_job_takes_exactly_that_job_once(q: conveyor.Queue) -> None:
    first = q.enqueue("t")
    second = q.enqueue("t")
    claim = q.claim_job(second.id, lease=60, worker="w")
    assert [j.id for j in claim.jobs] == [second.id] and claim.jobs[0].claim_id == claim.id
    with pytest.raises(InvalidTransition, match="expected status pending"):
        q.claim_job(second.id)  # of two callers, only one wins
    with pytest.raises(JobNotFound):
        q.claim_job(123456)
    assert [j.id for j in q.claim(limit=5).jobs] == [first.id]
    assert q.complete(second.id, claim.id).status == Status.COMPLETED


def test_claim_ids_are_random_uuids_that_differ_from_claim_to_claim(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(3)])
    ids = [q.claim(limit=1).id for _ in range(2)] + [q.claim_job(q.enqueue("t").id).id]
    for made in ids:  # applications carry them as UUIDs
        assert uuid.UUID(made).hex == made and uuid.UUID(made).version == 4
    assert len(set(ids)) == len(ids)


def test_snooze_puts_the_job_back_without_spending_an_attempt(q: conveyor.Queue) -> None:
    job = q.enqueue("t", max_attempts=1)
    claim = q.claim()
    snoozed = q.snooze(job.id, claim.id, 0.2)
    assert snoozed.status == Status.PENDING and snoozed.attempts == 0
    assert snoozed.claim_id is None and snoozed.run_at > snoozed.updated_at
    assert q.claim().jobs == []  # not before the delay
    time.sleep(0.3)
    again = q.claim()
    assert again.jobs[0].attempts == 1  # still its first attempt
    with pytest.raises(StaleClaim):
        q.snooze(job.id, claim.id, 1)  # the old claim is gone


def test_a_snooze_of_no_delay_keeps_a_run_at_already_past(q: conveyor.Queue) -> None:
    # A worker that stops hands back the jobs it claimed ahead this way: a job enqueued
    # for a schedule's slot must still say which slot it stands for.
    slot = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=5)
    job = q.enqueue("t", run_at=slot)
    snoozed = q.snooze(job.id, q.claim().id, 0)
    assert snoozed.status == Status.PENDING and snoozed.attempts == 0
    assert snoozed.run_at == slot and q.get(job.id).run_at == slot  # type: ignore[union-attr]
    assert [j.id for j in q.claim().jobs] == [job.id]  # due at once all the same
    claim = q.claim_job(q.enqueue("t", run_at=slot + timedelta(hours=1)).id)
    early = q.snooze(claim.jobs[0].id, claim.id, 0)  # claimed by id before its time
    assert early.run_at <= datetime.now(timezone.utc) and early.run_at > slot


def test_report_writes_every_kind_of_ending_in_one_call(q: conveyor.Queue) -> None:
    jobs = q.enqueue_many([{"task": "t", "max_attempts": 2} for _ in range(5)])
    claim = q.claim(limit=5)
    a, b, c, d, e = (j.id for j in claim.jobs)
    q.release_job(e)  # e's claim is gone: its ending must be refused
    written = q.report(
        completed=[(a, claim.id, {"ok": 1}), (e, claim.id, None)],
        failed=[(b, claim.id, "retry me", True, 0), (c, claim.id, "never", False, None)],
        snoozed=[(d, claim.id, 0)],
    )
    assert written == {a: Status.COMPLETED, b: Status.PENDING, c: Status.FAILED,
                       d: Status.PENDING}  # fmt: skip
    assert q.get(a).result == {"ok": 1}  # type: ignore[union-attr]
    assert q.get(d).attempts == 0 and q.get(b).attempts == 1  # type: ignore[union-attr]
    assert q.report() == {}
    assert len(jobs) == 5


def test_renew_answers_the_ids_still_held(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(3)])
    claim = q.claim(limit=3, lease=30)
    lost = claim.jobs[0].id
    q.release_job(lost)
    held = q.renew([(j.id, claim.id) for j in claim.jobs], extend=120)
    assert held == {j.id for j in claim.jobs[1:]}
    job = q.get(claim.jobs[1].id)
    assert job is not None and job.lease_expires_at is not None
    assert (job.lease_expires_at - job.heartbeat_at).total_seconds() > 100  # type: ignore[operator]


def test_release_job_is_an_admin_reset_of_one_job(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    claim = q.claim()
    released = q.release_job(job.id)
    assert released.status == Status.PENDING and released.claim_id is None
    with pytest.raises(StaleClaim):
        q.complete(job.id, claim.id)
    with pytest.raises(InvalidTransition):
        q.release_job(job.id)


def test_resets_and_recovery_can_be_scoped_to_queues(q: conveyor.Queue) -> None:
    for name in ("mine", "theirs"):
        q.enqueue("t", queue=name)
        q.enqueue("t", queue=name)
    mine, theirs = q.claim("mine", lease=0.05), q.claim("theirs", lease=0.05)
    time.sleep(0.2)
    assert q.recover(queue="mine") == 1
    # (a list does not recover what it shows; reading one job would)
    assert [j.id for j in q.jobs(status="running")] == [theirs.jobs[0].id]
    assert q.recover(queue=["mine", "theirs"]) == 1
    a, b = q.claim("mine"), q.claim("theirs")
    assert q.release(b.id, queue="mine") == 0  # that claim holds nothing in "mine"
    assert q.reset_claims(0, queue="theirs") == 1
    assert q.get(a.jobs[0].id).status == Status.RUNNING  # type: ignore[union-attr]
    with pytest.raises(InvalidArgument, match="queue"):
        q.recover(queue=[])
    assert mine.jobs and theirs.jobs


def test_a_stale_running_job_is_recovered_by_the_next_read(q: conveyor.Queue) -> None:
    job = q.enqueue("t", key="k")
    q.claim(lease=0.05)
    time.sleep(0.2)
    seen = q.get(job.id)
    assert seen is not None and seen.status == Status.PENDING
    assert "lease expired" in (seen.error or "")
    q.claim(lease=0.05)
    time.sleep(0.2)
    latest = q.latest("k")
    assert latest is not None and latest.status == Status.PENDING and latest.attempts == 2


def test_a_stale_running_job_does_not_hold_its_key(q: conveyor.Queue) -> None:
    job = q.enqueue("t", key="k", max_attempts=1)
    q.claim(lease=0.05)
    time.sleep(0.2)
    fresh = q.enqueue("t", key="k")  # the stale job failed (no attempts left)
    assert fresh.id != job.id and not fresh.deduplicated
    assert q.get(job.id).status == Status.FAILED  # type: ignore[union-attr]


def test_a_completed_key_is_never_run_again_when_asked(q: conveyor.Queue) -> None:
    job = q.enqueue("t", key="once")
    claim = q.claim()
    q.complete(job.id, claim.id, result="done")
    again = q.enqueue("t", key="once", on_completed="return")
    assert again.id == job.id and again.deduplicated and again.result == "done"
    assert q.enqueue("t", key="once").id != job.id  # the default makes a new job
    with pytest.raises(InvalidArgument, match="on_completed"):
        q.enqueue("t", key="x", on_completed="maybe")  # type: ignore[arg-type]


def test_complete_by_key_can_reconcile_a_failed_job(q: conveyor.Queue) -> None:
    job = q.enqueue("subtitle", key="video-1", max_attempts=1)
    claim = q.claim()
    q.fail(job.id, claim.id, "no audio", retryable=False)
    assert q.complete_by_key("video-1") == 0  # only active jobs by default
    assert q.complete_by_key("video-1", include_failed=True, result={"found": True}) == 1
    done = q.get(job.id)
    assert done is not None and done.status == Status.COMPLETED and done.error is None
    assert done.result == {"found": True} and done.errors[0].error == "no audio"


def test_latest_and_jobs_filter_by_task_and_time(q: conveyor.Queue) -> None:
    ocr = q.enqueue("ocr", key="book-1")
    q.complete(ocr.id, q.claim().id)
    extract = q.enqueue("extract", key="book-1")
    assert q.latest("book-1").id == extract.id  # type: ignore[union-attr]
    assert q.latest("book-1", task="ocr").id == ocr.id  # type: ignore[union-attr]
    assert q.latest("book-1", task="nope") is None
    assert [j.id for j in q.jobs(task="ocr")] == [ocr.id]
    since = q.now()
    time.sleep(0.01)
    late = q.enqueue("ocr")
    assert [j.id for j in q.jobs(created_after=since)] == [late.id]
    assert [j.id for j in q.jobs(created_before=since, newest_first=True)] == [extract.id, ocr.id]
    with pytest.raises(InvalidArgument, match="created_after"):
        q.jobs(created_after="yesterday")  # type: ignore[arg-type]


def test_a_retry_can_keep_the_attempts_spent_within_the_budget(q: conveyor.Queue) -> None:
    job = q.enqueue("download", max_attempts=2)
    claim = q.claim_job(job.id)
    q.fail(job.id, claim.id, "HTTP 403", retryable=False)
    again = q.retry(job.id, reset_attempts=False)
    assert again.status == Status.PENDING and again.attempts == 1  # the count is kept
    with pytest.raises(InvalidTransition, match="expected status failed or cancelled"):
        q.retry(job.id, reset_attempts=False)  # already pending: of two callers, one wins
    claim = q.claim_job(job.id)
    q.fail(job.id, claim.id, "HTTP 403", retryable=False)
    with pytest.raises(InvalidTransition, match=r"attempts are spent \(2 of 2\)"):
        q.retry(job.id, reset_attempts=False)
    assert q.get(job.id).status == Status.FAILED  # type: ignore[union-attr]
    assert q.retry(job.id).attempts == 0  # an operator's retry still starts afresh
    with pytest.raises(JobNotFound):
        q.retry(987654, reset_attempts=False)
    with pytest.raises(InvalidArgument, match="reset_attempts"):
        q.retry(job.id, reset_attempts="no")  # type: ignore[arg-type]


@pytest.mark.queue_kinds("queue")
def test_complete_by_key_commits_with_the_callers_transaction(db_url: str) -> None:
    q = conveyor.connect(db_url)
    job = q.enqueue("sync", key="book-1")
    with _app_connection(q, db_url) as conn:
        assert q.complete_by_key("book-1", conn=conn) == 1
        assert q.get(job.id).status == Status.PENDING  # type: ignore[union-attr]
        conn.rollback()  # the application changed its mind: so does the queue
        assert q.get(job.id).status == Status.PENDING  # type: ignore[union-attr]
        assert q.complete_by_key("book-1", conn=conn, result={"id": "hc-1"}) == 1
        conn.commit()
    done = q.get(job.id)
    assert done is not None and done.status == Status.COMPLETED and done.result == {"id": "hc-1"}
    q.close()


def _app_connection(q: conveyor.Queue, url: str) -> Any:
    """The application's own connection to the queue's database."""
    if q.dialect == "sqlite":
        import sqlite3

        return contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"), timeout=10))
    if q.dialect == "mysql":
        from tests.conftest import mysql_connection

        return contextlib.closing(mysql_connection(url.rsplit("/", 1)[1], autocommit=False))
    import psycopg

    from tests.conftest import PG_URL

    schema = url.rsplit("schema=", 1)[1]
    conn = psycopg.connect(PG_URL, options=f"-c search_path={schema}")
    return contextlib.closing(conn)


def test_a_claim_writes_the_endings_it_carries_in_its_own_transaction(q: conveyor.Queue) -> None:
    done, broken, later, gone = (q.enqueue("t", max_attempts=1) for _ in range(4))
    first = q.claim(limit=4)
    assert len(first.jobs) == 4
    q.cancel(gone.id)  # its worker's ending will be refused
    fresh = q.enqueue("t")
    report = conveyor.Report(
        completed=[(done.id, first.id, {"ok": 1}), (gone.id, first.id, None)],
        failed=[(broken.id, first.id, "boom", True, None)],
        snoozed=[(later.id, first.id, 60)],
    )
    second = q.claim(limit=5, report=report, count_remaining=False)
    assert second.reported == {
        done.id: Status.COMPLETED,
        broken.id: Status.FAILED,  # its one attempt is spent
        later.id: Status.PENDING,
    }
    assert [j.id for j in second.jobs] == [fresh.id]  # the snoozed one is not due
    assert q.get(done.id).result == {"ok": 1}
    assert q.get(broken.id).error == "boom"
    assert q.get(gone.id).status == Status.CANCELLED


def test_a_claim_with_an_invalid_report_writes_nothing(q: conveyor.Queue) -> None:
    job = q.enqueue("t")
    first = q.claim()
    with pytest.raises(InvalidArgument):
        q.claim(report=conveyor.Report(failed=[(job.id, first.id, "x", "yes", None)]))
    assert q.get(job.id).status == Status.RUNNING
    assert q.claim(report=conveyor.Report()).reported == {}
