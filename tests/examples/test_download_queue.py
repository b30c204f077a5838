"""The download queue contract's eleven named tests (nine unit, two integration), each on
SQLite, PostgreSQL and MySQL, against the database directly and through a conveyor server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import conveyor
from conveyor.client import RemoteQueue
from conveyor.web import create_app
from examples.download_queue import DownloadQueue, IDownloadQueue, JobAlreadyProcessed, JobStatus
from tests.examples.conftest import ENV, run_module


@pytest.fixture(params=["database", "http"])
def open_downloads(
    request: pytest.FixtureRequest, db_url: str
) -> Iterator[Callable[[], DownloadQueue]]:
    """``open_downloads()``: a ``DownloadQueue`` on the test's database, or on a conveyor
    server over that database. Every one opened shares the same queue."""
    closers: list[Callable[[], None]] = []

    def open_one() -> DownloadQueue:
        if request.param == "database":
            downloads = DownloadQueue(db_url)
            closers.append(downloads.close)
            return downloads
        server = conveyor.connect(db_url)
        client = TestClient(create_app(server, tokens={}), base_url="http://localhost")
        client.__enter__()
        closers.extend([server.close, lambda: client.__exit__(None, None, None)])
        return DownloadQueue(RemoteQueue(str(client.base_url), http=client))

    yield open_one
    for close in reversed(closers):
        close()


@pytest.fixture
def downloads(open_downloads: Callable[[], DownloadQueue]) -> DownloadQueue:
    return open_downloads()


def test_it_implements_the_contract(downloads: DownloadQueue) -> None:
    contract: IDownloadQueue = downloads
    assert contract.get_stats().queued_count == 0


def test_enqueue_with_valid_job_inserts_to_database(downloads: DownloadQueue) -> None:
    job_id = downloads.enqueue(42, "https://video.example/a")
    again = downloads.enqueue(42, "https://video.example/a")  # a repost is allowed
    assert again != job_id
    job = downloads.get(job_id)
    assert job is not None and (job.message_id, job.url) == (42, "https://video.example/a")
    assert job.status == JobStatus.QUEUED and job.retry_count == 0 and job.created_at
    assert (job.completed_at, job.output_path, job.error_message) == (None, None, None)
    bad = [(0, "https://x.example"), (-1, "https://x.example"), (True, "https://x.example"),
           (1, "ftp://x.example"), (1, "")]  # fmt: skip
    for message_id, url in bad:
        with pytest.raises(ValueError, match="message_id|url"):
            downloads.enqueue(message_id, url)
    assert downloads.get_stats().queued_count == 2


def test_dequeue_with_empty_queue_returns_none(downloads: DownloadQueue) -> None:
    assert downloads.dequeue() is None


def test_dequeue_with_queued_jobs_returns_fifo(downloads: DownloadQueue) -> None:
    ids = [downloads.enqueue(n, f"https://video.example/{n}") for n in range(1, 6)]
    first = downloads.dequeue()
    assert first is not None and first.job_id == ids[0]
    assert downloads.dequeue().job_id == ids[0]  # type: ignore[union-attr]  # no state change
    order = []
    while (job := downloads.dequeue()) is not None:
        assert downloads.mark_in_progress(job.job_id)
        order.append(job.job_id)
    assert order == ids


def test_mark_in_progress_with_queued_job_updates_status(
    open_downloads: Callable[[], DownloadQueue],
) -> None:
    one, other = open_downloads(), open_downloads()
    job_id = one.enqueue(1, "https://video.example/1")
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def take(queue: DownloadQueue) -> None:
        barrier.wait()
        results.append(queue.mark_in_progress(job_id))

    workers = [threading.Thread(target=take, args=(q,)) for q in (one, other)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert sorted(results) == [False, True]  # of two callers, exactly one
    assert one.get(job_id).status == JobStatus.IN_PROGRESS  # type: ignore[union-attr]
    assert one.mark_in_progress(job_id) is False
    with pytest.raises(conveyor.JobNotFound):
        one.mark_in_progress(987654)


def test_mark_completed_with_in_progress_job_sets_output_path(downloads: DownloadQueue) -> None:
    job_id = downloads.enqueue(1, "https://video.example/1")
    with pytest.raises(conveyor.InvalidTransition, match="not in progress"):
        downloads.mark_completed(job_id, "/tmp/a.mp4")  # still queued
    downloads.mark_in_progress(job_id)
    for empty in ("", "   "):
        with pytest.raises(ValueError, match="output_path"):
            downloads.mark_completed(job_id, empty)
    downloads.mark_completed(job_id, "/downloads/a.mp4")
    job = downloads.get(job_id)
    assert job is not None and job.status == JobStatus.COMPLETED
    assert job.output_path == "/downloads/a.mp4" and job.completed_at is not None
    with pytest.raises(conveyor.JobNotFound):
        downloads.mark_completed(987654, "/x")


def test_mark_failed_with_in_progress_job_sets_error_message(downloads: DownloadQueue) -> None:
    job_id = downloads.enqueue(1, "https://video.example/1")
    downloads.mark_in_progress(job_id)
    with pytest.raises(ValueError, match="error_message"):
        downloads.mark_failed(job_id, "")
    downloads.mark_failed(job_id, "HTTP Error 403: Forbidden")
    job = downloads.get(job_id)
    assert job is not None and job.status == JobStatus.FAILED
    assert job.error_message == "HTTP Error 403: Forbidden" and job.completed_at is not None
    assert downloads.dequeue() is None  # a failed job is not queued until retried


def test_retry_job_with_failed_job_requeues_if_retries_remain(downloads: DownloadQueue) -> None:
    job_id = downloads.enqueue(1, "https://video.example/1")
    assert downloads.retry_job(job_id) is False  # queued, not failed
    downloads.mark_in_progress(job_id)
    downloads.mark_failed(job_id, "timeout")
    assert downloads.retry_job(job_id) is True
    job = downloads.get(job_id)
    assert job is not None and job.status == JobStatus.QUEUED and job.retry_count == 1
    assert downloads.dequeue().job_id == job_id  # type: ignore[union-attr]
    with pytest.raises(conveyor.JobNotFound):
        downloads.retry_job(987654)


def test_retry_job_with_max_retries_returns_false(downloads: DownloadQueue) -> None:
    job_id = downloads.enqueue(1, "https://video.example/broken")
    retried = []
    for _ in range(5):
        assert downloads.mark_in_progress(job_id)
        downloads.mark_failed(job_id, "HTTP Error 403: Forbidden")
        ok = downloads.retry_job(job_id)
        retried.append(ok)
        if not ok:
            break
    assert retried == [True, True, True, False]  # three retries, then no more
    job = downloads.get(job_id)
    assert job is not None and job.status == JobStatus.FAILED and job.retry_count == 3


def test_get_stats_with_mixed_jobs_returns_accurate_counts(downloads: DownloadQueue) -> None:
    ids = [downloads.enqueue(n, f"https://video.example/{n}") for n in range(1, 8)]
    for job_id in ids[:4]:
        downloads.mark_in_progress(job_id)
    downloads.mark_completed(ids[0], "/a.mp4")
    downloads.mark_completed(ids[1], "/b.mp4")
    downloads.mark_failed(ids[2], "nope")
    stats = downloads.get_stats()
    assert (stats.queued_count, stats.in_progress_count, stats.completed_count,
            stats.failed_count) == (3, 1, 2, 1)  # fmt: skip
    oldest = downloads.get(ids[4])
    assert oldest is not None and stats.oldest_queued_job_created_at == oldest.created_at
    for job_id in ids[4:]:
        downloads.mark_in_progress(job_id)
    assert downloads.get_stats().oldest_queued_job_created_at is None


def test_enqueue_before_restart_dequeue_after_restart_job_persisted(
    db_url: str, tmp_path: Path
) -> None:
    # The bot queues a download, then its process is killed outright.
    script = (
        "import os, signal\n"
        "from examples.download_queue import DownloadQueue\n"
        f"q = DownloadQueue({db_url!r})\n"
        "print(q.enqueue(7, 'https://video.example/kept'), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=ENV, capture_output=True, text=True
    )
    assert proc.returncode == -signal.SIGKILL
    job_id = int(proc.stdout.strip())
    with DownloadQueue(db_url) as restarted:
        job = restarted.dequeue()
        assert job is not None and (job.job_id, job.message_id) == (job_id, 7)
        assert job.url == "https://video.example/kept" and job.status == JobStatus.QUEUED


WORKER = """
import json, sys
from examples.download_queue import DownloadQueue, JobAlreadyProcessed
q = DownloadQueue(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()  # all start together
done = []
while (job := q.dequeue()) is not None:
    try:
        taken = q.mark_in_progress(job.job_id)
    except JobAlreadyProcessed:  # another worker downloaded it since this one peeked
        continue
    if taken:
        q.mark_completed(job.job_id, f"/downloads/{job.message_id}.mp4")
        done.append(job.job_id)
print(json.dumps(done))
"""


@pytest.mark.slow
def test_concurrent_dequeue_with_multiple_workers_no_race_condition(
    db_url: str, tmp_path: Path
) -> None:
    with DownloadQueue(db_url) as downloads:
        ids = [downloads.enqueue(n, f"https://video.example/{n}") for n in range(1, 201)]
        command = [sys.executable, "-c", WORKER, db_url]
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
        workers = [subprocess.Popen(command, cwd=tmp_path, env=ENV, **pipes) for _ in range(4)]
        for w in workers:
            assert w.stdout is not None and w.stdout.readline() == "ready\n"
        for w in workers:  # go, all at once
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.close()
        done = [json.loads(w.stdout.read()) for w in workers if w.stdout is not None]
        assert [w.wait(60) for w in workers] == [0, 0, 0, 0]
        taken = [job for part in done for job in part]
        assert sorted(taken) == ids  # every job downloaded once, none twice
        assert sum(1 for part in done if part) >= 2  # the workers really raced
        stats = downloads.get_stats()
        assert (stats.completed_count, stats.queued_count, stats.in_progress_count) == (200, 0, 0)
        for job_id in ids[:5]:
            job = downloads.get(job_id)
            assert job is not None and job.retry_count == 0


def test_a_job_held_by_a_dead_bot_is_queued_again_after_its_lease(db_url: str) -> None:
    from datetime import timedelta

    with DownloadQueue(db_url, lease=timedelta(seconds=0.2)) as bot:
        job_id = bot.enqueue(1, "https://video.example/1")
        assert bot.mark_in_progress(job_id)
        time.sleep(0.4)  # the bot died holding it
        with DownloadQueue(db_url) as other:
            job = other.get(job_id)  # reading it recovers it
            assert job is not None and job.status == JobStatus.QUEUED and job.retry_count == 1
            assert other.mark_in_progress(job_id)
        with pytest.raises(conveyor.StaleClaim):
            bot.mark_completed(job_id, "/late.mp4")  # the dead bot's claim is gone


def test_the_demo_runs_from_another_directory(db_url: str, tmp_path: Path) -> None:
    done = run_module("download_queue", "--db", db_url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["peeked_the_oldest"] and out["taken_in_fifo_order"]
    assert out["runs"] == 28 and out["retries_queued"] == 8
    assert out["stats"]["completed_count"] == 18 and out["stats"]["failed_count"] == 2
    assert len(out["failed_for_good"]) == 2


def test_the_benchmark_runs(tmp_path: Path) -> None:
    """A tiny run of benchmarks/download_queue.py, so it cannot rot (figures unchecked)."""
    from tests.examples.conftest import ROOT

    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "download_queue.py"), "--jobs", "5",
         "--targets", "sqlite,serve", "--json"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    for target in ("sqlite", "serve"):
        assert {"enqueue", "dequeue", "while_draining", "rss_growth_mb"} <= set(figures[target])


def test_a_job_held_by_a_crashed_bot_comes_back_through_dequeue_and_stats(db_url: str) -> None:
    """No worker or server runs: the next dequeue or get_stats recovers expired leases."""
    from datetime import timedelta

    with DownloadQueue(db_url, lease=timedelta(seconds=0.2)) as bot:
        job_id = bot.enqueue(1, "https://video.example/1")
        assert bot.mark_in_progress(job_id)
    time.sleep(0.4)  # the bot died holding it
    with DownloadQueue(db_url) as restarted:
        stats = restarted.get_stats()
        assert (stats.queued_count, stats.in_progress_count) == (1, 0)
    with DownloadQueue(db_url, lease=timedelta(seconds=0.2)) as bot:
        assert bot.mark_in_progress(job_id)
    time.sleep(0.4)
    with DownloadQueue(db_url) as restarted:
        job = restarted.dequeue()
        assert job is not None and job.job_id == job_id and job.status == JobStatus.QUEUED


def test_a_restarted_queue_completes_or_fails_what_its_predecessor_marked(db_url: str) -> None:
    with DownloadQueue(db_url) as before:
        done = before.enqueue(1, "https://video.example/1")
        failed = before.enqueue(2, "https://video.example/2")
        assert before.mark_in_progress(done) and before.mark_in_progress(failed)
    with DownloadQueue(db_url) as after:
        after.mark_completed(done, "/downloads/1.mp4")
        after.mark_failed(failed, "HTTP Error 403: Forbidden")
        assert after.get(done).status == JobStatus.COMPLETED  # type: ignore[union-attr]
        job = after.get(failed)
        assert job is not None and job.status == JobStatus.FAILED
        assert job.error_message == "HTTP Error 403: Forbidden"
        with pytest.raises(conveyor.InvalidTransition, match="not in progress"):
            after.mark_completed(done, "/again.mp4")


def test_mark_in_progress_on_a_processed_job_raises(downloads: DownloadQueue) -> None:
    done = downloads.enqueue(1, "https://video.example/1")
    failed = downloads.enqueue(2, "https://video.example/2")
    for job_id in (done, failed):
        assert downloads.mark_in_progress(job_id)
    downloads.mark_completed(done, "/a.mp4")
    downloads.mark_failed(failed, "nope")
    for job_id in (done, failed):
        with pytest.raises(JobAlreadyProcessed, match="Job already processed"):
            downloads.mark_in_progress(job_id)


def test_message_ids_beyond_64_bits_are_refused(downloads: DownloadQueue) -> None:
    for too_big in (2**63, 2**64 + 5):
        with pytest.raises(ValueError, match="message_id"):
            downloads.enqueue(too_big, "https://video.example/a")
    for bad_url in ("https://video.example/a\x00b", "https://video.example/a b"):
        with pytest.raises(ValueError, match="url"):
            downloads.enqueue(1, bad_url)
    job_id = downloads.enqueue(2**63 - 1, "https://video.example/a")
    assert downloads.get(job_id).message_id == 2**63 - 1  # type: ignore[union-attr]
    assert downloads.get_stats().queued_count == 1


def test_old_finished_jobs_are_pruned_as_jobs_are_enqueued(db_url: str) -> None:
    from datetime import timedelta

    now = {"completed": timedelta(0), "failed": timedelta(0)}
    with DownloadQueue(db_url, retention=now, prune_every=3) as downloads:
        done = downloads.enqueue(1, "https://video.example/1")
        failed = downloads.enqueue(2, "https://video.example/2")
        for job_id in (done, failed):
            assert downloads.mark_in_progress(job_id)
        downloads.mark_completed(done, "/a.mp4")
        downloads.mark_failed(failed, "nope")
        assert downloads.get(done) is not None and downloads.get(failed) is not None
        time.sleep(0.05)
        queued = downloads.enqueue(3, "https://video.example/3")  # the third: prunes
        assert downloads.get(done) is None and downloads.get(failed) is None
        assert downloads.get(queued) is not None
        stats = downloads.get_stats()
        assert (stats.queued_count, stats.completed_count, stats.failed_count) == (1, 0, 0)


def test_the_queue_declares_its_retention_and_prunes_only_what_it_lets_go(db_url: str) -> None:
    from datetime import timedelta

    from examples.download_queue.queue import QUEUE, RETENTION

    with DownloadQueue(db_url, prune_every=1000) as downloads:
        declared = {p.status: p for p in downloads.q.retention_policies() if p.queue == QUEUE}
        assert {s: p.keep_seconds for s, p in declared.items()} == {
            "completed": 86400.0, "failed": 7 * 86400.0, "cancelled": 86400.0,
        }  # fmt: skip
        assert RETENTION["failed"] == timedelta(days=7)
        assert not any(p.retire_keys for p in declared.values())
        # An operator prunes completed downloads at once (`conveyor retention set`)...
        downloads.q.set_retention("completed", 0, queue=QUEUE)
        other = downloads.q.enqueue("other.task", {}, queue="elsewhere")
        downloads.q.complete(other.id, downloads.q.claim_job(other.id).id)
        done = downloads.enqueue(1, "https://video.example/1")
        failed = downloads.enqueue(2, "https://video.example/2")
        for job_id in (done, failed):
            assert downloads.mark_in_progress(job_id)
        downloads.mark_completed(done, "/a.mp4")
        downloads.mark_failed(failed, "HTTP Error 403")
        time.sleep(0.05)
        assert downloads.prune() == 1
        assert downloads.get(done) is None
        # ...a failed download stays (a week), and can still be retried.
        assert downloads.get(failed) is not None and downloads.retry_job(failed)
        # Another queue of the database, which no policy covers, keeps its jobs.
        assert downloads.q.get(other.id) is not None
    with DownloadQueue(db_url) as reopened:  # the operator's change outlives a restart
        declared = {p.status: p for p in reopened.q.retention_policies() if p.queue == QUEUE}
        assert declared["completed"].keep_seconds == 0
