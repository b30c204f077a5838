"""The driver conformance suite: what every database driver must do, operation by
operation, below the queue. A new dialect is built against this suite before it meets
the whole contract suite (tests/core and the rest). Each test is one sentence about a
driver's behaviour, run on every dialect."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import conveyor
from conveyor.drivers import operations as db
from conveyor.drivers.base import Capabilities, Driver
from conveyor.errors import DatabaseError, DuplicateJob
from conveyor.job import Status


@pytest.fixture
def driver(q: conveyor.Queue) -> Driver:
    return q.driver


def insert(
    d: Driver,
    *,
    queue: str = "q",
    key: str | None = None,
    priority: int = 0,
    run_at: datetime | None = None,
    max_attempts: int = 3,
    payload: Any = None,
) -> int:
    op = db.InsertJob(
        queue=queue, task="t", payload=json.dumps(payload), key=key, priority=priority,
        run_at=None if run_at is None else d.encode_time(run_at), max_attempts=max_attempts,
        job_group=None, depends_on=None, waiting_for=0,
    )  # fmt: skip
    with d.session() as s:
        rows = s.run(op)
    assert rows, "insert_job answered no row"
    return int(rows[0]["id"])


def claim(
    d: Driver, *, queue: str = "q", limit: int = 10, lease_s: float = 30.0, claim_id: str = "c1"
) -> list[dict[str, Any]]:
    op = db.ClaimJobs(queue=queue, limit=limit, lease_s=lease_s, claim_id=claim_id, worker="w")
    with d.session() as s:
        return [dict(r) for r in s.run(op)]


def get(d: Driver, job: int) -> dict[str, Any]:
    with d.session(write=False) as s:
        rows = s.run(db.GetJob(id=job))
    assert rows
    return dict(rows[0])


def test_every_operation_can_be_run_by_the_driver(driver: Driver) -> None:
    statements = getattr(driver, "_queries", {})
    sessions = {type(s) for s in _session_classes(driver)}
    handled: set[str] = set()
    for cls in sessions:
        handled |= set(cls.handlers)
    missing = [n for n in db.all_operations() if n not in statements and n not in handled]
    assert missing == []


def _session_classes(d: Driver) -> Iterator[Any]:
    with d.session(write=False) as s:
        yield s


def test_the_driver_declares_its_capabilities(driver: Driver) -> None:
    assert isinstance(driver.capabilities, Capabilities)
    assert driver.dialect in ("sqlite", "postgresql", "mysql")
    assert driver.hears_other_processes in (True, False)


def test_an_insert_answers_the_new_id_and_what_the_database_decided(driver: Driver) -> None:
    first, second = insert(driver), insert(driver)
    assert second > first
    row = get(driver, first)
    assert row["status"] == Status.PENDING and row["attempts"] == 0
    assert driver.decode_time(row["run_at"]) is not None


def test_a_bulk_insert_answers_each_new_id_in_the_order_of_its_rows(driver: Driver) -> None:
    insert(driver)  # ids already handed out
    rows = [["bulk", "t", json.dumps({"n": n}), n % 3, None, 3, None, None] for n in range(30)]
    with driver.session() as s:
        new = s.run(db.InsertJobs(items=driver.rows_param(rows[:20]), ids_only=1))
        made = s.run(db.InsertJobs(items=driver.rows_param(rows[20:])))
    ids = sorted(r["id"] for r in new)
    made.sort(key=lambda r: r["id"])
    assert len(set(ids)) == 20 and ids[0] > 1
    assert [r["id"] for r in made] > ids and len(made) == 10
    for n, job in enumerate([*ids, *(r["id"] for r in made)]):
        row = get(driver, job)
        assert driver.decode_json(row["payload"]) == {"n": n} and row["priority"] == n % 3
    assert all(driver.decode_time(r["created_at"]) is not None for r in made)


def test_a_second_active_job_with_the_same_key_is_not_inserted(driver: Driver) -> None:
    insert(driver, key="k")
    op = db.InsertJob(queue="q", task="t", payload="null", key="k", priority=0, run_at=None,
                      max_attempts=3, job_group=None, depends_on=None, waiting_for=0)  # fmt: skip
    try:
        with driver.session() as s:
            rows = s.run(op)
    except DuplicateJob:
        rows = []
    assert rows == []
    with driver.session(write=False) as s:
        assert len(s.run(db.JobsByKey(queue="q", key="k", active=1))) == 1


def test_a_claim_takes_due_pending_jobs_by_priority_then_id(driver: Driver) -> None:
    late = insert(driver, priority=5)
    first, second = insert(driver), insert(driver)
    insert(driver, run_at=datetime.now(timezone.utc) + timedelta(hours=1))  # not due
    rows = claim(driver, limit=10)
    assert sorted((r["priority"], r["id"]) for r in rows) == [(0, first), (0, second), (5, late)]
    assert {r["status"] for r in rows} == {Status.RUNNING}
    assert {r["attempts"] for r in rows} == {1}
    assert {r["claim_id"] for r in rows} == {"c1"}


def test_a_claim_answers_each_job_as_the_database_now_holds_it(driver: Driver) -> None:
    ids = [insert(driver, payload={"n": n}, max_attempts=2) for n in range(3)]
    claimed = [driver.decode_job(r) for r in claim(driver, limit=2, lease_s=45.5)]
    assert claimed == [driver.decode_job(get(driver, job.id)) for job in claimed]
    assert all(j.attempts == 1 and j.worker == "w" and j.lease_expires_at for j in claimed)
    one = db.ClaimIds(id=ids[2], lease_s=30.0, claim_id="c2", worker="w2")
    with driver.session() as s:
        rows = [dict(r) for r in s.run(one)]
    assert [driver.decode_job(r) for r in rows] == [driver.decode_job(get(driver, ids[2]))]
    job = driver.decode_job(rows[0])
    assert job.claim_id == "c2" and job.lease_expires_at and job.claimed_at
    assert (job.lease_expires_at - job.claimed_at).total_seconds() == pytest.approx(30.0, abs=0.002)


def test_a_claim_respects_its_limit_and_leaves_the_rest_pending(driver: Driver) -> None:
    ids = [insert(driver) for _ in range(5)]
    assert len(claim(driver, limit=2)) == 2
    pending = [i for i in ids if get(driver, i)["status"] == Status.PENDING]
    assert len(pending) == 3


def test_concurrent_claims_never_take_the_same_job(driver: Driver, db_url: str) -> None:
    for _ in range(60):
        insert(driver)
    taken: list[list[int]] = []
    errors: list[BaseException] = []

    def grab(n: int) -> None:
        other = conveyor.connect(db_url)
        try:
            while True:
                rows = claim(other.driver, limit=3, claim_id=f"c{n}")
                if not rows:
                    return
                taken.append([r["id"] for r in rows])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            other.close()

    threads = [threading.Thread(target=grab, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    flat = [i for batch in taken for i in batch]
    assert len(flat) == len(set(flat)) == 60


def test_a_write_under_another_claim_changes_nothing(driver: Driver) -> None:
    job = insert(driver)
    claim(driver, claim_id="mine")
    items = driver.json_param([{"id": job, "claim_id": "someone-else", "result": "1"}])
    with driver.session() as s:
        assert s.run(db.CompleteJobs(items=items)) == []
    assert get(driver, job)["status"] == Status.RUNNING
    items = driver.json_param([{"id": job, "claim_id": "mine", "result": "1"}])
    with driver.session() as s:
        done = s.run(db.CompleteJobs(items=items))
    assert [r["id"] for r in done] == [job]
    assert get(driver, job)["status"] == Status.COMPLETED


def test_one_report_completes_the_jobs_of_several_claims_each_with_its_own_result(
    driver: Driver,
) -> None:
    # A report may name one claim (a batch) or several, with or without results: every
    # form completes the jobs each named claim still holds, and only those.
    jobs = [insert(driver) for _ in range(5)]
    claim(driver, limit=2, claim_id="a")
    claim(driver, limit=2, claim_id="b")
    items = [{"id": jobs[0], "claim_id": "a", "result": None},
             {"id": jobs[2], "claim_id": "b", "result": json.dumps({"n": 2})},
             {"id": jobs[3], "claim_id": "a", "result": None},  # b holds it
             {"id": jobs[4], "claim_id": "a", "result": None}]  # nobody holds it  # fmt: skip
    with driver.session() as s:
        done = s.run(db.CompleteJobs(items=driver.json_param(items)))
    assert sorted(r["id"] for r in done) == [jobs[0], jobs[2]]
    assert [get(driver, j)["status"] for j in jobs] == [
        Status.COMPLETED, Status.RUNNING, Status.COMPLETED, Status.RUNNING, Status.PENDING,
    ]  # fmt: skip
    assert driver.decode_json(get(driver, jobs[2])["result"]) == {"n": 2}
    assert get(driver, jobs[0])["result"] is None
    # One claim, none with a result; then one claim with results.
    one = [{"id": jobs[1], "claim_id": "a", "result": None},
           {"id": jobs[3], "claim_id": "a", "result": None}]  # fmt: skip
    with driver.session() as s:
        done = s.run(db.CompleteJobs(items=driver.json_param(one)))
    assert [r["id"] for r in done] == [jobs[1]]
    held = [{"id": jobs[3], "claim_id": "b", "result": json.dumps([3])}]
    with driver.session() as s:
        done = s.run(db.CompleteJobs(items=driver.json_param(held)))
    assert [r["id"] for r in done] == [jobs[3]]
    assert driver.decode_json(get(driver, jobs[3])["result"]) == [3]


def test_a_failure_is_written_only_at_the_attempt_it_was_decided_on(driver: Driver) -> None:
    job = insert(driver)
    claim(driver, claim_id="c")

    def fail(attempts: int) -> list[Any]:
        item = {"id": job, "claim_id": "c", "attempts": attempts, "again": True,
                "error": "boom", "error_kind": "retryable", "delay_s": 0}  # fmt: skip
        with driver.session() as s:
            return list(s.run(db.FailJobs(items=driver.json_param([item]))))

    assert fail(2) == []  # decided on an attempt count that is not the job's
    [row] = fail(1)
    assert row["status"] == Status.PENDING and row["error"] == "boom"
    assert row["claim_id"] is None


def test_a_final_failure_keeps_the_claim_for_the_record(driver: Driver) -> None:
    job = insert(driver, max_attempts=1)
    claim(driver, claim_id="c")
    item = {"id": job, "claim_id": "c", "attempts": 1, "again": False,
            "error": "bad", "error_kind": "terminal", "delay_s": None}  # fmt: skip
    with driver.session() as s:
        [row] = s.run(db.FailJobs(items=driver.json_param([item])))
    assert row["status"] == Status.FAILED and row["claim_id"] == "c"
    assert driver.decode_time(row["finished_at"]) is not None


def test_expired_leases_are_listed_and_ended_under_their_claim(driver: Driver) -> None:
    job = insert(driver)
    claim(driver, claim_id="c", lease_s=0.001)
    live = insert(driver, queue="other")
    claim(driver, queue="other", claim_id="d", lease_s=600)
    _wait_past(driver, 0.05)
    with driver.session(write=False) as s:
        expired = s.run(db.ExpiredLeases(queues=None, id=None, limit=10))
    assert [r["id"] for r in expired] == [job]
    assert expired[0]["claim_id"] == "c" and expired[0]["attempts"] == 1
    stale = {"id": job, "claim_id": "not-c", "again": True, "error": "e", "cause": "x"}
    item = {"id": job, "claim_id": "c", "again": True, "error": "e (1 of 3)", "cause": "e"}
    with driver.session() as s:
        assert s.run(db.EndLeases(items=driver.json_param([stale]))) == []
        ended = s.run(db.EndLeases(items=driver.json_param([item])))
    assert [(r["id"], r["status"]) for r in ended] == [(job, Status.PENDING)]
    row = get(driver, job)
    assert row["claim_id"] is None and row["error"] == "e (1 of 3)"
    assert get(driver, live)["status"] == Status.RUNNING


def test_a_lease_renewed_after_it_was_read_is_not_ended(driver: Driver) -> None:
    job = insert(driver)
    claim(driver, claim_id="c", lease_s=0.001)
    _wait_past(driver, 0.05)
    renew = db.HeartbeatJobs(items=driver.json_param([{"id": job, "claim_id": "c"}]), extend_s=60)
    with driver.session() as s:
        assert len(s.run(renew)) == 1
    item = {"id": job, "claim_id": "c", "again": True, "error": "e", "cause": "e"}
    with driver.session() as s:
        assert s.run(db.EndLeases(items=driver.json_param([item]))) == []
    assert get(driver, job)["status"] == Status.RUNNING


def test_a_cancel_is_refused_once_the_job_is_final(driver: Driver) -> None:
    job = insert(driver)
    with driver.session() as s:
        assert len(s.run(db.CancelJobs(id=job))) == 1
        assert s.run(db.CancelJobs(id=job)) == []
    assert get(driver, job)["status"] == Status.CANCELLED


def test_a_session_that_raises_writes_nothing(driver: Driver) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), driver.session() as s:
        s.run(db.InsertJob(queue="q", task="t", payload="1", key=None, priority=0,
                           run_at=None, max_attempts=1, job_group=None, depends_on=None,
                           waiting_for=0))  # fmt: skip
        raise Boom
    assert claim(driver) == []


def test_write_once_commits_a_single_operation(driver: Driver) -> None:
    insert(driver)
    op = db.ClaimJobs(queue="q", limit=5, lease_s=30, claim_id="once", worker="w")
    rows = driver.write_once(op, queues=("q",))
    assert len(rows) == 1
    assert get(driver, rows[0]["id"])["claim_id"] == "once"


def test_deleting_jobs_deletes_the_final_ones_among_them_each_once_and_counts_them(
    q: conveyor.Queue,
) -> None:
    d = q.driver
    final, active = insert(d), insert(d)
    q.cancel(final)
    with d.session() as s:
        deleted = s.run(db.DeleteJobs(ids=d.json_param([final, final, active])))
    assert deleted == 1
    with d.session(write=False) as s:
        assert not s.run(db.GetJob(id=final))
    assert get(d, active)["status"] == "pending"
    stats = q.stats(queue="q")
    assert (stats.pending, stats.cancelled) == (1, 0)
    with d.session() as s:
        assert s.run(db.DeleteJobs(id=active)) == 0  # not final: kept


def test_times_are_utc_and_come_back_as_they_went_in(driver: Driver) -> None:
    when = datetime(2031, 5, 6, 7, 8, 9, 123000, tzinfo=timezone.utc)
    job = insert(driver, run_at=when)
    back = driver.decode_time(get(driver, job)["run_at"])
    assert back == when and back is not None and back.utcoffset() == timedelta(0)


def test_json_comes_back_as_it_went_in(driver: Driver) -> None:
    value = {"z": 1, "a": [1.5, 2**53 + 1, None, True], "text": "ü ✓ 日本 \U0001f600", "n": {}}
    job = insert(driver, payload=value)
    assert driver.decode_json(get(driver, job)["payload"]) == value


def test_an_unknown_job_reads_as_no_row(driver: Driver) -> None:
    with driver.session(write=False) as s:
        assert s.run(db.GetJob(id=987654321)) == []


def test_migrating_again_applies_nothing(driver: Driver) -> None:
    assert driver.migrate() == []
    assert driver.schema_version() == driver.latest_version()


def test_a_closed_driver_raises_a_database_error(db_url: str) -> None:
    q = conveyor.connect(db_url)
    q.close()
    with pytest.raises(DatabaseError), q.driver.session() as s:
        s.run(db.GetJob(id=1))


def _wait_past(d: Driver, seconds: float) -> None:
    """Let the database clock move on by ``seconds``."""
    with d.session(write=False) as s:
        start = d.decode_time(s.run(db.DbNow())[0]["db_now"])
    assert start is not None
    while True:
        with d.session(write=False) as s:
            now = d.decode_time(s.run(db.DbNow())[0]["db_now"])
        if now is not None and (now - start).total_seconds() > seconds:
            return
        threading.Event().wait(0.01)
