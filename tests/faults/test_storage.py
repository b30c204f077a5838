"""A SQLite queue whose disk fills up, with a worker process and a server running
through it: writes are refused with ``StorageFull`` (HTTP 503 ``storage_full``, the CLI
one line and a non-zero exit), nothing acknowledged before is lost, and once room
comes back the same worker completes everything, each job by one run.

The disk is a small tmpfs mount; where mounting is not permitted, SQLite's
``max_page_count`` (the ``max_pages`` URL option) limits the file instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import conveyor
from tests.faults.restart import ServeProcess
from tests.faults.storage import SmallDisk, small_disk
from tests.worker.procs import REPO, WorkerProcess, effects, wait_for

TASK = "storage.work"
PAD = "x" * 2000
MAX_FILL = 20_000  # enqueues before the disk must have filled up
TRIES = 20  # writes a full disk may still take, from pages a worker freed meanwhile


@pytest.fixture(params=["tmpfs", "max_pages"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SmallDisk]:
    found = small_disk(str(request.param), tmp_path)
    yield found
    found.release()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    command = [sys.executable, "-m", "conveyor", *args]
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _fill(q: conveyor.Queue) -> list[int]:
    """Enqueue until the database refuses; the ids it acknowledged."""
    acknowledged: list[int] = []
    for n in range(MAX_FILL):
        try:
            acknowledged.append(q.enqueue(TASK, {"n": n, "pad": PAD}).id)
        except conveyor.StorageFull:
            return acknowledged
    pytest.fail(f"the database took {MAX_FILL} jobs without filling up")


def test_a_full_disk_refuses_writes_clearly_and_loses_nothing(
    disk: SmallDisk, tmp_path: Path
) -> None:
    q = conveyor.connect(disk.url)
    disk.add_ballast()
    serve = ServeProcess(disk.url, tmp_path)
    fx = tmp_path / "effects.txt"
    worker = WorkerProcess("tests.faults.apps:storage", disk.url, tmp_path, fx,
                           "--concurrency", "4", "--lease", "5", tag="0").start()  # fmt: skip
    try:
        assert serve.ready()
        acknowledged = _fill(q)
        assert len(acknowledged) > 10

        # Full: the library, HTTP and the CLI each say so, in their own way. The worker
        # goes on (its count folds free pages now and then), so a write may still find
        # room: each interface is asked until it refuses, and what it took is kept.
        with pytest.raises(conveyor.StorageFull, match="full"):
            for _ in range(TRIES):
                acknowledged.append(q.enqueue(TASK, {"n": -1, "pad": PAD}).id)
        for _ in range(TRIES):
            answer = httpx.post(
                f"{serve.base}/api/jobs", json={"task": TASK, "payload": {"n": -1, "pad": PAD}},
                timeout=30,
            )  # fmt: skip
            if answer.status_code != 201:
                break
            acknowledged.append(answer.json()["id"])
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "storage_full"
        assert int(answer.headers["Retry-After"]) >= 1
        for _ in range(TRIES):
            cli = _cli("enqueue", TASK, "--payload", json.dumps({"n": -1, "pad": PAD}),
                       "--db", disk.url)  # fmt: skip
            if cli.returncode == 0:
                acknowledged.append(int(cli.stdout.split()[2]))
                continue
            break
        assert cli.returncode != 0
        assert cli.stderr.count("\n") == 1 and "full" in cli.stderr, cli.stderr

        # Nothing acknowledged is lost: every job is there to read.
        assert all(q.get(job_id) is not None for job_id in acknowledged)

        # Room comes back: writes go through again, and the worker, which ran through
        # it all, completes everything.
        disk.free()
        more = [q.enqueue(TASK, {"n": 10**6 + i}).id for i in range(20)]
        last = {"task": TASK, "payload": {"n": 2 * 10**6}}
        answer = httpx.post(f"{serve.base}/api/jobs", json=last, timeout=30)
        assert answer.status_code == 201, answer.text
        total = len(acknowledged) + len(more) + 1

        def drained() -> bool:
            stats = q.stats()
            return stats.completed == total and stats.pending == stats.running == 0

        assert wait_for(drained, 120, every=0.5), q.stats()
    finally:
        worker.signal(15)
        worker.wait(30)
        serve.stop()
    runs: dict[int, list[str]] = defaultdict(list)
    for line in effects(fx):
        job_id, claim = line.split()
        runs[int(job_id)].append(claim)
    for job in q.jobs(limit=total + 10):
        assert runs[job.id].count(job.claim_id or "") == 1, (job.id, runs[job.id])
    assert "Traceback" not in worker.log() and "Traceback" not in serve.log()
    assert "full" in worker.log()  # it said why it could not write, on a line
    runs_recorded = sum(len(v) for v in runs.values())
    print(f"{disk.kind}: {len(acknowledged)} jobs acknowledged before the disk was full, "
          f"{total} completed after room came back, {runs_recorded} runs recorded")  # fmt: skip
    q.close()
