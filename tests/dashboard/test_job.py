"""A job's page in Chromium: retry a failed job, cancel, release a running one; its
progress bar, folded attempts with tracebacks, claim and lease without the claim id,
dependencies and subscribers."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.dashboard.conftest import Opener, Server

TRACE = """Traceback (most recent call last):
  File "/srv/app/tasks.py", line 7, in parse
    raise ValueError("bad page")
ValueError: bad page"""


def confirm(page: object, label: str) -> None:
    dialog = page.locator("dialog[open]")  # type: ignore[attr-defined]
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name=label).click()


def test_retry_a_failed_job(any_server: Server, browse: Opener) -> None:
    q = any_server.queue
    job = q.enqueue("parse", {"page": 3}, max_attempts=2).id
    for attempt in (1, 2):
        claim = q.claim_job(job, worker=f"host-{attempt}")
        q.fail(job, claim.id, TRACE if attempt == 2 else "timeout", retryable=True, delay=0)
    assert q.get(job).status == "failed"  # type: ignore[union-attr]

    page = browse(any_server.page_url(f"jobs/{job}"))
    expect(page.locator("main h1 .badge")).to_have_text("failed")
    attempts = page.locator("details.attempt")
    expect(attempts).to_have_count(2)
    newest = attempts.first
    expect(newest.locator(".attempt-line")).to_have_text("ValueError: bad page")
    expect(newest.locator("pre.trace")).to_be_hidden()  # folded
    newest.locator("summary").click()
    expect(newest.locator("pre.trace")).to_have_text(TRACE)
    expect(newest.locator(".attempt-head")).to_contain_text("Attempt 2 · retryable")
    expect(newest.locator(".attempt-head")).to_contain_text("host-2")

    page.get_by_role("button", name="Retry").click()
    confirm(page, "Retry")
    expect(page.locator("main h1 .badge")).to_have_text("pending")
    expect(page.locator("#toast")).to_contain_text(f"Job {job} is pending again")
    after = q.get(job)
    assert after is not None and after.status == "pending" and after.attempts == 0
    expect(page.get_by_role("button", name="Cancel")).to_be_visible()
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)


def test_progress_claim_and_lease_without_the_claim_id(any_server: Server, browse: Opener) -> None:
    q = any_server.queue
    book = q.enqueue("books.ocr", {"book": "b-1"}, subscriber="pipeline:extract").id
    later = q.enqueue("books.index", after=[book]).id
    claim = q.claim_job(book, worker="ocr-02:worker-3", lease=600)
    q.progress(book, claim.id, total=100, completed=78, failed=1, current={"page": 79},
               checkpoint=78, detail={"unit": "pages"})  # fmt: skip

    page = browse(any_server.page_url(f"jobs/{book}"))
    expect(page.locator(".progress-text")).to_have_text("78/100 pages, currently page 79, 1 failed")
    bar = page.locator("svg.bar")
    expect(bar).to_have_attribute("aria-valuenow", "79")
    expect(bar.locator("rect.ok")).to_have_attribute("width", "78%")
    expect(bar.locator("rect.bad")).to_have_attribute("width", "1%")
    expect(page.locator("main")).to_contain_text("resumes after 78")
    claim_box = page.locator("section[aria-labelledby=claim-title]")
    expect(claim_box).to_contain_text("ocr-02:worker-3")
    expect(claim_box).to_contain_text("expires in 9 min")
    expect(page.locator("section[aria-labelledby=links-title]")).to_contain_text("pipeline:extract")
    expect(page.get_by_role("link", name=f"#{later}")).to_be_visible()
    assert claim.id not in page.content()

    # The worker moves on: the page follows without a reload.
    q.progress(book, claim.id, completed=90, current={"page": 91})
    expect(page.locator(".progress-text")).to_have_text("90/100 pages, currently page 91, 1 failed")


def test_release_a_running_job(any_server: Server, browse: Opener) -> None:
    q = any_server.queue
    job = q.enqueue("slow").id
    claim = q.claim_job(job, worker="stuck-worker")
    page = browse(any_server.page_url(f"jobs/{job}"))
    page.get_by_role("button", name="Release").click()
    confirm(page, "Release")
    expect(page.locator("main h1 .badge")).to_have_text("pending")
    assert q.get(job).status == "pending"  # type: ignore[union-attr]
    assert claim.id not in page.content()


def test_cancel_asks_first(server: Server, browse: Opener) -> None:
    job = server.queue.enqueue("later").id
    page = browse(server.page_url(f"jobs/{job}"))
    page.get_by_role("button", name="Cancel").click()
    page.keyboard.press("Escape")  # changed one's mind
    expect(page.locator("dialog[open]")).to_have_count(0)
    assert server.queue.get(job).status == "pending"  # type: ignore[union-attr]
    page.get_by_role("button", name="Cancel").click()
    confirm(page, "Cancel job")
    expect(page.locator("main h1 .badge")).to_have_text("cancelled")


def test_payload_and_result(server: Server, browse: Opener) -> None:
    q = server.queue
    job = q.enqueue("render", {"video": "v-9", "sizes": [480, 720]}).id
    claim = q.claim_job(job)
    q.complete(job, claim.id, {"path": "/out/v-9.mp4"})
    page = browse(server.page_url(f"jobs/{job}"))
    payload = page.locator("section[aria-labelledby=payload-title] pre")
    expect(payload).to_contain_text('"video": "v-9"')
    expect(page.locator("section[aria-labelledby=result-title] pre")).to_contain_text(
        "/out/v-9.mp4"
    )
    expect(page.locator("ol.timeline")).to_contain_text("Finished: completed")


def test_a_job_that_does_not_exist(server: Server, browse: Opener) -> None:
    page = browse(server.page_url("jobs/999"), allow=("404",))
    expect(page.locator("main")).to_contain_text("Job 999 does not exist")
