"""Reading the queue: ``jobs``, ``show``, ``stats`` (and ``--watch``), ``info``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import conveyor
from tests.cli.conftest import COMMAND_TIMEOUT_S, Cli, cli_env


def _fill(db_url: str) -> conveyor.Queue:
    q = conveyor.connect(db_url)
    q.enqueue("a", {"n": 1}, queue="q1")
    q.enqueue("b", {"n": 2}, queue="q1", key="k")
    q.enqueue("c", {"n": 3}, queue="q2")
    q.enqueue("d", {"n": 4}, queue="q2")
    claim = q.claim("q2", limit=1, worker="w1")
    q.fail(claim.jobs[0].id, claim.id, "boom", retryable=False)
    return q


def test_jobs_lists_newest_first_with_filters(cli: Cli, db_url: str) -> None:
    _fill(db_url).close()
    every = cli("jobs", "--json", "--db", db_url).json()
    assert [j["id"] for j in every] == [4, 3, 2, 1]
    assert [j["id"] for j in cli("jobs", "--oldest-first", "--json", "--db", db_url).json()] == [
        1, 2, 3, 4,
    ]  # fmt: skip
    by_queue = cli("jobs", "--queue", "q1", "--json", "--db", db_url).json()
    assert {j["task"] for j in by_queue} == {"a", "b"}
    failed = cli("jobs", "--status", "failed", "--json", "--db", db_url).json()
    assert [(j["task"], j["error"]) for j in failed] == [("c", "boom")]
    keyed = cli("jobs", "--key", "k", "--json", "--db", db_url).json()
    assert [j["task"] for j in keyed] == ["b"]


def test_jobs_pages_with_limit_and_after(cli: Cli, db_url: str) -> None:
    _fill(db_url).close()
    first = cli("jobs", "--limit", "3", "--json", "--db", db_url).json()
    rest = cli("jobs", "--after", str(first[-1]["id"]), "--json", "--db", db_url).json()
    assert [j["id"] for j in first + rest] == [4, 3, 2, 1]
    human = cli("jobs", "--limit", "3", "--db", db_url).stdout
    assert "next page: --after 2" in human


def test_jobs_table_shows_status_and_error(cli: Cli, db_url: str) -> None:
    _fill(db_url).close()
    table = cli("jobs", "--db", db_url).stdout
    header, *rows = table.strip().splitlines()
    assert header.split()[:4] == ["id", "queue", "task", "status"]
    failed = next(row for row in rows if row.split()[0] == "3")
    assert "failed" in failed
    assert "boom" in failed
    assert "\x1b[" not in table  # no colour codes when not a terminal


def test_show_gives_every_field(cli: Cli, db_url: str) -> None:
    q = _fill(db_url)
    q.enqueue("b", queue="q1", key="k", subscriber="chat:42")
    q.close()
    job = cli("show", "2", "--json", "--db", db_url).json()
    assert job["task"] == "b"
    assert job["key"] == "k"
    assert job["subscribers"] == ["chat:42"]
    assert {"progress", "attempts", "claim_id", "created_at"} <= set(job)
    human = cli("show", "3", "--db", db_url).stdout
    assert "boom" in human
    assert "terminal" in human


def test_stats_counts_per_queue_and_in_total(cli: Cli, db_url: str) -> None:
    _fill(db_url).close()
    out = cli("stats", "--json", "--db", db_url).json()
    assert out["total"]["pending"] == 3
    assert out["total"]["failed"] == 1
    assert out["queues"]["q2"]["failed"] == 1
    assert out["queues"]["q1"]["pending"] == 2
    one = cli("stats", "--queue", "q1", "--json", "--db", db_url).json()
    assert list(one["queues"]) == ["q1"]
    assert one["total"]["pending"] == 2
    table = cli("stats", "--db", db_url).stdout
    assert "all queues" in table


def test_stats_watch_streams_json_lines_until_interrupted(db_url: str, tmp_path: Path) -> None:
    _fill(db_url).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "stats", "--watch", "--json", "--interval", "0.2",
         "--db", db_url],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ticks = [json.loads(proc.stdout.readline()) for _ in range(2)]
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        proc.kill()
        proc.wait()
    assert [t["total"]["pending"] for t in ticks] == [3, 3]
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_info_shows_workers_and_expired_claims(cli: Cli, db_url: str) -> None:
    q = _fill(db_url)
    live = q.claim("q1", limit=2, worker="host-a:1", lease=600)
    stale = q.claim("q2", limit=1, worker="host-b:7", lease=0.05)
    q.close()
    time.sleep(0.3)  # let the short lease run out
    out = cli("info", "--json", "--db", db_url).json()
    assert out["schema_version"] >= 1
    assert out["stats"]["total"]["running"] == 3
    workers = {w["worker"]: w for w in out["workers"]}
    assert workers["host-a:1"]["jobs"] == 2
    assert workers["host-b:7"]["queues"] == ["q2"]
    claims = {c["claim_id"]: c for c in out["claims"]}
    assert claims[live.id]["expired"] is False
    assert claims[stale.id]["expired"] is True
    assert out["claims"][0]["claim_id"] == stale.id  # expired claims first
    human = cli("info", "--db", db_url).stdout
    assert "host-a:1" in human
    assert "expired" in human
    assert "conveyor release CLAIM" in human


def test_info_on_an_empty_queue(cli: Cli, db_url: str) -> None:
    cli("migrate", "--db", db_url)
    out = cli("info", "--json", "--db", db_url).json()
    assert out["workers"] == []
    assert out["claims"] == []
    assert "none running" in cli("info", "--db", db_url).stdout
