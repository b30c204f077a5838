"""Each example runs as its users would run it, and does what its system needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_example(name: str, *args: str, cwd: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", f"examples.{name}", *args, "--json"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_subtitles(db_url: str, tmp_path: Path) -> None:
    out = run_example("subtitles", "--db", db_url, "--out", str(tmp_path / "srt"), cwd=tmp_path)
    assert out["recovered"] == 1 and out["reconciled"] == 1
    # 20 videos: 7 and 14 have no audio (terminal); 5, 10, 15, 20 time out once, then work.
    assert out["first_pass"] == {"pending": 0, "processing": 0, "completed": 18, "failed": 2}
    assert out["manually_retried"] == 2
    assert out["final"]["failed"] == 2 and out["final"]["completed"] == 18
    assert len(list((tmp_path / "srt").glob("*.srt"))) == 18


def test_fetch_queue(db_url: str, tmp_path: Path) -> None:
    out = run_example("fetch_queue", "--db", db_url, cwd=tmp_path)
    good, broken = "https://fics.example/works/1", "https://fics.example/works/404"
    assert out["site_fetches"] == {good: 1, broken: 2}  # three askers, one fetch
    assert out["replies"]["edsger asks for story 1 later"].startswith("cached:")
    users = sorted(user for user, message in out["messages_sent"] if "Long Way" in message)
    assert users == ["ada", "grace", "linus"]  # every subscriber told once
    assert sum(1 for user, m in out["messages_sent"] if "404" in m) == 2


def test_book_pipeline(db_url: str, tmp_path: Path) -> None:
    out = run_example("book_pipeline", "--db", db_url, cwd=tmp_path)
    assert out["status"] == "completed"
    assert out["second_start_refused"].startswith("yes")
    runs = out["runs"]
    assert runs[0]["resumed_after"] == 0
    assert runs[1]["resumed_after"] >= out["killed_after_page"] >= 100  # resumed, not restarted
    assert out["pages"] == "292 read, 8 unreadable"
    assert out["corrupt_book"].startswith("failed: Terminal")


def test_download_queue(db_url: str, tmp_path: Path) -> None:
    out = run_example("download_queue", "--db", db_url, "--jobs", "150", cwd=tmp_path)
    assert out["peeked_first"] and out["fifo"]
    stats = out["stats"]
    assert stats["completed"] == 147 and stats["failed"] == 3  # urls 7, 57, 107 always fail
    assert out["retries"] == 9  # three retries each
    assert {"p50_ms", "p99_ms"} <= set(out["enqueue_latency"])  # measured, not asserted


def test_metadata_sync(tmp_path: Path) -> None:
    # The application keeps its books and its queue in one SQLite file (transactional
    # enqueue); the clients only speak HTTP.
    out = run_example("metadata_sync", "--books", "600", cwd=tmp_path)
    assert out["rolled_back_insert_queued"] is False
    assert out["stuck_after_crash"] == 100 and out["reset_by_claim_id"] == 100
    assert out["books_without_external_id"] == 0
    assert out["looked_up_more_than_once"] == 0
    assert out["queue"]["completed"] == 600 and out["queue"]["pending"] == 0
    assert out["client_may_reset_claims"] is False
