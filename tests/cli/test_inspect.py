"""Reading the queue: ``jobs``, ``show``, ``stats`` (and ``--watch``), ``info``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import conveyor
from tests.cli.conftest import COMMAND_TIMEOUT_S, Cli, cli_env
from tests.conftest import drop_schema, fresh_url


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
    human = cli("jobs", "--limit", "3", "--db", db_url)
    assert "next page: --after 2" in human.stderr  # a pipe reading stdout gets rows only
    assert "next page" not in human.stdout


def test_jobs_table_shows_status_and_error(cli: Cli, db_url: str) -> None:
    _fill(db_url).close()
    table = cli("jobs", "--db", db_url).stdout
    header, *rows = table.strip().splitlines()
    assert header.split()[:4] == ["id", "queue", "task", "status"]
    failed = next(row for row in rows if row.split()[0] == "3")
    assert "failed" in failed
    assert "boom" in failed
    assert "\x1b[" not in table  # no colour codes when not a terminal


def test_jobs_at_80_columns_shows_queue_and_task_whole(cli: Cli, sqlite_url: str) -> None:
    with conveyor.connect(sqlite_url) as q:
        q.enqueue("demo.subtitles.generate", {"video": "episode-001.mkv"},
                  queue="demo.subtitles", key="episode-001")  # fmt: skip
        q.enqueue("demo.fetch.story", queue="demo.fetch", key="https://fics.example/s/1")
        claim = q.claim("demo.subtitles")
        q.fail(claim.jobs[0].id, claim.id, "RuntimeError: speech model busy", retryable=False)
    table = cli("jobs", "--db", sqlite_url, env=cli_env(COLUMNS="80")).stdout
    lines = table.strip().splitlines()
    assert all(len(line) <= 80 for line in lines), table
    header, *rows = lines
    assert header.split()[:3] == ["id", "queue", "task"]
    by_id = {row.split()[0]: row.split() for row in rows}
    assert by_id["1"][1:3] == ["demo.subtitles", "demo.subtitles.generate"], table
    assert by_id["2"][1:3] == ["demo.fetch", "demo.fetch.story"], table
    assert "RuntimeError" in table  # the outcome stays, shortened
    assert len(rows) == 2  # one line per job


def test_show_lists_what_a_job_waits_for_and_its_dependents(cli: Cli, sqlite_url: str) -> None:
    with conveyor.connect(sqlite_url) as q:
        fetch = q.enqueue("fetch")
        parse = q.enqueue("parse")
        report = q.enqueue("report", after=[fetch.id, parse.id])
        claim = q.claim()
        q.complete(claim.jobs[0].id, claim.id, None)
    shown = cli("show", str(report.id), "--db", sqlite_url).stdout
    line = next(ln for ln in shown.splitlines() if ln.startswith("waits for"))
    assert f"{fetch.id} (completed)" in line and f"{parse.id} (pending)" in line, shown
    assert "1 not done yet" in line
    upstream = cli("show", str(fetch.id), "--db", sqlite_url).stdout
    assert any(ln.split()[:2] == ["dependents", str(report.id)] for ln in upstream.splitlines())
    as_json = cli("show", str(fetch.id), "--json", "--db", sqlite_url).json()
    assert as_json["dependents"] == [report.id]
    assert cli("show", str(report.id), "--json", "--db", sqlite_url).json()["depends_on"] == [
        fetch.id, parse.id]  # fmt: skip


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
    assert "3  failed (final)" in human
    assert "error (final: terminal)" in human


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


def test_show_says_whether_a_failure_is_final_and_why(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        spent = q.enqueue("t", max_attempts=1)
        again = q.enqueue("t", max_attempts=3)
        claim = q.claim(limit=2)
        q.fail(spent.id, claim.id, "timeout", retryable=True)  # retryable, but no attempt left
        q.fail(again.id, claim.id, "timeout", retryable=True, delay=60)
    final = cli("show", str(spent.id), "--db", db_url).stdout
    assert f"{spent.id}  failed (final)" in final
    assert "error (final: no attempts left)" in final and "retryable" not in final
    pending = cli("show", str(again.id), "--db", db_url).stdout
    assert f"{again.id}  pending (will retry: attempt 2 of 3)" in pending
    assert "error (retryable)" in pending


def test_info_names_the_postgresql_schema(cli: Cli, tmp_path: Path) -> None:
    url, schema = fresh_url("postgresql", tmp_path)
    try:
        cli("migrate", "--db", url)
        assert f"?schema={schema}" in cli("info", "--db", url).stdout
        assert cli("info", "--json", "--db", url).json()["database"].endswith(f"?schema={schema}")
        assert f"?schema={schema}" in cli("migrate", "--db", url).stdout
    finally:
        drop_schema(schema)  # type: ignore[arg-type]


WIDE = "a-rather-long-queue-name-for-the-narrow-terminal"


def _crowded(db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        for n in range(3):
            q.enqueue("emails.send_welcome_message_to_a_new_customer", {"n": n}, queue=WIDE,
                      key=f"customer-{n}-welcome-message")  # fmt: skip
        q.enqueue("t", queue="b")
        claim = q.claim(WIDE, limit=2, worker="worker-host-with-a-long-name:12345")
        q.fail(claim.jobs[0].id, claim.id, "ValueError: something went wrong", retryable=False)
        q.worker_seen("worker-host-with-a-long-name:12345", host="h", pid=1, queues=[WIDE, "b"],
                      concurrency=8, version="0.1.0", running=1, ttl=60)  # fmt: skip
        q.set_limits("b", max_running=3, rate="10/1s")
        q.save_schedule("nightly-report", task="reports.nightly", queue="b", spec="0 3 * * *",
                        first_slot=None, next_slot=None)  # fmt: skip


# Each table's lines at 80 columns: its header and one line per row (nothing folded),
# and the words its header may use (the long or the short form of each column).
TABLES = {
    "jobs": (5, {"id", "queue", "task", "status", "tries", "key", "progress", "created",
                 "error", "/", "result", "outcome"}),
    "stats": (4, {"queue", "pending", "running", "completed", "failed", "cancelled",
                  "scheduled", "expired", "oldest", "pend", "run", "done", "fail",
                  "canc", "sched", "exp"}),
    "workers": (2, {"worker", "queues", "running", "last", "seen", "started", "version"}),
    "limits": (2, {"queue", "paused", "limits"}),
    "schedules": (2, {"schedule", "task", "queue", "when", "last", "next", "run"}),
}  # fmt: skip


@pytest.mark.parametrize("command", [*TABLES, "info"])
def test_tables_fit_80_columns_without_folding(cli: Cli, db_url: str, command: str) -> None:
    _crowded(db_url)
    out = cli(command, "--db", db_url, env=cli_env(COLUMNS="80")).stdout
    lines = out.rstrip("\n").splitlines()
    assert max(len(line) for line in lines) <= 80, out
    if command not in ("limits", "schedules"):  # the tables that show the long name
        named = [line for line in lines if "a-rather-l" in line]
        assert named and all("…" in line for line in named), out  # cut, never folded
    if command in TABLES:
        count, words = TABLES[command]
        assert len(lines) == count, out
        assert set(lines[0].split()) <= words, lines[0]


def test_help_is_not_broken_mid_sentence(cli: Cli) -> None:
    out = cli("enqueue", "--help", env=cli_env(COLUMNS="120")).stdout
    assert "an object with the fields of one job: task (required), payload, queue" in out
    prune = cli("prune", "--help", env=cli_env(COLUMNS="120")).stdout
    assert "On a terminal it counts them and asks first; elsewhere (a script, cron)" in prune
