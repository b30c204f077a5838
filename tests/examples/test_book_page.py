"""The book's admin page in headless Chromium, as an admin uses it: the progress bar and
"currently processing" while a job runs, polling that stops when it ends, the failed-page
warning, the error view with its resume button, and a strict Content-Security-Policy."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import IN_CI
from tests.examples.browser import CHROMIUM, Browser
from tests.examples.conftest import wait_until

pytestmark = pytest.mark.slow
POLLS = (
    "performance.getEntriesByType('resource').filter(e => e.name.includes('/jobs/latest')).length"
)


@pytest.fixture
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:  # like PostgreSQL: optional on a laptop, required in CI
        if IN_CI:
            pytest.fail("chromium is not installed (CI=true: the page must be tested)")
        pytest.skip("needs Debian's chromium")
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def server(db_url: str, start_server: Any) -> Any:
    return start_server("book_pipeline", db_url, "--poll-ms", "200", "--slow-seconds", "0.5",
                        "--retry-base", "0.01", workers=1)  # fmt: skip


def new_book(http: httpx.Client, title: str = "Physics") -> str:
    book_id: str = http.post("/admin/books", json={"title": title}).json()["book_id"]
    return book_id


def upload(http: httpx.Client, book: str, pages: list[bytes]) -> dict[str, Any]:
    files = [("images", (f"scan_{n:02d}.png", data, "image/png")) for n, data in enumerate(pages)]
    answer = http.post(f"/admin/books/{book}/pages/bulk", files=files)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_progress_while_running_then_the_result_and_polling_stops(
    server: Any, browser: Browser, tmp_path: Path
) -> None:
    with server.client() as http:
        book = new_book(http)
        upload(http, book, [b"slow one", b"slow two", b"fail: torn", b"slow four", b"slow 5"])
        browser.open(f"{server.url}/admin/books/{book}")
        current = browser.wait_for(
            "(t => t.startsWith('Currently processing: Page ') && t)"
            "(document.getElementById('job-current').textContent)"
        )
        assert re.fullmatch(r"Currently processing: Page [1-5]", current)
        assert browser.evaluate("document.getElementById('bar').max") == 5
        assert browser.text("job-counts").startswith("ocr_batch: ")
        browser.screenshot(tmp_path / "running.png")
        browser.wait_for("!document.getElementById('job-done').hidden")
        assert browser.text("done-summary") == "ocr_batch completed: 4/5 pages"
        assert browser.text("done-warning") == "1 page(s) had errors: page 3 (terminal)"
        assert browser.text("job-progress") == ""  # the progress panel is hidden
        polls = browser.evaluate(POLLS)
        time.sleep(1.0)  # five polling intervals
        assert browser.evaluate(POLLS) == polls  # a finished job is not polled again
        items = browser.evaluate(
            "[...document.querySelectorAll('#page-list li')].map(li => li.className)"
        )
        assert items == ["ocr-completed"] * 2 + ["ocr-failed"] + ["ocr-completed"] * 2
        assert browser.evaluate("document.querySelectorAll('#page-list button').length") == 1


def test_a_failed_job_shows_its_error_and_resumes_from_its_last_page(
    server: Any, browser: Browser, tmp_path: Path
) -> None:
    with server.client() as http:
        book = new_book(http)
        upload(http, book, [b"p1", b"p2", b"crash: the connection drops", b"p4"])
        wait_until(
            lambda: http.get(f"/admin/books/{book}/jobs/latest").json()["status"] == "completed"
        )
        first = http.post(f"/admin/books/{book}/generate-guidelines", json={}).json()
        wait_until(
            lambda: http.get(f"/admin/books/{book}/jobs/latest").json()["status"] == "failed"
        )
        browser.open(f"{server.url}/admin/books/{book}")
        browser.wait_for("!document.getElementById('job-failed').hidden")
        assert browser.text("failed-summary") == "extraction stopped at page 3/4"
        assert browser.text("failed-error") == "the LLM connection dropped at page 3"
        assert browser.text("resume") == "Resume from Page 3"
        browser.screenshot(tmp_path / "failed.png")
        browser.click("resume")  # as the admin would
        browser.wait_for("!document.getElementById('job-done').hidden")
        assert browser.text("done-summary") == "extraction completed: 2/2 pages"
        resumed = http.get(
            f"/admin/books/{book}/jobs/latest", params={"job_type": "extraction"}
        ).json()
        assert resumed["job_id"] != first["job_id"] and resumed["total_items"] == 2
        assert resumed["last_completed_item"] == 4


def test_the_page_runs_only_its_own_script(server: Any, browser: Browser) -> None:
    with server.client() as http:
        hostile = "<script>window.pwned = 1</script><img src=x onerror=window.pwned=2>"
        book = new_book(http, hostile)
        page = http.get(f"/admin/books/{book}")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert re.findall(r"<script[^>]*>", page.text) == ['<script src="/static/book.js" defer>']
        assert not re.search(r"<[^>]*\son\w+=", page.text)  # no event handler attributes
        browser.open(f"{server.url}/admin/books/{book}")
        browser.wait_for("document.getElementById('job-none').hidden === false")
        assert browser.evaluate("document.querySelector('h1').textContent") == hostile
        assert browser.evaluate("window.pwned === undefined")
        assert not [m for m in browser.console if "Content Security Policy" in m]
        assert http.get("/static/other.js").status_code == 404
        assert http.get("/admin/books/nope").status_code == 404
