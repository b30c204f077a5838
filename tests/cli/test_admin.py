"""Operating the queue: migrate, retry, cancel, fail, release, reset-claims, prune."""

from __future__ import annotations

import json

import pytest

import conveyor
from conveyor import Status
from tests.cli.conftest import Cli, assert_one_line_error


def _failed_jobs(q: conveyor.Queue, queue: str, n: int) -> list[int]:
    for i in range(n):
        q.enqueue("flaky", {"i": i}, queue=queue)
    claim = q.claim(queue, limit=n)
    return [q.fail(j.id, claim.id, "boom", retryable=False).id for j in claim.jobs]


def test_migrate_reports_the_schema_version(cli: Cli, db_url: str) -> None:
    first = cli("migrate", "--json", "--db", db_url).json()
    assert first["applied"]
    again = cli("migrate", "--json", "--db", db_url).json()
    assert again["applied"] == []
    assert again["schema_version"] == first["schema_version"]
    assert "schema at version" in cli("migrate", "--db", db_url).stdout


def test_retry_one_failed_job(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        [job_id] = _failed_jobs(q, "default", 1)
    job = cli("retry", str(job_id), "--json", "--db", db_url).json()
    assert (job["status"], job["attempts"]) == ("pending", 0)
    again = cli("retry", str(job_id), "--db", db_url)
    assert_one_line_error(again, contains="expected status completed, failed or cancelled")


def test_retry_all_failed_in_one_queue(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        mine = _failed_jobs(q, "ocr", 3)
        theirs = _failed_jobs(q, "mail", 2)
    out = cli("retry", "--all-failed", "--queue", "ocr", "--json", "--db", db_url).json()
    assert sorted(out["ids"]) == mine
    assert out["count"] == 3
    assert out["skipped"] == []
    with conveyor.connect(db_url) as q:
        assert q.stats("ocr").pending == 3
        assert [q.get(i).status for i in theirs] == [Status.FAILED] * 2  # type: ignore[union-attr]
    everything = cli("retry", "--all-failed", "--db", db_url)
    assert "retried 2 failed job(s)" in everything.stdout


def test_retry_all_failed_skips_a_job_whose_key_is_active_again(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.enqueue("fetch", key="url-1")
        claim = q.claim()
        q.fail(claim.jobs[0].id, claim.id, "404", retryable=False)
        q.enqueue("fetch", key="url-1")  # a new active job took the key
    out = cli("retry", "--all-failed", "--json", "--db", db_url).json()
    assert out["count"] == 0
    assert [s["id"] for s in out["skipped"]] == [1]
    assert "another active job has its key" in out["skipped"][0]["reason"]


def test_cancel(cli: Cli, db_url: str) -> None:
    cli("enqueue", "t", "--db", db_url)
    out = cli("cancel", "1", "--json", "--db", db_url).json()
    assert out == {"count": 1, "ids": [1], "refused": []}
    with conveyor.connect(db_url) as q:
        assert q.get(1).status == Status.CANCELLED  # type: ignore[union-attr]
    assert_one_line_error(cli("cancel", "1", "--db", db_url), contains="found cancelled")


def test_cancel_takes_several_jobs_and_reports_each_refusal(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        ids = [j.id for j in q.enqueue_many([{"task": "t"}] * 3)]
        q.cancel(ids[1])
    result = cli("cancel", *map(str, [*ids, 99]), "--db", db_url)
    assert result.code == 1, result.describe()
    assert result.stdout.splitlines() == [f"job {ids[0]} cancelled", f"job {ids[2]} cancelled"]
    errors = result.stderr.strip().splitlines()
    assert [line.startswith("error: ") for line in errors] == [True, True]
    assert "found cancelled" in errors[0] and "does not exist" in errors[1]
    with conveyor.connect(db_url) as q:
        assert q.stats().cancelled == 3
    again = cli("cancel", str(ids[0]), "--json", "--db", db_url)
    assert again.code == 1
    assert json.loads(again.stdout)["refused"][0]["id"] == ids[0]


def test_release_puts_a_claims_jobs_back(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.enqueue_many([{"task": "t"}] * 3)
        claim = q.claim(limit=2)
    out = cli("release", claim.id, "--json", "--db", db_url).json()
    assert out == {"count": 2, "claim_id": claim.id}
    with conveyor.connect(db_url) as q:
        assert q.stats().pending == 3
    unknown = cli("release", claim.id, "--db", db_url)
    assert_one_line_error(unknown, contains="holds no running jobs")


def test_reset_claims_older_than(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.enqueue_many([{"task": "t"}] * 2)
        q.claim(limit=2)
    young = cli("reset-claims", "--older-than", "1h", "--json", "--db", db_url).json()
    assert young == {"count": 0, "older_than_seconds": 3600.0}
    old = cli("reset-claims", "--older-than", "0s", "--json", "--db", db_url).json()
    assert old["count"] == 2
    human = cli("reset-claims", "--older-than", "10m", "--db", db_url).stdout
    assert "reset 0 job(s) claimed more than 10m ago" in human


def test_release_of_some_queues_only(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.enqueue_many([{"task": "t"}] * 2)
        claim = q.claim(limit=2)
    none = cli("release", claim.id, "--queue", "other", "--db", db_url)
    assert_one_line_error(none, contains="holds no running jobs of those queues")
    assert claim.id not in none.stderr
    out = cli("release", claim.id, "-q", "other,default", "--json", "--db", db_url).json()
    assert out == {"count": 2, "claim_id": claim.id, "queues": ["other", "default"]}


def test_reset_claims_of_some_queues_and_tasks(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.enqueue_many([{"task": "books.sync"}, {"task": "books.ocr"}, {"task": "videos"}])
        q.enqueue("books.sync", queue="other")
        q.claim(limit=3)
        q.claim("other")
    args = ("reset-claims", "--older-than", "0s", "--json", "--db", db_url)
    one = cli(*args, "--task", "books.sync", "--queue", "default").json()
    assert one == {"count": 1, "older_than_seconds": 0.0, "queues": ["default"],
                   "tasks": ["books.sync"]}  # fmt: skip
    assert cli(*args, "-t", "books.sync").json()["count"] == 1  # the other queue's
    assert cli(*args, "-t", "books.ocr", "-t", "videos").json()["count"] == 2
    human = cli("reset-claims", "--older-than", "10m", "--task", "a,b", "--db", db_url).stdout
    assert "reset 0 job(s) of task a, b claimed more than 10m ago" in human
    with conveyor.connect(db_url) as q:
        assert q.stats().running == 0


def test_cancel_by_key(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        running = q.enqueue("books.sync", key="book-7", queue="sync")
        claim = q.claim("sync")
        other = q.enqueue("books.sync", key="book-7")
    out = cli("cancel", "--key", "book-7", "--queue", "sync", "--json", "--db", db_url).json()
    assert out == {"count": 1, "key": "book-7", "queue": "sync"}
    with conveyor.connect(db_url) as q:
        assert q.get(running.id).status == Status.CANCELLED  # type: ignore[union-attr]
        assert q.get(other.id).status == Status.PENDING  # type: ignore[union-attr]
        with pytest.raises(conveyor.InvalidTransition):
            q.complete(running.id, claim.id)
    human = cli("cancel", "--key", "book-7", "--db", db_url)
    assert "cancelled 1 job(s) with key 'book-7' in queue 'default'" in human.stdout
    none = cli("cancel", "-k", "book-7", "--db", db_url)
    assert_one_line_error(none, contains="no active job has key 'book-7' in queue 'default'")


def test_fail_by_key(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        job = q.enqueue("videos.encode", key="video-3", max_attempts=5)
    args = ("fail", "--key", "video-3", "--error", "source deleted", "--db", db_url)
    assert cli(*args, "--json").json() == {"count": 1, "key": "video-3", "queue": "default"}
    with conveyor.connect(db_url) as q:
        failed = q.get(job.id)
        assert failed is not None and failed.status == Status.FAILED
        assert (failed.error, failed.error_kind) == ("source deleted", "terminal")
    assert_one_line_error(cli(*args), contains="no active job has key 'video-3'")


def test_prune_deletes_old_final_jobs_of_the_statuses_named(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        _failed_jobs(q, "default", 2)
        q.enqueue("done")
        claim = q.claim()
        q.complete(claim.jobs[0].id, claim.id)
        q.enqueue("waiting")
    none = cli("prune", "--older-than", "1d", "--yes", "--json", "--db", db_url).json()
    assert none == {"count": 0, "dry_run": False, "statuses": ["completed"],
                    "older_than_seconds": 86400.0}  # fmt: skip
    completed = cli("prune", "--older-than", "0s", "--yes", "--json", "--db", db_url).json()
    assert completed["count"] == 1
    both = cli("prune", "--older-than", "0", "-s", "failed,cancelled", "-y", "--db", db_url)
    assert "removed 2 job(s) (failed, cancelled) finished more than 0s ago" in both.stdout
    with conveyor.connect(db_url) as q:
        assert [j.task for j in q.jobs()] == ["waiting"]


def test_prune_dry_run_counts_and_deletes_nothing(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        _failed_jobs(q, "default", 3)
        q.enqueue("waiting")
        before = [j.to_dict() for j in q.jobs()]
    dry = cli("prune", "--older-than", "0s", "-s", "failed", "--dry-run", "--json", "--db", db_url)
    assert dry.json()["count"] == 3 and dry.json()["dry_run"] is True
    young = cli("prune", "--older-than", "1h", "-s", "failed", "--dry-run", "--db", db_url)
    assert "would remove 0 job(s) (failed) finished more than 1h ago" in young.stdout
    with conveyor.connect(db_url) as q:
        assert [j.to_dict() for j in q.jobs()] == before


def test_prune_in_a_script_needs_yes(cli: Cli, sqlite_url: str) -> None:
    cli("migrate", "--db", sqlite_url)
    result = cli("prune", "--older-than", "0s", "--db", sqlite_url)
    assert_one_line_error(result, code=2, contains="add --yes to confirm")
    bad = cli("prune", "--older-than", "0s", "-s", "running", "--dry-run", "--db", sqlite_url)
    assert_one_line_error(bad, code=2, contains="expected final statuses")
