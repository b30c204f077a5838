"""A pruning process SIGKILLed mid-way: no job is deleted without its record in the
file archive (at least once), and the next pass finishes the work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import conveyor
from conveyor.maintenance import RetentionPruner

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.queue_kinds("queue")]
JOBS = 600


def _archived(path: Path) -> list[int]:
    if not path.exists():
        return []
    ids = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            ids.append(int(json.loads(line)["id"]))
        except ValueError:  # a line cut short by the kill
            continue
    return ids


def _remaining(q: conveyor.Queue, ids: list[int]) -> set[int]:
    left: set[int] = set()
    after = None
    while page := q.jobs(queue="old", limit=1000, after=after):
        left.update(j.id for j in page)
        after = page[-1].id
    return left & set(ids)


def test_a_killed_pruner_never_deletes_an_unarchived_job(
    q: conveyor.Queue, db_url: str, tmp_path: Path
) -> None:
    ids = q.enqueue_ids([{"task": "t", "payload": {"n": n}} for n in range(JOBS)], queue="old")
    done = 0
    while done < JOBS:
        claim = q.claim("old", limit=500, count_remaining=False)
        done += len(q.complete_many([(j.id, claim.id, {"n": j.id}) for j in claim.jobs]))
    q.set_retention("completed", 0, queue="old")
    path = tmp_path / "archive.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.core._procs", "prune", db_url, str(path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(_archived(path)) < JOBS // 4 and time.monotonic() < deadline:
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(10)
    archived = set(_archived(path))
    left = _remaining(q, ids)
    assert left, "the pruner finished before it was killed: nothing was tested"
    deleted = set(ids) - left
    assert deleted <= archived  # never deleted without having been archived
    # The next pass (another worker, or this one restarted) finishes the work.
    RetentionPruner(q, batch=100, pause=0, archive=f"file:{path}").run_once()
    assert _remaining(q, ids) == set()
    assert set(_archived(path)) == set(ids)  # every record, at least once
