"""The book pipeline's test matrix (section 19a), wherever it applies to the API: the job
lifecycle and lock, stale detection on poll, extraction with partial and catastrophic
failures and resume, bulk upload and OCR, rate-limit back-off, races, and the
``JobStatusResponse`` invariants. The page itself is tested in a browser
(test_book_page.py)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import conveyor
from conveyor.maintenance import RetentionPruner
from examples.book_pipeline import jobs
from examples.book_pipeline.app import Pipeline, create_api
from examples.book_pipeline.jobs import QUEUE, Settings
from tests.examples.conftest import conflicting, wait_until

FAST = Settings(stale_after=30, retry_base=0.01, slow_seconds=0.3)
FIELDS = {"job_id", "book_id", "job_type", "status", "total_items", "completed_items",
          "failed_items", "current_item", "last_completed_item", "progress_detail",
          "heartbeat_at", "started_at", "completed_at", "error_message"}  # fmt: skip


@pytest.fixture
def open_api(db_url: str) -> Iterator[Callable[..., tuple[Pipeline, TestClient]]]:
    opened: list[tuple[Pipeline, TestClient]] = []

    def open_one(settings: Settings = FAST, workers: int = 1) -> tuple[Pipeline, TestClient]:
        pipeline = Pipeline(db_url, settings)
        client = TestClient(create_api(pipeline, workers=workers))
        client.__enter__()
        opened.append((pipeline, client))
        return pipeline, client

    yield open_one
    for pipeline, client in opened:
        client.__exit__(None, None, None)
        pipeline.close()


def new_book(api: Any) -> str:
    answer = api.post("/admin/books", json={"title": "Physics"})
    assert answer.status_code == 201
    book_id: str = answer.json()["book_id"]
    return book_id


def upload(api: Any, book: str, pages: list[bytes], names: list[str] | None = None) -> Any:
    names = names or [f"scan_{n:03d}.png" for n in range(1, len(pages) + 1)]
    files = [("images", (name, data, "image/png")) for name, data in zip(names, pages, strict=True)]
    return api.post(f"/admin/books/{book}/pages/bulk", files=files)


def latest(api: Any, book: str, kind: str | None = None) -> dict[str, Any] | None:
    params = {"job_type": kind} if kind else {}
    answer = api.get(f"/admin/books/{book}/jobs/latest", params=params)
    assert answer.status_code == 200, answer.text
    job: dict[str, Any] | None = answer.json()
    if job is not None:
        check_invariants(job)
    return job


def finished(api: Any, book: str, kind: str | None = None) -> dict[str, Any]:
    return wait_until(  # type: ignore[no-any-return]
        lambda: (j := latest(api, book, kind)) and j["status"] in ("completed", "failed") and j,
        timeout=60,
    )


def check_invariants(job: dict[str, Any]) -> None:
    """Section 8b's table: what every JobStatusResponse must satisfy."""
    assert set(job) == FIELDS
    assert job["status"] in ("pending", "running", "completed", "failed")  # never "stale"
    assert (job["error_message"] is not None) == (job["status"] == "failed")
    assert job["started_at"] is not None and job["job_id"] and job["book_id"]
    assert job["job_type"] in ("extraction", "finalization", "ocr_batch")
    assert job["completed_items"] >= 0 and job["failed_items"] >= 0
    if job["total_items"] is not None:
        assert job["completed_items"] + job["failed_items"] <= job["total_items"]
    assert (job["completed_at"] is not None) == (job["status"] in ("completed", "failed"))


def ocr_done(api: Any, book: str, pages: list[bytes]) -> dict[str, Any]:
    assert upload(api, book, pages).status_code == 200
    return finished(api, book, "ocr_batch")


# -- category 1: state machine and lock ---------------------------------------------------
def test_1_1_a_job_runs_pending_running_completed(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    started = upload(api, book, [b"page one", b"page two"]).json()
    assert set(started) == {"job_id", "pages_uploaded", "total_pages", "status", "message"}
    assert started["pages_uploaded"] == [1, 2] and started["status"] == "processing"
    pending = latest(api, book)
    assert pending is not None and pending["status"] == "pending"
    assert pending["completed_items"] == 0 and pending["current_item"] is None  # 7.4
    seen = []
    worker = threading.Thread(target=pipeline.app.drain)
    worker.start()
    while worker.is_alive():
        seen.append(latest(api, book)["status"])  # type: ignore[index]
    worker.join()
    done = latest(api, book)
    assert done is not None and done["status"] == "completed" and done["completed_at"]
    assert done["completed_items"] == 2 and done["last_completed_item"] == 2
    assert set(seen) <= {"pending", "running", "completed"}


def test_1_3_and_6_4_a_second_job_for_a_book_is_refused_while_one_is_active(
    open_api: Any,
) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    first = upload(api, book, [b"page"]).json()
    for attempt in (
        lambda: api.post(f"/admin/books/{book}/generate-guidelines", json={}),
        lambda: api.post(f"/admin/books/{book}/finalize"),
        lambda: upload(api, book, [b"more"]),
    ):
        refused = attempt()
        assert refused.status_code == 409
        assert refused.json()["detail"] == (
            f"ocr_batch job {first['job_id']} is already pending for book {book}"
        )
    assert pipeline.store.page_count(book) == 1  # the refused upload left no page behind
    assert latest(api, book)["job_id"] == first["job_id"]  # type: ignore[index]  # untouched
    other = new_book(api)
    assert upload(api, other, [b"page"]).status_code == 200  # other books are free


def test_1_4_a_new_job_once_the_last_completed(open_api: Any) -> None:
    _, api = open_api()
    book = new_book(api)
    ocr_done(api, book, [b"one", b"two"])
    started = api.post(f"/admin/books/{book}/generate-guidelines", json={})
    assert started.status_code == 200 and started.json()["status"] == "started"
    assert finished(api, book, "extraction")["status"] == "completed"


@pytest.mark.parametrize("heartbeat", [True, False], ids=["heartbeat-stopped", "never-beat"])
def test_1_6_1_7_a_job_without_a_recent_heartbeat_is_failed_on_poll(
    open_api: Any, heartbeat: bool
) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    upload(api, book, [b"a", b"b", b"c"])
    claim = pipeline.q.claim(QUEUE, lease=0.3)  # a worker that then dies
    [job] = claim.jobs
    if heartbeat:
        pipeline.q.progress(job.id, claim.id, total=3, completed=1, current=2, checkpoint=1)
    time.sleep(0.5)
    stale = latest(api, book)
    assert stale is not None and stale["status"] == "failed"  # failed by this poll, not "stale"
    message = stale["error_message"]
    assert message.startswith("Job interrupted (no heartbeat since ")
    assert (
        message.endswith("Resume from page 2.")
        if heartbeat
        else message.endswith("Resume from the start.")
    )
    assert stale["completed_at"] is not None  # 6.9: the invariants hold after stale detection
    with pytest.raises(conveyor.ConveyorError):  # 1.9: the dead worker's writes change nothing
        pipeline.q.progress(job.id, claim.id, completed=3)
    assert latest(api, book)["completed_items"] == (1 if heartbeat else 0)  # type: ignore[index]
    # 1.8 / 6.5: a new job after a stale one
    assert api.post(f"/admin/books/{book}/finalize").status_code == 200


def test_6_2_a_double_click_starts_one_job(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    upload(api, book, [b"a"])
    pipeline.app.drain()
    barrier = threading.Barrier(2)
    codes: list[int] = []

    def click() -> None:
        barrier.wait()
        codes.append(api.post(f"/admin/books/{book}/generate-guidelines", json={}).status_code)

    clicks = [threading.Thread(target=click) for _ in range(2)]
    for t in clicks:
        t.start()
    for t in clicks:
        t.join()
    assert sorted(codes) == [200, 409]
    active = [j for j in pipeline.q.jobs(queue=QUEUE) if j.status in ("pending", "running")]
    assert len(active) == 1


# -- category 2: extraction, failures and resume ------------------------------------------
def test_2_1_happy_path_five_pages(open_api: Any) -> None:
    pipeline, api = open_api()
    book = new_book(api)
    ocr_done(api, book, [f"page {n}".encode() for n in range(1, 6)])
    started = api.post(f"/admin/books/{book}/generate-guidelines", json={}).json()
    assert {k: started[k] for k in ("start_page", "end_page", "total_pages")} == {
        "start_page": 1, "end_page": 5, "total_pages": 5}  # fmt: skip
    done = finished(api, book, "extraction")
    assert done["status"] == "completed" and done["completed_items"] == 5
    assert done["failed_items"] == 0 and done["error_message"] is None
    assert [g["page_num"] for g in pipeline.store.guidelines(book)] == [1, 2, 3, 4, 5]


def test_2_2_a_page_that_fails_is_recorded_and_the_job_goes_on(open_api: Any) -> None:
    pipeline, api = open_api()
    book = new_book(api)
    ocr_done(api, book, [b"p1", b"p2", b"fail: torn", b"p4", b"p5"])
    api.post(f"/admin/books/{book}/generate-guidelines", json={})
    done = finished(api, book, "extraction")
    assert done["status"] == "completed" and done["error_message"] is None
    assert done["completed_items"] == 4 and done["failed_items"] == 1
    import json

    detail = json.loads(done["progress_detail"])
    assert detail["page_errors"]["3"]["error_type"] == "terminal"
    assert [g["page_num"] for g in pipeline.store.guidelines(book)] == [1, 2, 4, 5]


def test_2_3_2_4_2_5_a_catastrophic_failure_then_resume_after_the_last_good_page(
    open_api: Any,
) -> None:
    pipeline, api = open_api()
    book = new_book(api)
    ocr_done(api, book, [b"p1", b"p2", b"p3", b"crash: the connection drops", b"p5"])
    api.post(f"/admin/books/{book}/generate-guidelines", json={})
    failed = finished(api, book, "extraction")
    assert failed["status"] == "failed" and failed["completed_at"]  # 6.9
    assert failed["error_message"] == "the LLM connection dropped at page 4"
    assert failed["last_completed_item"] == 3 and failed["current_item"] == 4
    before = {g["page_num"]: g["written_at"] for g in pipeline.store.guidelines(book)}
    assert sorted(before) == [1, 2, 3]
    resumed = api.post(f"/admin/books/{book}/generate-guidelines", json={"resume": True}).json()
    assert (resumed["start_page"], resumed["end_page"], resumed["total_pages"]) == (4, 5, 2)
    done = finished(api, book, "extraction")
    assert done["job_id"] == resumed["job_id"] and done["status"] == "completed"
    assert done["completed_items"] == 2 and done["last_completed_item"] == 5
    after = {g["page_num"]: g["written_at"] for g in pipeline.store.guidelines(book)}
    assert {p: after[p] for p in (1, 2, 3)} == before  # pages 1-3 untouched
    again = api.post(f"/admin/books/{book}/generate-guidelines", json={"resume": True}).json()
    assert again == {"job_id": None, "status": "already_complete",
                     "message": "All pages already processed"}  # fmt: skip
    # 2.5: processing pages again overwrites their results, never duplicates them
    api.post(f"/admin/books/{book}/generate-guidelines", json={"start_page": 1})
    assert finished(api, book, "extraction")["completed_items"] == 5
    assert len(pipeline.store.guidelines(book)) == 5


def test_a_books_jobs_are_kept_for_ever_whatever_the_databases_defaults(
    open_api: Any, db_url: str
) -> None:
    pipeline, api = open_api()
    declared = {p.status: p for p in pipeline.q.retention_policies() if p.queue == QUEUE}
    assert set(declared) == {"completed", "failed", "cancelled"}
    assert all(p.keep_seconds is None and not p.retire_keys for p in declared.values())
    # Another application on the database prunes every final job at once by default.
    for status in ("completed", "failed", "cancelled"):
        pipeline.q.set_retention(status, 0)
    book = new_book(api)
    ocr_done(api, book, [b"p1", b"p2", b"crash: the connection drops", b"p4"])
    api.post(f"/admin/books/{book}/generate-guidelines", json={})
    failed = finished(api, book, "extraction")
    assert failed["status"] == "failed" and failed["last_completed_item"] == 2
    time.sleep(0.05)
    assert RetentionPruner(pipeline.q, pause=0).run_once() == 0
    Pipeline(db_url, FAST).close()  # another server starts: the policies stay as they are
    assert RetentionPruner(pipeline.q, pause=0).run_once() == 0
    # The book's jobs are all there: the page shows them, and resuming starts at page 3.
    assert latest(api, book, "ocr_batch")["status"] == "completed"  # type: ignore[index]
    resumed = api.post(f"/admin/books/{book}/generate-guidelines", json={"resume": True}).json()
    assert resumed["start_page"] == 3
    assert finished(api, book, "extraction")["status"] == "completed"


def test_resume_of_a_resumed_job_that_did_nothing_still_starts_after_the_good_pages(
    open_api: Any,
) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    upload(api, book, [b"p1", b"p2", b"p3"])
    pipeline.app.drain()
    api.post(f"/admin/books/{book}/generate-guidelines", json={"start_page": 3})
    pipeline.q.cancel(pipeline.q.jobs(queue=QUEUE, status="pending")[0].id)  # it never ran
    stopped = latest(api, book, "extraction")
    assert stopped is not None and stopped["last_completed_item"] == 2
    resumed = api.post(f"/admin/books/{book}/generate-guidelines", json={"resume": True}).json()
    assert resumed["start_page"] == 3


# -- category 3: bulk upload and OCR ------------------------------------------------------
def test_3_1_3_2_bulk_upload_then_background_ocr(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    names = [f"scan_{n:02d}.png" for n in (10, 2, 7, 1, 3, 4, 5, 6, 8, 9)]
    answer = upload(api, book, [name.encode() for name in names], names)
    assert answer.status_code == 200 and answer.json()["total_pages"] == 10
    pages = api.get(f"/admin/books/{book}/pages").json()["pages"]
    assert [p["filename"] for p in pages] == sorted(names)  # numbered by file name
    assert {p["ocr_status"] for p in pages} == {"pending"}
    pipeline.app.drain()
    pages = api.get(f"/admin/books/{book}/pages").json()["pages"]
    assert {p["ocr_status"] for p in pages} == {"completed"} and all(p["has_text"] for p in pages)
    assert latest(api, book)["completed_items"] == 10  # type: ignore[index]


def test_3_3_4_1_a_rate_limited_page_is_retried_2_4_8_16_then_failed_retryable(
    open_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    monkeypatch.setattr(jobs, "pause", waits.append)  # the schedule, without the wait
    pipeline, api = open_api(Settings(), workers=0)  # the default back-off
    book = new_book(api)
    upload(api, book, [b"p1", b"busy: rate limited", b"p3", b"p4", b"p5"])
    pipeline.app.drain()
    assert waits == [2, 4, 8, 16]
    done = latest(api, book)
    assert done is not None and done["status"] == "completed"
    assert (done["completed_items"], done["failed_items"]) == (4, 1)
    import json

    assert json.loads(done["progress_detail"])["page_errors"] == {
        "2": {"error": "429 rate limit exceeded", "error_type": "retryable", "attempts": 5}
    }
    statuses = [p["ocr_status"] for p in api.get(f"/admin/books/{book}/pages").json()["pages"]]
    assert statuses == ["completed", "failed", "completed", "completed", "completed"]


def test_4_3_a_corrupt_page_is_not_retried(open_api: Any) -> None:
    _, api = open_api()
    book = new_book(api)
    done = ocr_done(api, book, [b"fail: corrupt"])
    import json

    [error] = json.loads(done["progress_detail"])["page_errors"].values()
    assert error == {"error": "corrupt image: cannot decode", "error_type": "terminal",
                     "attempts": 1}  # fmt: skip


def test_3_4_a_failed_page_is_retried_on_request(open_api: Any) -> None:
    _, api = open_api(Settings(retry_base=0.01, page_attempts=1))
    book = new_book(api)
    ocr_done(api, book, [b"ok", b"flaky: busy once"])
    page = api.get(f"/admin/books/{book}/pages").json()["pages"][1]
    assert page["ocr_status"] == "failed" and page["error_type"] == "retryable"
    retried = api.post(f"/admin/books/{book}/pages/2/retry-ocr").json()
    assert retried["page_num"] == 2 and retried["ocr_status"] == "completed"
    assert retried["ocr_text"].startswith("flaky")
    assert api.post(f"/admin/books/{book}/pages/2/retry-ocr").status_code == 409  # done
    assert api.post(f"/admin/books/{book}/pages/9/retry-ocr").status_code == 404
    assert api.post("/admin/books/nope/pages/1/retry-ocr").status_code == 404


def test_3_6_a_single_page_upload_waits_for_the_bulk_ocr(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    one = ("image", ("extra.png", b"an extra page", "image/png"))
    upload(api, book, [b"p1", b"p2"])
    refused = api.post(f"/admin/books/{book}/pages", files=[one])
    assert refused.status_code == 409 and "Bulk OCR job in progress" in refused.text
    pipeline.app.drain()
    added = api.post(f"/admin/books/{book}/pages", files=[one])
    assert added.status_code == 201
    assert added.json()["page_num"] == 3 and added.json()["ocr_status"] == "completed"


def test_3_7_bulk_uploads_outside_the_limits_are_refused(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    too_many = upload(api, book, [b"x"] * 201)
    assert too_many.status_code == 400 and "Max 200 files" in too_many.json()["detail"]
    assert api.post(f"/admin/books/{book}/pages/bulk", data={"x": "1"}).status_code == 400
    assert upload(api, book, [b"x"], ["notes.txt"]).status_code == 400
    assert upload(api, book, [b""], ["empty.png"]).status_code == 400
    big = upload(api, book, [b"x" * (10 * 2**20 + 1)], ["huge.png"])
    assert big.status_code == 400
    assert upload(api, "no-such-book", [b"x"]).status_code == 404
    assert pipeline.store.page_count(book) == 0 and pipeline.q.stats(QUEUE).total == 0
    assert upload(api, book, [b"x"] * 200).status_code == 200


# -- polling endpoints ----------------------------------------------------------------------
def test_jobs_of_another_book_are_not_found(open_api: Any) -> None:
    _, api = open_api(workers=0)
    book, other = new_book(api), new_book(api)
    job_id = upload(api, book, [b"p"]).json()["job_id"]
    assert api.get(f"/admin/books/{book}/jobs/{job_id}").json()["job_id"] == job_id
    for path in (f"/admin/books/{other}/jobs/{job_id}", f"/admin/books/{book}/jobs/abc",
                 f"/admin/books/{book}/jobs/99999999999999999999"):  # fmt: skip
        assert api.get(path).status_code == 404
    assert api.get(f"/admin/books/{other}/jobs/latest").json() is None
    assert api.get(f"/admin/books/{book}/jobs/latest", params={"job_type": "x"}).status_code == 422
    assert api.get(f"/admin/books/{book}/jobs/latest?job_type=extraction").json() is None


def test_generate_needs_a_book_with_pages(open_api: Any) -> None:
    _, api = open_api(workers=0)
    book = new_book(api)
    assert api.post("/admin/books/nope/generate-guidelines", json={}).status_code == 404
    empty = api.post(f"/admin/books/{book}/generate-guidelines", json={})
    assert empty.status_code == 400 and empty.json()["detail"] == (
        "No pages uploaded for this book"
    )
    bad = api.post(f"/admin/books/{book}/generate-guidelines", json={"start_page": 0})
    assert bad.status_code == 422


def test_at_most_one_extraction_runs_at_a_time(open_api: Any) -> None:
    pipeline, api = open_api(Settings(slow_seconds=0.2), workers=3)
    books = [new_book(api) for _ in range(2)]
    for book in books:
        ocr_done(api, book, [b"p1", b"p2", b"p3"])
    statuses: list[tuple[str, ...]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            running = pipeline.q.jobs(queue=QUEUE, status="running")
            statuses.append(tuple(j.task for j in running))
            time.sleep(0.01)

    slow_extract = pipeline.stand_ins.extract

    def slowly(book_id: str, page: int, text: str) -> str:
        time.sleep(0.1)
        return slow_extract(book_id, page, text)

    pipeline.stand_ins.extract = slowly  # type: ignore[method-assign]
    watcher = threading.Thread(target=watch)
    watcher.start()
    for book in books:
        api.post(f"/admin/books/{book}/generate-guidelines", json={})
    for book in books:
        assert finished(api, book, "extraction")["status"] == "completed"
    stop.set()
    watcher.join()
    assert max(len(s) for s in statuses) == 1  # never two extractions at once
    assert any(statuses)


# -- 6.10 with real processes: a worker that comes back after its job was failed ----------
@pytest.mark.slow
def test_6_10_a_frozen_worker_that_wakes_up_changes_nothing(db_url: str, start_server: Any) -> None:
    worker = start_server("book_pipeline", db_url, "--stale-after", "2",
                          "--slow-seconds", "3", workers=1)  # fmt: skip
    reader = start_server("book_pipeline", db_url, workers=0)
    with reader.client() as api:
        book = new_book(api)
        upload(api, book, [b"slow: page"] * 4)
        wait_until(lambda: (latest(api, book) or {}).get("current_item") == 2, timeout=30)
        # Freeze it in the middle of page 2's OCR, between writes: on SQLite a process
        # frozen while it holds the write lock would stall every writer until it wakes.
        time.sleep(0.3)
        worker.proc.send_signal(signal.SIGSTOP)  # no heartbeat, no progress
        try:
            time.sleep(2.6)  # past its lease
            stale = latest(api, book)  # the poll that fails it
            assert stale is not None and stale["status"] == "failed"
            assert "Job interrupted" in stale["error_message"]
            assert stale["error_message"].endswith("Resume from page 2.")
        finally:
            worker.proc.send_signal(signal.SIGCONT)
        time.sleep(3.5)  # it wakes up, finishes page 2 and tries to report it
        after = latest(api, book)
        assert after is not None and after["status"] == "failed"
        assert after["completed_items"] == stale["completed_items"] == 1  # refused
        assert after["error_message"] == stale["error_message"]
        assert worker.proc.poll() is None  # and it did not crash
        started = api.post(f"/admin/books/{book}/finalize")
        assert started.status_code == 200  # the book is free again


def test_the_demo_runs_from_another_directory(db_url: str, tmp_path: Any) -> None:
    import json

    from tests.examples.conftest import run_module

    done = run_module("book_pipeline", "--db", db_url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["second_job_while_ocr_runs"].startswith("HTTP 409")
    assert out["ocr"] == "11 read, 1 failed"
    assert "failed at page 9" in out["extraction"]
    assert out["resume"] == "Guideline generation started for pages 9-12"
    assert out["after_resume"] == "completed: 4 pages, 0 without text"


# -- second round: resume of OCR, heartbeats, one job system-wide, the original's errors --
def test_an_interrupted_ocr_batch_resumes_from_its_checkpoint(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    upload(api, book, [b"p1", b"p2", b"p3", b"p4"])
    claim = pipeline.q.claim(QUEUE, lease=0.3)  # a worker that reads page 1, starts page 2
    [job] = claim.jobs
    pipeline.store.set_ocr(book, 1, "completed", text="p1")
    pipeline.q.progress(job.id, claim.id, total=4, completed=1, current=1, checkpoint=1)
    pipeline.store.set_ocr(book, 2, "processing")
    pipeline.q.progress(job.id, claim.id, current=2)
    time.sleep(0.5)  # ... and dies
    stale = latest(api, book, "ocr_batch")
    assert stale is not None and stale["status"] == "failed"
    assert stale["error_message"].endswith("Resume from page 2.")
    pages = api.get(f"/admin/books/{book}/pages").json()["pages"]
    assert [p["ocr_status"] for p in pages] == ["completed", "pending", "pending", "pending"]
    resumed = api.post(f"/admin/books/{book}/pages/resume-ocr")
    assert resumed.status_code == 200, resumed.text
    body = resumed.json()
    assert (body["status"], body["start_page"], body["total_pages"]) == ("started", 2, 3)
    started = latest(api, book, "ocr_batch")
    assert started is not None and started["last_completed_item"] == 1  # before it did any
    pipeline.app.drain()
    done = latest(api, book, "ocr_batch")
    assert done is not None and done["job_id"] == body["job_id"]
    assert done["status"] == "completed" and done["completed_items"] == 3
    assert done["last_completed_item"] == 4
    pages = api.get(f"/admin/books/{book}/pages").json()["pages"]
    assert {p["ocr_status"] for p in pages} == {"completed"}
    again = api.post(f"/admin/books/{book}/pages/resume-ocr").json()
    assert again["job_id"] is None and again["status"] == "already_complete"


def test_the_stale_message_keeps_the_last_heartbeat(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    upload(api, book, [b"a", b"b"])
    claim = pipeline.q.claim(QUEUE, lease=0.4)
    [job] = claim.jobs
    beat = pipeline.q.heartbeat(job.id, claim.id, extend=0.4)
    assert beat.heartbeat_at is not None
    running = latest(api, book)
    assert running is not None and running["heartbeat_at"] is not None
    time.sleep(0.6)  # the worker died; another process's rescuer recovers the job first
    assert pipeline.q.recover(queue=QUEUE) == 1
    stale = latest(api, book)
    assert stale is not None and stale["status"] == "failed"
    assert stale["heartbeat_at"] == running["heartbeat_at"]
    assert f"no heartbeat since {running['heartbeat_at']}" in stale["error_message"]
    assert "never" not in stale["error_message"]


def test_a_running_task_records_its_heartbeat(open_api: Any) -> None:
    pipeline, api = open_api(workers=1)
    book = new_book(api)
    release = threading.Event()
    real_ocr = pipeline.stand_ins.ocr

    def held(book_id: str, page: int, image: bytes) -> str:
        release.wait(30)
        return real_ocr(book_id, page, image)

    pipeline.stand_ins.ocr = held  # type: ignore[method-assign]
    job_id = int(upload(api, book, [b"a"]).json()["job_id"])
    try:
        assert wait_until(lambda: pipeline.store.last_beat(job_id), timeout=30)
    finally:
        release.set()
    assert finished(api, book)["status"] == "completed"


def test_heartbeats_every_30_seconds_as_the_design_says(open_api: Any) -> None:
    pipeline, _ = open_api(Settings(), workers=0)
    options = jobs.worker_options(Settings())
    assert options == {"lease": 120.0, "heartbeat_interval": 30.0}
    worker = pipeline.app.worker(install_signals=False, **options)
    assert worker.timing.heartbeat == 30.0
    short = jobs.worker_options(Settings(stale_after=6))  # a lease shorter than 90 s
    assert short["heartbeat_interval"] == 2.0


def test_one_job_runs_at_a_time_across_books(open_api: Any) -> None:
    pipeline, api = open_api(Settings(slow_seconds=0.2, retry_base=0.01), workers=3)
    books = [new_book(api) for _ in range(2)]
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(len(pipeline.q.jobs(queue=QUEUE, status="running")))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for book in books:  # OCR of two books: they wait for each other
            assert upload(api, book, [b"slow: a", b"slow: b", b"slow: c"]).status_code == 200
        for book in books:
            assert finished(api, book, "ocr_batch")["status"] == "completed"
    finally:
        stop.set()
        watcher.join()
    assert max(seen) == 1 and 1 in seen


def test_errors_answer_as_the_original_api_does(open_api: Any) -> None:
    _, api = open_api(workers=0)
    missing = api.get("/admin/books/nope/pages")
    assert missing.status_code == 404 and missing.json() == {"detail": "Book not found: nope"}
    invalid = api.post("/admin/books", json={"title": ""})
    assert invalid.status_code == 422 and isinstance(invalid.json()["detail"], str)
    book = new_book(api)
    unknown = api.get(f"/admin/books/{book}/jobs/12345")
    assert unknown.json() == {"detail": "Job not found"}


def test_a_nul_character_is_refused_with_a_4xx(open_api: Any) -> None:
    pipeline, api = open_api(workers=0)
    titled = api.post("/admin/books", json={"title": "Phys\x00ics"})
    assert titled.status_code == 422 and "NUL" in titled.json()["detail"]
    assert api.get("/admin/books/a%00b/pages").status_code == 422
    book = new_book(api)
    body = (
        b'--b\r\nContent-Disposition: form-data; name="images"; filename="scan\x00_1.png"\r\n'
        b"Content-Type: image/png\r\n\r\nx\r\n--b--\r\n"
    )  # a raw NUL in the file name (httpx would percent-encode it)
    named = api.post(
        f"/admin/books/{book}/pages/bulk",
        content=body,
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert named.status_code == 400 and "NUL" in named.json()["detail"], named.text
    assert pipeline.store.page_count(book) == 0


def test_without_the_examples_extra_it_says_what_to_install(tmp_path: Any) -> None:
    import subprocess
    import sys

    from tests.examples.conftest import ENV

    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name in ('python_multipart', 'multipart'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    env = {**ENV, "PYTHONPATH": f"{blocker}:{ENV['PYTHONPATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "examples.book_pipeline", "serve", "--port", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: the book pipeline needs the examples extra (missing: python-multipart); "
        "install it with: pip install -e '.[examples]'"
    ]


def test_an_upload_rolled_back_by_a_deadlock_stores_its_pages_once(
    open_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pages and their job commit in one transaction; rolled back twice (MySQL breaking
    # a deadlock), it runs again: the pages are numbered from 1 once, one job holds them.
    pipeline, api = open_api(workers=0)
    book = new_book(api)
    tries = conflicting(monkeypatch, pipeline.q, "enqueue", 2)
    answer = upload(api, book, [b"page-1", b"page-2"])
    assert answer.status_code == 200, answer.text
    assert answer.json()["pages_uploaded"] == [1, 2] and len(tries) == 3
    assert [p["page_num"] for p in pipeline.store.pages(book)] == [1, 2]
    assert len(pipeline.q.jobs(queue=QUEUE, key=book)) == 1


def test_a_poll_does_not_wait_behind_a_transaction_holding_the_heartbeat(
    open_api: Any,
) -> None:
    # A worker stopped (SIGSTOP) while it recorded a heartbeat holds that row until it
    # wakes: the poll's stale check, which records the same heartbeat, goes on without.
    pipeline, api = open_api(workers=0)
    if pipeline.store.db.dialect == "sqlite":
        pytest.skip("SQLite: every writer waits for the one write lock, a poll's too")
    book = new_book(api)
    upload(api, book, [b"a"])
    claim = pipeline.q.claim(QUEUE, lease=60)
    [job] = claim.jobs
    beat = pipeline.q.heartbeat(job.id, claim.id)
    assert beat.heartbeat_at is not None
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pipeline.store.db.transaction() as tx:
            tx.execute(
                "UPDATE job_heartbeats SET heartbeat_at = :at WHERE job_id = :job"
                if tx.dialect == "mysql"
                else "INSERT INTO job_heartbeats (job_id, heartbeat_at) VALUES (:job, :at)"
                " ON CONFLICT (job_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
                {"job": str(job.id), "at": "2000-01-01T00:00:00.000000+00:00"},
            )
            holding.set()
            release.wait(60)

    pipeline.store.beat(job.id, "1999-01-01T00:00:00.000000+00:00")  # the row exists
    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        running = latest(api, book)  # without the fix: waits for the holder, times out
        assert running is not None and running["status"] == "running"
    finally:
        release.set()
        holder.join()
    assert pipeline.store.beat(job.id, beat.heartbeat_at.isoformat(timespec="microseconds"))


def test_a_poll_does_not_wait_behind_a_transaction_holding_a_page(open_api: Any) -> None:
    # A worker stopped (SIGSTOP) while it marked a page holds that page's row: the poll
    # that fails its stale job still answers, and a later poll settles the page.
    pipeline, api = open_api(workers=0)
    if pipeline.store.db.dialect == "sqlite":
        pytest.skip("SQLite: every writer waits for the one write lock, a poll's too")
    book = new_book(api)
    upload(api, book, [b"a", b"b"])
    claim = pipeline.q.claim(QUEUE, lease=0.3)  # a worker that then stops
    assert len(claim.jobs) == 1
    pipeline.store.set_ocr(book, 1, "processing")  # its first page, begun
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:  # and writing that page when it stopped
        with pipeline.store.db.transaction() as tx:
            tx.execute(
                "UPDATE pages SET ocr_status = 'processing' WHERE book_id = :book AND page_num = 1",
                {"book": book},
            )
            holding.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        time.sleep(0.5)  # past its lease
        stale = latest(api, book)  # without the fix: waits for the holder, times out
        assert stale is not None and stale["status"] == "failed"
    finally:
        release.set()
        holder.join()
    latest(api, book)  # the page is free now: this poll settles it
    pages = api.get(f"/admin/books/{book}/pages").json()["pages"]
    assert {p["ocr_status"] for p in pages} == {"pending"}
