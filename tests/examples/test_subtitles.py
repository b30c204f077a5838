"""The subtitle queue spec's four test cases, then its edge cases: a video added twice,
counts and the status filter, retry exhaustion, and refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conveyor.maintenance import RetentionPruner
from examples.subtitles.app import QUEUE, Settings, Subtitles, create_api
from tests.examples.conftest import ENV, conflicting, run_module, wait_until

WORKER = [sys.executable, "-m", "examples.subtitles", "worker", "--workers", "1"]
FAST = Settings(max_retries=3, retry_delay=0.05, slow_seconds=0.3, reconcile_interval=0)


@pytest.fixture
def open_api(db_url: str) -> Iterator[Callable[..., tuple[Subtitles, TestClient]]]:
    opened: list[tuple[Subtitles, TestClient]] = []

    def open_one(settings: Settings = FAST, workers: int = 2) -> tuple[Subtitles, TestClient]:
        subtitles = Subtitles(db_url, settings)
        client = TestClient(create_api(subtitles, workers=workers))
        client.__enter__()
        opened.append((subtitles, client))
        return subtitles, client

    yield open_one
    for subtitles, client in opened:
        client.__exit__(None, None, None)
        subtitles.close()


def add(api: Any, video_id: str, channel: str = "c1") -> Any:
    return api.post(f"/channels/{channel}/videos", json={"video_id": video_id, "title": video_id})


def video(api: Any, video_id: str) -> dict[str, Any]:
    answer = api.get(f"/videos/{video_id}")
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def final(api: Any, video_id: str) -> dict[str, Any]:
    return wait_until(  # type: ignore[no-any-return]
        lambda: (v := video(api, video_id))["status"] in ("completed", "failed") and v
    )


@pytest.mark.slow
def test_1_three_pending_videos_claimed_in_parallel_each_once(
    db_url: str, tmp_path: Path, start_server: Any
) -> None:
    server = start_server("subtitles", db_url, workers=0)
    with server.client() as api:
        for n in range(3):
            assert add(api, f"slow-{n}").status_code == 201
        assert api.get("/channels/c1/videos").json()["counts"]["pending"] == 3
        command = [*WORKER, "--db", db_url, "--slow-seconds", "0.5"]
        workers = [subprocess.Popen(command, cwd=tmp_path, env=ENV) for _ in range(3)]
        try:
            for n in range(3):
                assert final(api, f"slow-{n}")["status"] == "completed"
        finally:
            for w in workers:
                w.terminate()
                w.wait(30)
        import conveyor

        with conveyor.connect(db_url) as q:
            jobs = q.jobs(queue=QUEUE)
        assert len(jobs) == 3 and all(j.attempts == 1 for j in jobs)  # each claimed once
        assert api.get("/channels/c1/videos").json()["counts"]["completed"] == 3


@pytest.mark.slow
def test_2_a_video_left_processing_by_a_crashed_run_is_pending_after_restart(
    db_url: str, start_server: Any
) -> None:
    first = start_server(
        "subtitles", db_url, "--slow-seconds", "60", "--lease-seconds", "2", workers=1
    )
    with first.client() as api:
        add(api, "slow-1")
        wait_until(lambda: video(api, "slow-1")["status"] == "processing")
    first.kill()  # mid-video, without a word
    time.sleep(2.5)  # its lease runs out
    second = start_server("subtitles", db_url, workers=0)
    with second.client() as api:
        after = video(api, "slow-1")
        assert after["status"] == "pending" and after["attempts"] == 1
    second.stop()
    third = start_server("subtitles", db_url, "--slow-seconds", "0.1", workers=1)
    with third.client() as api:
        assert final(api, "slow-1")["status"] == "completed"


def test_3_a_subtitle_added_by_hand_completes_the_video_on_reconciliation(
    open_api: Any,
) -> None:
    subtitles, api = open_api(workers=0)
    for video_id in ("v1", "bad-2", "v3"):
        add(api, video_id)
    subtitles.app.drain()  # the worker's turn, here: v1 and v3 done, bad-2 failed
    assert video(api, "bad-2")["status"] == "failed"
    add(api, "v4")  # not yet worked on
    for video_id in ("bad-2", "v4"):
        put = api.put(f"/videos/{video_id}/subtitle", json={"content": "1\n00:00 hi\n"})
        assert put.json() == {"video_id": video_id, "subtitle": True}
    assert video(api, "bad-2")["status"] == "failed"  # only recorded so far
    assert api.post("/reconcile").json() == {"completed": 2}
    assert (
        video(api, "bad-2")["status"] == "completed" and video(api, "v4")["status"] == "completed"
    )
    assert video(api, "v4")["last_error"] is None and video(api, "v4")["completed_at"]
    assert api.post("/reconcile").json() == {"completed": 0}
    assert api.put("/videos/nope/subtitle", json={"content": "x"}).status_code == 404


def test_3b_reconciliation_runs_on_a_timer_and_at_start_up(db_url: str) -> None:
    subtitles = Subtitles(db_url, Settings(reconcile_interval=0.2))
    with TestClient(create_api(subtitles, workers=0)) as api:
        add(api, "v1")
        add(api, "v2")
        api.put("/videos/v1/subtitle", json={"content": "hi"})
        wait_until(lambda: video(api, "v1")["status"] == "completed", timeout=10)
    subtitles.put_subtitle("v2", "found while no server ran")
    with TestClient(create_api(subtitles, workers=0)) as restarted:
        assert video(restarted, "v2")["status"] == "completed"
    subtitles.close()


def test_4_after_max_retries_failed_and_retry_resets_to_pending_with_no_attempts(
    open_api: Any,
) -> None:
    subtitles, api = open_api(workers=0)
    add(api, "fail-1")
    deadline = time.monotonic() + 30
    while video(api, "fail-1")["status"] != "failed" and time.monotonic() < deadline:
        subtitles.app.drain()
        time.sleep(0.05)  # past the back-off
    failed = video(api, "fail-1")
    assert failed["status"] == "failed" and failed["attempts"] == 3
    assert failed["last_error"] == "the transcriber timed out"
    retried = api.post("/videos/fail-1/retry")
    assert retried.status_code == 200
    assert retried.json()["status"] == "pending" and retried.json()["attempts"] == 0
    assert api.post("/videos/fail-1/retry").status_code == 409  # pending now, not failed
    assert api.post("/videos/nope/retry").status_code == 404
    subtitles.app.drain()
    assert video(api, "fail-1")["attempts"] == 1  # tried again from the start


def test_a_terminal_failure_is_not_retried(open_api: Any) -> None:
    _, api = open_api()
    add(api, "bad-1")
    done = final(api, "bad-1")
    assert done["status"] == "failed" and done["attempts"] == 1
    assert done["last_error"] == "video bad-1 has no audio track"


def test_a_video_added_twice_changes_nothing_even_after_it_completed(open_api: Any) -> None:
    subtitles, api = open_api()
    first = add(api, "v1")
    assert first.status_code == 201 and first.json()["status"] in ("pending", "processing")
    assert final(api, "v1")["status"] == "completed"
    again = add(api, "v1")
    assert again.status_code == 200 and again.json()["status"] == "completed"
    assert len(subtitles.q.jobs(queue=QUEUE, key="v1")) == 1  # no second job
    other = add(api, "v1", channel="c2")
    assert (
        other.status_code == 409 and "belongs to channel 'c1'" in other.json()["error"]["message"]
    )


def test_counts_status_filter_and_pages(open_api: Any) -> None:
    subtitles, api = open_api(workers=0)
    for video_id in ("a1", "a2", "bad-3", "a4", "a5"):
        add(api, video_id)
    add(api, "elsewhere", channel="c2")
    subtitles.app.drain()
    add(api, "a6")
    listing = api.get("/channels/c1/videos").json()
    assert listing["counts"] == {"pending": 1, "processing": 0, "completed": 4, "failed": 1}
    assert [v["video_id"] for v in listing["videos"]] == ["a1", "a2", "a4", "a5", "a6", "bad-3"]
    assert set(listing["videos"][0]) == {"video_id", "channel_id", "title", "status", "attempts",
                                         "last_error", "created_at", "completed_at"}  # fmt: skip
    failed = api.get("/channels/c1/videos", params={"status": "failed"}).json()
    assert [v["video_id"] for v in failed["videos"]] == ["bad-3"]
    assert failed["counts"] == listing["counts"]  # counts are the channel's, unfiltered
    page = api.get("/channels/c1/videos", params={"status": "completed", "limit": 2}).json()
    assert [v["video_id"] for v in page["videos"]] == ["a1", "a2"]
    rest = api.get("/channels/c1/videos", params={"status": "completed", "after": "a2"}).json()
    assert [v["video_id"] for v in rest["videos"]] == ["a4", "a5"]
    assert api.get("/channels/none/videos").json() == {
        "videos": [], "counts": {"pending": 0, "processing": 0, "completed": 0, "failed": 0}
    }  # fmt: skip
    for bad in ({"status": "running"}, {"limit": 0}, {"limit": 5000}):
        assert api.get("/channels/c1/videos", params=bad).status_code == 422


def test_bad_input_is_refused_and_changes_nothing(open_api: Any) -> None:
    subtitles, api = open_api(workers=0)
    bodies = [{"video_id": "", "title": "t"}, {"video_id": "a b", "title": "t"},
              {"video_id": "x" * 300, "title": "t"}, {"title": "t"}, {"video_id": "v"}]  # fmt: skip
    for body in bodies:
        answer = api.post("/channels/c1/videos", json=body)
        assert answer.status_code == 422 and set(answer.json()["error"]) == {"code", "message"}
    assert subtitles.q.stats(QUEUE).total == 0
    add(api, "v1")
    too_big = api.put("/videos/v1/subtitle", json={"content": "x" * 1_000_001})
    assert too_big.status_code == 422
    assert api.get("/videos/nope").status_code == 404


def test_the_demo_runs_from_another_directory(db_url: str, tmp_path: Path) -> None:
    done = run_module("subtitles", "--db", db_url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["first_pass"] == {"pending": 0, "processing": 0, "completed": 10, "failed": 2}
    assert out["reconcile_after_a_manual_subtitle"] == {"completed": 1}
    assert out["manual_retry"]["status"] == "pending" and out["manual_retry"]["attempts"] == 0
    assert out["added_twice"] == "HTTP 200, still completed"


def test_a_channel_over_10000_videos_is_counted_and_paged_in_full(open_api: Any) -> None:
    subtitles, api = open_api(workers=0)
    ids = [f"v{n:05d}" for n in range(10_050)]
    with subtitles.db.transaction() as tx:
        for video_id in ids:
            tx.execute(
                "INSERT INTO videos (video_id, channel_id, title, created_at)"
                " VALUES (:id, 'big', :id, '2026-01-01T00:00:00+00:00')",
                {"id": video_id},
            )

    def no_queue_reads(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a listing must not read each video's job")

    subtitles.q.latest = no_queue_reads  # type: ignore[method-assign]
    first = api.get("/channels/big/videos", params={"limit": 10}).json()
    assert first["counts"] == {"pending": 10_050, "processing": 0, "completed": 0, "failed": 0}
    assert [v["video_id"] for v in first["videos"]] == ids[:10]
    tail = api.get("/channels/big/videos", params={"after": ids[9_999], "limit": 100}).json()
    assert [v["video_id"] for v in tail["videos"]] == ids[10_000:]
    pending = api.get(
        "/channels/big/videos", params={"status": "pending", "after": ids[10_040]}
    ).json()
    assert [v["video_id"] for v in pending["videos"]] == ids[10_041:]


def test_a_restart_leaves_live_claims_of_other_workers_alone(db_url: str) -> None:
    subtitles = Subtitles(db_url, FAST)
    try:
        subtitles.add_video("c1", "v1", "v1")
        live = subtitles.q.claim(QUEUE, lease=60, worker="another-process")  # transcribing
        [job] = live.jobs
        with TestClient(create_api(subtitles, workers=0)) as api:  # a server (re)starts
            held = subtitles.q.get(job.id)
            assert held is not None and held.status == "running" and held.claim_id == live.id
            subtitles.q.complete(job.id, live.id, {"subtitle": "transcribed"})  # still its own
            assert api.get("/videos/v1").status_code == 200
    finally:
        subtitles.close()


def test_a_completed_video_stays_completed_after_conveyor_prune(open_api: Any) -> None:
    subtitles, api = open_api(workers=0)
    add(api, "v1")
    add(api, "v2")
    subtitles.app.drain()
    api.put("/videos/v2/subtitle", json={"content": "by hand"})
    assert video(api, "v1")["status"] == "completed"
    time.sleep(0.05)
    assert subtitles.q.prune(older_than=0) >= 1  # `conveyor prune`: the history is gone
    after = video(api, "v1")
    assert after["status"] == "completed" and after["completed_at"] is not None
    assert api.post("/reconcile").json() == {"completed": 0}
    assert video(api, "v1")["status"] == "completed"
    counts = api.get("/channels/c1/videos").json()["counts"]
    assert counts == {"pending": 0, "processing": 0, "completed": 2, "failed": 0}
    assert add(api, "v1").status_code == 200  # added again: still nothing to do
    assert subtitles.q.stats(QUEUE).pending == 0


def test_the_queue_declares_its_retention_and_pruned_videos_keep_their_state(
    open_api: Any, db_url: str
) -> None:
    subtitles, api = open_api(workers=0)
    declared = {(p.status, p.queue): p for p in subtitles.q.retention_policies()}
    assert declared[("completed", QUEUE)].retire_keys
    assert set(declared) == {("completed", QUEUE), ("failed", QUEUE), ("cancelled", QUEUE)}
    # An operator's change is kept across restarts.
    subtitles.q.set_retention("completed", 0, queue=QUEUE, retire_keys=True)
    add(api, "v1")
    subtitles.app.drain()
    assert video(api, "v1")["status"] == "completed"
    Subtitles(db_url, FAST).close()  # another server starts
    assert RetentionPruner(subtitles.q, pause=0).run_once() == 1
    assert subtitles.q.stats(QUEUE).completed == 0
    # The video id stays taken: its job reads completed, never pending or gone.
    job = subtitles.q.latest("v1", queue=QUEUE)
    assert job is not None and job.status == "completed"
    assert add(api, "v1").status_code == 200
    assert video(api, "v1")["status"] == "completed"
    assert subtitles.q.stats(QUEUE).pending == 0


def test_reconciliation_wins_over_a_late_transcriber(open_api: Any) -> None:
    import threading

    subtitles, api = open_api(Settings(slow_seconds=1.0, reconcile_interval=0), workers=1)
    finished = threading.Event()
    transcribe = subtitles.transcribe

    def watched(video_id: str, title: str) -> Any:
        try:
            return transcribe(video_id, title)
        finally:
            finished.set()

    subtitles.transcribe = watched  # type: ignore[method-assign]
    add(api, "slow-1")
    wait_until(lambda: video(api, "slow-1")["status"] == "processing")
    api.put("/videos/slow-1/subtitle", json={"content": "the operator's subtitle"})
    assert api.post("/reconcile").json() == {"completed": 1}
    assert finished.wait(30)
    wait_until(lambda: not subtitles.q.jobs(queue=QUEUE, status="running"))
    time.sleep(0.2)  # the task's last write, if any, is done
    with subtitles.db.transaction(write=False) as tx:
        row = tx.one("SELECT content FROM subtitles WHERE video_id = 'slow-1'")
    assert row == {"content": "the operator's subtitle"}
    assert video(api, "slow-1")["status"] == "completed"


def test_text_with_a_nul_character_is_a_422(open_api: Any) -> None:
    subtitles, api = open_api(workers=0)
    titled = api.post("/channels/c1/videos", json={"video_id": "v1", "title": "a\x00b"})
    assert titled.status_code == 422 and "NUL" in titled.json()["error"]["message"]
    add(api, "v2")
    content = api.put("/videos/v2/subtitle", json={"content": "hi\x00"})
    assert content.status_code == 422 and "NUL" in content.json()["error"]["message"]
    assert subtitles.q.stats(QUEUE).total == 1


def test_request_bodies_are_capped(open_api: Any) -> None:
    _, api = open_api(workers=0)
    add(api, "v1")
    huge = api.put("/videos/v1/subtitle", json={"content": "x" * 5_000_000})
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "payload_too_large"


def test_writes_rolled_back_to_break_a_deadlock_run_again_and_commit_once(
    open_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On MySQL a transaction of the application's that also writes a job (conn=) can be
    # chosen to break a deadlock; the database rolls it all back. Two tries fail so here.
    subtitles, api = open_api(workers=0)
    tries = conflicting(monkeypatch, subtitles.q, "enqueue", 2)
    assert add(api, "v1").status_code == 201 and len(tries) == 3
    assert [job.key for job in subtitles.q.jobs(queue=QUEUE)] == ["v1"]
    assert api.get("/channels/c1/videos").json()["counts"]["pending"] == 1
    # The operator's subtitle, then reconciliation completing the video and its job.
    assert api.put("/videos/v1/subtitle", json={"content": "1\n"}).status_code in (200, 204)
    tries = conflicting(monkeypatch, subtitles.q, "complete_by_key", 2)
    assert subtitles.reconcile() == 1 and len(tries) == 3
    assert video(api, "v1")["status"] == "completed"
    assert subtitles.q.latest("v1", queue=QUEUE).status == "completed"  # type: ignore[union-attr]
    # Refused every time: a 503 that asks for a retry, and nothing stored.
    conflicting(monkeypatch, subtitles.q, "enqueue", 99)
    refused = add(api, "v2")
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert api.get("/videos/v2").status_code == 404
    assert len(subtitles.q.jobs(queue=QUEUE)) == 1
