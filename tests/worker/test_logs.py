"""What a real ``conveyor worker --burst`` process says about failed attempts, as text
and as JSON lines (both databases): task, job, attempt n/max, what happens next and
the traceback, and never a claim id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import conveyor
from tests.worker.apps import EFFECTS_ENV
from tests.worker.procs import REPO, effects

APP = "tests.worker.apps:failing"


def burst(url: str, effects_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    env[EFFECTS_ENV] = str(effects_file)
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "worker", "--app", APP, "--db", url, "--burst",
         "--concurrency", "1", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def claim_ids(effects_file: Path) -> list[str]:
    ids = [line.split()[1] for line in effects(effects_file) if line.startswith("claim ")]
    assert ids and all(len(i) >= 16 for i in ids)
    return ids


def test_failed_attempts_are_logged_with_what_happens_next(
    q: conveyor.Queue, db_url: str, tmp_path: Path
) -> None:
    boom = q.enqueue("failing.boom", {"n": 42}, max_attempts=2)
    later = q.enqueue("failing.later", max_attempts=3)
    done = burst(db_url, tmp_path / "effects")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()

    def line(fragment: str) -> str:
        found = [ln for ln in lines if fragment in ln]
        assert len(found) == 1, done.stderr
        return found[0]

    first = line(f"job {boom.id} (failing.boom) attempt 1/2 failed: ValueError: bad input 42;")
    assert " WARNING conveyor.worker: " in first and "; retry at 20" in first
    last = line(f"job {boom.id} (failing.boom) attempt 2/2 failed: ValueError: bad input 42;")
    assert " ERROR conveyor.worker: " in last and last.endswith("; failed for good")
    # The traceback follows each failure's line.
    after = lines[lines.index(last) + 1 :]
    assert after[0] == "Traceback (most recent call last):"
    assert any('raise ValueError(f"bad input {n}")' in ln for ln in after)
    snoozed = line(f"job {later.id} (failing.later) attempt 1/3 snoozed for 60s")
    assert " INFO conveyor.worker: " in snoozed
    for claim in claim_ids(tmp_path / "effects"):
        assert claim not in done.stderr


def test_json_logs_are_one_object_per_line_with_the_attempt_fields(
    q: conveyor.Queue, db_url: str, tmp_path: Path
) -> None:
    boom = q.enqueue("failing.boom", {"n": 7}, max_attempts=2)
    done = burst(db_url, tmp_path / "effects", "--log-format", "json")
    assert done.returncode == 0, done.stderr
    records: list[dict[str, Any]] = [json.loads(ln) for ln in done.stderr.splitlines()]
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert all("\n" not in r["message"] for r in records)
    failures = [r for r in records if r.get("job_id") == boom.id]
    assert [(r["attempt"], r["max_attempts"], r["level"], r["task"]) for r in failures] == [
        (1, 2, "warning", "failing.boom"),
        (2, 2, "error", "failing.boom"),
    ]
    assert failures[0]["next"].startswith("retry at 20")
    assert failures[1]["next"] == "failed for good"
    for r in failures:
        assert r["logger"] == "conveyor.worker" and r["time"].endswith("Z")
        assert r["message"].startswith(f"job {boom.id} (failing.boom) attempt {r['attempt']}/2")
        assert r["traceback"].startswith("Traceback (most recent call last):")
        assert r["traceback"].rstrip().endswith("ValueError: bad input 7")
    # The burst's closing summary is a record too.
    assert records[-1]["message"] == "claimed 2, failed 1, retried 1"
    for claim in claim_ids(tmp_path / "effects"):
        assert claim not in done.stderr


def test_a_log_format_that_does_not_exist_is_refused_in_one_line(
    db_url: str, tmp_path: Path
) -> None:
    done = burst(db_url, tmp_path / "effects", "--log-format", "xml")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("error: --log-format")
    assert "Traceback" not in done.stderr
