"""Operating the queue: migrate, retry, cancel, release, reset-claims, prune."""

from __future__ import annotations

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
    assert out["retried"] == 3
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
    assert out["retried"] == 0
    assert [s["id"] for s in out["skipped"]] == [1]
    assert "another active job has its key" in out["skipped"][0]["reason"]


def test_cancel(cli: Cli, db_url: str) -> None:
    cli("enqueue", "t", "--db", db_url)
    job = cli("cancel", "1", "--json", "--db", db_url).json()
    assert job["status"] == "cancelled"
    assert_one_line_error(cli("cancel", "1", "--db", db_url), contains="found cancelled")


def test_release_puts_a_claims_jobs_back(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.enqueue_many([{"task": "t"}] * 3)
        claim = q.claim(limit=2)
    out = cli("release", claim.id, "--json", "--db", db_url).json()
    assert out == {"claim_id": claim.id, "reset_count": 2}
    with conveyor.connect(db_url) as q:
        assert q.stats().pending == 3
    unknown = cli("release", claim.id, "--db", db_url)
    assert_one_line_error(unknown, contains="holds no running jobs")


def test_reset_claims_older_than(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.enqueue_many([{"task": "t"}] * 2)
        q.claim(limit=2)
    young = cli("reset-claims", "--older-than", "1h", "--json", "--db", db_url).json()
    assert young == {"reset_count": 0}
    old = cli("reset-claims", "--older-than", "0s", "--json", "--db", db_url).json()
    assert old == {"reset_count": 2}
    human = cli("reset-claims", "--older-than", "10m", "--db", db_url).stdout
    assert "reset 0 job(s) claimed more than 10m ago" in human


def test_prune_deletes_old_final_jobs_of_the_statuses_named(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        _failed_jobs(q, "default", 2)
        q.enqueue("done")
        claim = q.claim()
        q.complete(claim.jobs[0].id, claim.id)
        q.enqueue("waiting")
    none = cli("prune", "--older-than", "1d", "--json", "--db", db_url).json()
    assert none == {"removed_count": 0}
    completed = cli("prune", "--older-than", "0s", "--json", "--db", db_url).json()
    assert completed == {"removed_count": 1}
    both = cli("prune", "--older-than", "0", "-s", "failed,cancelled", "--json", "--db", db_url)
    assert both.json() == {"removed_count": 2}
    with conveyor.connect(db_url) as q:
        assert [j.task for j in q.jobs()] == ["waiting"]
