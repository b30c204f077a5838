"""Job counts are kept as jobs change, so stats() and Claim.remaining never count the
backlog: they must always equal what a full count of the table says."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

import conveyor
from conveyor import Status
from conveyor.ops.claims import FOLD_AFTER
from tests.conftest import drop_schema, fresh_url, require_postgres
from tests.core.conftest import count_jobs, waiting_deltas


def _truth(q: conveyor.Queue) -> dict[tuple[str, str], int]:
    counted: Counter[tuple[str, str]] = Counter()
    for (queue, _task, status), n in count_jobs(q).items():
        counted[(queue, status)] += n
    return dict(counted)


def _kept(q: conveyor.Queue) -> dict[tuple[str, str], int]:
    kept = {}
    for name, stats in q.queue_stats().items():
        for status in Status:
            n = getattr(stats, str(status))
            if n:
                kept[(name, str(status))] = n
    return kept


def test_counts_follow_every_kind_of_change(q: conveyor.Queue) -> None:
    rng = random.Random(7)
    q.enqueue_many([{"task": "t", "queue": rng.choice("ab")} for _ in range(60)])
    dep = q.enqueue("t", queue="a")
    q.enqueue("t", queue="a", after=[dep.id])  # cancelled with it below
    for _round in range(8):
        claim = q.claim(rng.choice("ab"), limit=rng.randint(1, 8))
        for job in claim.jobs:
            action = rng.choice(["complete", "fail", "retryable", "release", "cancel", "keep"])
            if action == "complete":
                q.complete(job.id, claim.id)
            elif action == "fail":
                q.fail(job.id, claim.id, "x", retryable=False)
            elif action == "retryable":
                q.fail(job.id, claim.id, "x", delay=0)
            elif action == "cancel":
                q.cancel(job.id)
        if rng.random() < 0.3:
            q.release(claim.id)
        assert _kept(q) == _truth(q)
    q.cancel(dep.id)
    q.complete_by_key("nothing", queue="a")
    assert q.prune(older_than=0, statuses=["completed", "failed", "cancelled"]) > 0
    assert _kept(q) == _truth(q)


def test_claims_and_completions_of_every_kind_keep_the_counts(q: conveyor.Queue) -> None:
    """Every way a job is claimed (by queue, flow-controlled, by id) and completed (one,
    many, acked with the next claim, reported with it, by key from each state): per
    queue, task and status the counts equal the jobs (checked by the fixture), and each
    completion is charted once."""
    q.enqueue_many([{"task": t, "queue": "hot"} for t in ("a", "b", "c") for _ in range(6)])
    first = q.claim("hot", limit=4)  # a claim of several tasks
    q.complete_many([(j.id, first.id, None) for j in first.jobs[:2]])
    q.complete(first.jobs[2].id, first.id)
    second = q.claim("hot", limit=3, ack=first.id)  # the last of the first claim acked
    assert second.acked == 1
    third = q.claim("hot", limit=3, report=conveyor.Report(
        completed=[(j.id, second.id, {"n": 1}) for j in second.jobs]))  # fmt: skip
    assert set(third.reported.values()) == {Status.COMPLETED}
    by_id = q.claim_job(q.enqueue("d", queue="hot").id)
    q.complete(by_id.jobs[0].id, by_id.id)
    q.set_limits("limited", max_running=2)  # the flow-controlled claim
    q.enqueue_many([{"task": "e", "queue": "limited"} for _ in range(3)])
    limited = q.claim("limited", limit=3)
    assert len(limited.jobs) == 2
    q.complete_many([(j.id, limited.id, None) for j in limited.jobs])
    running = q.enqueue("f", queue="keys", key="k1")
    q.claim("keys")
    failed = q.enqueue("g", queue="keys", key="k3")
    q.fail(failed.id, q.claim("keys").id, "x", retryable=False)
    q.enqueue("f", queue="keys", key="k2")  # pending
    assert q.complete_by_key("k1", queue="keys") == 1  # running
    assert q.complete_by_key("k2", queue="keys") == 1  # pending
    assert q.complete_by_key("k3", queue="keys", include_failed=True) == 1
    assert q.get(running.id).status == Status.COMPLETED  # type: ignore[union-attr]
    stats = q.stats()
    charted = q.throughput(minutes=5)
    assert sum(m.completed for m in charted) == stats.completed == 4 + 3 + 1 + 2 + 3
    assert sum(m.failed for m in charted) == 1 and stats.failed == 0


def test_remaining_leaves_out_scheduled_and_waiting_jobs(q: conveyor.Queue) -> None:
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    q.enqueue_many([{"task": "t"} for _ in range(5)])
    q.enqueue("t", run_at=later)
    first = q.enqueue("t")
    q.enqueue("t", after=[first.id])
    claim = q.claim(limit=2)
    assert claim.remaining == 4  # 6 ready - 2 claimed; not the scheduled or waiting one
    stats = q.stats()
    assert (stats.pending, stats.running, stats.scheduled) == (6, 2, 1)


def test_throughput_counts_completions_and_failures_per_minute(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(5)])
    claim = q.claim(limit=5)
    q.complete_many([(j.id, claim.id, None) for j in claim.jobs[:3]])
    for job in claim.jobs[3:]:
        q.fail(job.id, claim.id, "no", retryable=False)
    points = q.throughput(minutes=5)
    assert sum(p.completed for p in points) == 3 and sum(p.failed for p in points) == 2
    assert all(p.minute.second == 0 for p in points)
    assert q.throughput(queue="elsewhere") == []


def test_folding_keeps_the_counts(q: conveyor.Queue) -> None:
    q.enqueue_many([{"task": "t"} for _ in range(20)])
    claim = q.claim(limit=5)
    q.complete_many([(j.id, claim.id, None) for j in claim.jobs])
    before = (q.stats(), q.throughput())
    q.fold_counts()
    assert (q.stats(), q.throughput()) == before
    assert q.fold_counts() == 0  # nothing left to fold


@pytest.mark.queue_kinds("queue")
def test_a_counted_claim_folds_the_deltas_once_they_pile_up(q: conveyor.Queue) -> None:
    # Each single enqueue leaves a delta on PostgreSQL and MySQL (none on SQLite, which
    # counts in place); past FOLD_AFTER of them, a claim that counts folds a batch.
    for n in range(FOLD_AFTER + 5):
        q.enqueue("t", {"n": n})
    piled = waiting_deltas(q)
    assert piled == 0 or piled > FOLD_AFTER
    claim = q.claim(limit=3)
    assert claim.remaining == FOLD_AFTER + 2
    assert waiting_deltas(q) < 10  # the claim's own, and what came after the fold
    assert q.stats().pending == FOLD_AFTER + 2 and q.stats().running == 3


def test_a_large_update_after_small_ones_stays_linear(tmp_path: Path) -> None:
    # PostgreSQL keeps a trigger's plan per connection: one planned for a one-row claim
    # must not turn a later update of many rows into a nested loop over both transition
    # tables (20,000 rows took 41 s that way, 0.1 s with a hash join). The statement
    # timeout is two hundred times what the update needs: it fails only if it goes
    # quadratic again. (SQLite counts with row triggers: nothing to plan.)
    require_postgres()
    db_url, schema = fresh_url("postgresql", tmp_path)
    base = db_url.partition("?")[0]
    base, _, schema = db_url.partition("?schema=")
    q = conveyor.connect(db_url)
    try:
        q.enqueue_ids([{"task": "t"} for _ in range(20_000)])
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path = "{schema}"')
            conn.execute("SET statement_timeout = '20s'")
            conn.execute(
                "UPDATE conveyor_jobs SET status = 'running'"
                " WHERE id = (SELECT min(id) FROM conveyor_jobs)"
            )
            conn.execute("UPDATE conveyor_jobs SET status = 'cancelled' WHERE status = 'pending'")
        assert (
            _kept(q) == _truth(q) == {("default", "running"): 1, ("default", "cancelled"): 19_999}
        )
    finally:
        q.close()
        drop_schema(schema or "")


def test_folders_running_at_once_fail_nothing_and_count_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers, claimers and workers' upkeep fold at the same moments while jobs change
    (a retention pass makes deltas by the thousand): no fold may fail, and the counts
    end as a full count says."""
    import threading

    from conveyor.drivers.mysql import handlers

    monkeypatch.setattr(handlers, "_FOLD_BATCH", 20)  # many batches in every fold (MySQL)

    setup = conveyor.connect(db_url)
    setup.enqueue_ids([{"task": "t"} for _ in range(3000)])
    errors: list[BaseException] = []
    done = threading.Event()

    def churn() -> None:
        q = conveyor.connect(db_url, migrate=False)
        try:
            while not done.is_set():
                claim = q.claim(limit=50)
                if not claim.jobs:
                    return
                q.complete_many([(j.id, claim.id, None) for j in claim.jobs])
        except BaseException as exc:
            errors.append(exc)
        finally:
            q.close()

    def fold() -> None:
        q = conveyor.connect(db_url, migrate=False)
        try:
            while not done.is_set():
                q.fold_counts()
                q.stats()
        except BaseException as exc:
            errors.append(exc)
        finally:
            q.close()

    threads = [threading.Thread(target=churn) for _ in range(2)]
    threads += [threading.Thread(target=fold) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads[:2]:
        t.join(120)
    done.set()
    for t in threads:
        t.join(30)
    assert errors == []
    setup.fold_counts()
    assert _kept(setup) == _truth(setup) == {("default", "completed"): 3000}
    setup.close()
