"""The jobs list in Chromium: filters that live in the URL, keyset paging both ways,
newest or oldest first, search by id or key, keyboard moves, one-line errors."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import expect

from tests.dashboard.conftest import Opener, Server

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/tasks.py", line 12, in send
    smtp.send(message)
ConnectionRefusedError: [Errno 111] Connection refused"""


def ids(page: Any) -> list[int]:
    return [int(t) for t in page.locator("table.jobs tbody [data-row-link]").all_inner_texts()]


def query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def fail(server: Server, job_id: int, error: str = "boom") -> None:
    claim = server.queue.claim_job(job_id)
    server.queue.fail(job_id, claim.id, error, retryable=False)


def test_filters_go_into_the_url_and_back(server: Server, browse: Opener) -> None:
    q = server.queue
    mail = [q.enqueue("send", queue="mail").id for _ in range(3)]
    other = q.enqueue("send", queue="other").id
    fail(server, mail[1])
    fail(server, other)
    page = browse(server.page_url("jobs"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(4)

    page.locator("#f-status").select_option("failed")  # applies at once
    expect(page).to_have_url(re.compile(r"status=failed"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    page.locator("#f-queue").fill("mail")
    page.locator("#f-queue").press("Enter")
    expect(page).to_have_url(re.compile(r"queue=mail"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    assert ids(page) == [mail[1]]
    assert query(page) == {"queue": ["mail"], "status": ["failed"]}
    expect(page.locator("#list-info")).to_contain_text("1 job(s) match")

    # The address is the view: opened anew (shared), it shows the same.
    shared = browse(page.url)
    expect(shared.locator("#f-queue")).to_have_value("mail")
    expect(shared.locator("#f-status")).to_have_value("failed")
    expect(shared.locator("table.jobs tbody tr")).to_have_count(1)

    page.go_back()
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    expect(page.locator("#f-queue")).to_have_value("")


def test_task_key_and_time_filters(server: Server, browse: Opener) -> None:
    q = server.queue
    q.enqueue("resize", key="img-1")
    wanted = q.enqueue("resize", key="img-2").id
    q.enqueue("thumbnail", key="img-2", queue="other")
    page = browse(server.page_url("jobs?task=resize&key=img-2"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    assert ids(page) == [wanted]
    page.locator("#f-to").fill("2001-01-01T00:00")
    page.locator("#f-to").press("Enter")
    expect(page.get_by_text("No job matches these filters.")).to_be_visible()
    assert query(page)["created_before"][0].startswith("200")  # UTC: 2000-12-31 or 2001-01-01


def test_keyset_paging_newest_first_and_back(server: Server, browse: Opener) -> None:
    all_ids = [j.id for j in server.queue.enqueue_many([{"task": "t"}] * 120)]
    page = browse(server.page_url("jobs?limit=50"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(50)
    assert ids(page) == all_ids[::-1][:50]
    expect(page.locator("#list-info")).to_contain_text("120 job(s) match")

    page.get_by_role("link", name="Older →").click()
    expect(page).to_have_url(re.compile(rf"after={all_ids[70]}"))
    expect(page.locator("table.jobs tbody tr").first).to_contain_text(str(all_ids[69]))
    assert ids(page) == all_ids[::-1][50:100]
    page.get_by_role("link", name="Older →").click()
    expect(page.locator("table.jobs tbody tr")).to_have_count(20)
    assert ids(page) == all_ids[19::-1]
    expect(page.locator(".pager .disabled")).to_have_text("Older →")

    page.get_by_role("link", name="← Newer").click()
    expect(page).to_have_url(re.compile(rf"before={all_ids[19]}"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(50)
    assert ids(page) == all_ids[::-1][50:100]
    page.get_by_role("link", name="← Newer").click()
    expect(page.locator("table.jobs tbody tr").first).to_contain_text(str(all_ids[-1]))
    assert "before" not in query(page) and "after" not in query(page)

    # On the first page, new jobs arrive live.
    newest = server.queue.enqueue("t").id
    expect(page.locator("table.jobs tbody tr").first).to_contain_text(str(newest))


def test_oldest_first(server: Server, browse: Opener) -> None:
    all_ids = [j.id for j in server.queue.enqueue_many([{"task": "t"}] * 30)]
    page = browse(server.page_url("jobs?limit=20"))
    page.locator("#f-order").select_option("oldest")
    expect(page).to_have_url(re.compile(r"order=oldest"))
    expect(page.locator("table.jobs tbody tr").first).to_contain_text(str(all_ids[0]))
    assert ids(page) == all_ids[:20]
    page.get_by_role("link", name="Later →").click()
    expect(page.locator("table.jobs tbody tr")).to_have_count(10)
    assert ids(page) == all_ids[20:]


def test_search_by_id_and_by_key(server: Server, browse: Opener) -> None:
    q = server.queue
    job = q.enqueue("fetch", key="https://example.org/s/1").id
    q.enqueue("fetch", key="https://example.org/s/2")
    page = browse(server.page_url("jobs"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    page.keyboard.press("/")
    expect(page.locator("#search-box")).to_be_focused()
    page.keyboard.type(str(job))
    page.keyboard.press("Enter")
    expect(page.locator("main h1")).to_contain_text(f"Job {job}")
    expect(page).to_have_url(re.compile(rf"/jobs/{job}$"))

    page.locator("#search-box").fill("https://example.org/s/1")
    page.locator("#search-box").press("Enter")
    expect(page).to_have_url(re.compile(r"/jobs\?key="))
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    assert ids(page) == [job]


def test_rows_by_keyboard(server: Server, browse: Opener) -> None:
    first, second = (server.queue.enqueue("t").id for _ in range(2))
    page = browse(server.page_url("jobs"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator(f'[data-focus="job-{first}"]')).to_be_focused()
    page.keyboard.press("k")
    expect(page.locator(f'[data-focus="job-{second}"]')).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main h1")).to_contain_text(f"Job {second}")
    expect(page.locator("main h1")).to_be_focused()


def test_a_list_shows_one_line_of_an_error_never_the_traceback(
    server: Server, browse: Opener
) -> None:
    job = server.queue.enqueue("send").id
    fail(server, job, TRACEBACK)
    page = browse(server.page_url("jobs"))
    error = page.locator("table.jobs tbody td.error-col")
    expect(error).to_have_text("ConnectionRefusedError: [Errno 111] Connection refused")
    assert "Traceback" not in page.locator("main").inner_text()
