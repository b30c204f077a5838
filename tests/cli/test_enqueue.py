"""``conveyor enqueue``: one job from flags, many from a JSON-lines file."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import conveyor
from tests.cli.conftest import Cli, assert_one_line_error


def test_enqueue_prints_the_new_job_as_json(cli: Cli, db_url: str) -> None:
    job = cli(
        "enqueue", "emails.send", "--payload", '{"to": "ada@example.com"}', "--queue", "mail",
        "--priority", "-5", "--max-attempts", "7", "--json", "--db", db_url,
    ).json()  # fmt: skip
    assert job["task"] == "emails.send"
    assert job["payload"] == {"to": "ada@example.com"}
    assert (job["queue"], job["priority"], job["max_attempts"]) == ("mail", -5, 7)
    assert job["status"] == "pending"
    with conveyor.connect(db_url) as q:
        stored = q.get(job["id"])
    assert stored is not None
    assert stored.payload == {"to": "ada@example.com"}


def test_enqueue_says_what_it_did(cli: Cli, db_url: str) -> None:
    result = cli("enqueue", "reports.build", "--db", db_url)
    assert result.code == 0
    assert result.stdout.startswith("enqueued job 1 (reports.build on queue default")


def test_a_key_returns_the_active_job_instead_of_a_second_one(cli: Cli, db_url: str) -> None:
    first = cli("enqueue", "fetch", "--key", "https://x.test/1", "--json", "--db", db_url).json()
    again = cli("enqueue", "fetch", "--key", "https://x.test/1", "--json", "--db", db_url).json()
    assert again["id"] == first["id"]
    assert again["deduplicated"] is True
    human = cli("enqueue", "fetch", "--key", "https://x.test/1", "--db", db_url)
    assert "already pending" in human.stdout


def test_delay_schedules_by_the_database_clock(cli: Cli, db_url: str) -> None:
    job = cli("enqueue", "later", "--delay", "2h", "--json", "--db", db_url).json()
    delay = datetime.fromisoformat(job["run_at"]) - datetime.fromisoformat(job["created_at"])
    assert timedelta(hours=2) - timedelta(seconds=5) < delay <= timedelta(hours=2)
    with conveyor.connect(db_url) as q:
        assert q.claim().jobs == []  # not claimable before its time
        assert q.stats().scheduled == 1


def test_run_at_takes_an_iso_time_with_a_zone(cli: Cli, db_url: str) -> None:
    job = cli("enqueue", "t", "--run-at", "2031-03-04T05:06:07+02:00", "--json", "--db", db_url)
    assert datetime.fromisoformat(job.json()["run_at"]) == datetime.fromisoformat(
        "2031-03-04T03:06:07+00:00"
    )


def test_payload_from_a_file(cli: Cli, sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"pages": [1, 2, 3]}')
    job = cli("enqueue", "ocr", "--payload", "@p.json", "--json", "--db", sqlite_url).json()
    assert job["payload"] == {"pages": [1, 2, 3]}
    missing = cli("enqueue", "ocr", "--payload", "@nope.json", "--db", sqlite_url)
    assert_one_line_error(missing, contains="cannot read payload file 'nope.json'")


def test_enqueue_from_a_json_lines_file(cli: Cli, db_url: str, tmp_path: Path) -> None:
    lines: list[dict[str, object]] = [{"task": "t", "payload": {"n": n}} for n in range(1200)]
    lines[5] = {"task": "keyed", "key": "k"}
    lines[6] = {"task": "keyed", "key": "k"}  # dedupes against line 6's job
    lines[7] = {"task": "other", "queue": "q2", "priority": 3}
    (tmp_path / "jobs.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    out = cli("enqueue", "--file", "jobs.jsonl", "--json", "--db", db_url).json()
    assert out["count"] == 1200
    assert (out["created"], out["deduplicated"]) == (1199, 1)
    with conveyor.connect(db_url) as q:
        stats = q.queue_stats()
    assert stats["default"].pending == 1198
    assert stats["q2"].pending == 1


def test_enqueue_from_stdin(cli: Cli, db_url: str) -> None:
    text = '{"task": "a"}\n{"task": "b", "queue": "x"}\n'
    result = cli("enqueue", "--file", "-", "--queue", "bulk", "--db", db_url, input=text)
    assert result.code == 0, result.describe()
    assert "enqueued 2 job(s) from stdin" in result.stdout
    with conveyor.connect(db_url) as q:
        assert sorted(q.queue_stats()) == ["bulk", "x"]


def test_every_bad_line_is_reported_with_its_column_and_nothing_is_written(
    cli: Cli, sqlite_url: str, tmp_path: Path
) -> None:
    lines = [
        '{"task": "a"}',  # 1: good
        "",  # 2: blank, skipped
        '{"task": "b",',  # 3: cut short
        '["b"]',  # 4: not an object
        '  {"task": "a", "colour": "red"}',  # 5: unknown field
        '{"task": "a", "priority": "high"}',  # 6: refused by the queue's own checks
        '{"task": "a", "run_at": "tomorrow"}',  # 7: not a time
        '{"task": "a", "queue": "inv\u202eoice"}',  # 8: a direction override in a name
        '{"task": "ok"}',  # 9: good
    ]
    (tmp_path / "bad.jsonl").write_text("\ufeff" + "\n".join(lines) + "\n")  # with a BOM
    result = cli("enqueue", "--file", "bad.jsonl", "--db", sqlite_url)
    assert result.code == 2, result.describe()
    assert result.stderr.splitlines() == [
        "error: bad.jsonl:3:14: malformed JSON (Expecting property name enclosed in double quotes)",
        "error: bad.jsonl:4:1: expected a JSON object with a task, got list",
        "error: bad.jsonl:5:17: unknown field(s) colour",
        "error: bad.jsonl:6:15: priority: expected an integer, got str",
        "error: bad.jsonl:7:15: run_at: expected an ISO 8601 time such as "
        "2030-01-01T09:00:00Z, got 'tomorrow'",
        "error: bad.jsonl:8:15: queue: may not contain control characters or bidirectional "
        "text controls (found U+202E at position 3)",
        "error: 6 bad line(s): nothing was enqueued",
    ]
    assert not (tmp_path / "cli.db").exists()  # nothing created either


def test_past_twenty_bad_lines_the_rest_are_counted(
    cli: Cli, sqlite_url: str, tmp_path: Path
) -> None:
    (tmp_path / "bad.jsonl").write_text("[]\n" * 25)
    errors = cli("enqueue", "--file", "bad.jsonl", "--db", sqlite_url).stderr.splitlines()
    assert len(errors) == 22
    assert errors[-2:] == [
        "error: … and 5 more bad line(s)",
        "error: 25 bad line(s): nothing was enqueued",
    ]


def test_file_and_task_together_is_a_usage_mistake(cli: Cli) -> None:
    assert_one_line_error(cli("enqueue", "t", "--file", "x.jsonl"), code=2, contains="not both")
