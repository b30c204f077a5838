"""Job data is text, never markup: task names, queues, keys, payloads, errors, progress,
worker and schedule names holding <script> and <img onerror> show literally and run
nothing — checked with the Content-Security-Policy switched off in the browser, so only
the console's own escaping stands between the data and the page."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

import conveyor
from tests.dashboard.conftest import Opener, Server

TASK = '<script>alert("task")</script>'
QUEUE = '<img src=x onerror=alert("queue")>'
KEY = "<svg onload=alert('key')>"
ERROR = '<script>alert("error")</script>\n<img src=x onerror=alert("error-2")>'
PAYLOAD = {
    "note": "<img src=x onerror=alert('payload')>",
    "<b>bold</b>": "</pre><script>1</script>",
}
WORKER = '<img src=x onerror=alert("worker")>'
SUBSCRIBER = "<script>alert('subscriber')</script>"
CURRENT = {"page": "<img src=x onerror=alert('current')>"}


def seed_hostile(server: Server) -> int:
    q = server.queue
    job = q.enqueue(TASK, PAYLOAD, queue=QUEUE, key=KEY, subscriber=SUBSCRIBER, max_attempts=1).id
    claim = q.claim_job(job, worker=WORKER)
    q.progress(job, claim.id, total=10, completed=2, current=CURRENT, checkpoint=KEY)
    q.fail(job, claim.id, ERROR, retryable=False)
    q.worker_seen(WORKER, host=QUEUE, pid=1, queues=[QUEUE], concurrency=1, version=TASK,
                  running=0, ttl=600)  # fmt: skip
    q.save_schedule(WORKER, task=TASK, queue=QUEUE, spec=KEY, first_slot=None, next_slot=None)
    return job


def assert_inert(page: Any) -> None:
    """Nothing from the data became an element or an event handler."""
    assert page.locator("img, main script, main svg[onload], body b").count() == 0
    handlers = page.evaluate(
        "[...document.querySelectorAll('*')].flatMap(e => [...e.attributes])"
        ".filter(a => a.name.startsWith('on')).map(a => a.name)"
    )
    assert handlers == []
    scripts = page.evaluate("[...document.scripts].map(s => s.src)")
    assert len(scripts) == 1 and scripts[0].endswith(".js?v=" + conveyor.__version__)


def test_hostile_job_data_renders_inert(server: Server, browse: Opener) -> None:
    job = seed_hostile(server)
    page = browse(server.page_url(), bypass_csp=True)
    row = page.locator("table.queues tbody tr").first
    expect(row.locator("th")).to_have_text(QUEUE)
    assert_inert(page)

    page.goto(server.page_url("jobs"))
    expect(page.locator("table.jobs tbody td.task")).to_have_text(TASK)
    expect(page.locator("table.jobs tbody td.key")).to_have_text(KEY)
    expect(page.locator("table.jobs tbody td.error-col")).to_have_text(
        '<script>alert("error")</script>'
    )
    assert_inert(page)

    page.goto(server.page_url(f"jobs/{job}"))
    expect(page.locator("code.task-name")).to_have_text(TASK)
    page.locator("details.attempt summary").click()
    expect(page.locator("pre.trace")).to_have_text(ERROR)
    expect(page.locator("section[aria-labelledby=payload-title] pre")).to_contain_text(
        PAYLOAD["note"]
    )
    expect(page.locator("section[aria-labelledby=payload-title] pre")).to_contain_text(
        "</pre><script>1</script>"
    )
    expect(page.locator("main")).to_contain_text(SUBSCRIBER)
    expect(page.locator("main")).to_contain_text(WORKER)
    expect(page.locator(".progress-text")).to_contain_text(f"currently page {CURRENT['page']}")
    expect(page.locator("main")).to_contain_text(f"resumes after {KEY}")
    assert_inert(page)

    page.goto(server.page_url("workers"))
    expect(page.locator("table.workers tbody th")).to_have_text(WORKER)
    expect(page.locator("table.workers tbody")).to_contain_text(TASK)
    assert_inert(page)

    page.goto(server.page_url("schedules"))
    expect(page.locator("table.schedules tbody th")).to_have_text(WORKER)
    expect(page.locator("table.schedules tbody code")).to_have_text(KEY)
    assert_inert(page)


def test_hostile_names_in_dialogs_and_notices(server: Server, browse: Opener) -> None:
    """An admin's confirmation and its notice repeat the queue's name: as text too."""
    server.queue.enqueue("t", queue=QUEUE)
    page = browse(server.page_url(), bypass_csp=True)
    page.locator("table.queues").get_by_role("button", name="Pause").click()
    dialog = page.locator("dialog[open]")
    expect(dialog.locator("h2")).to_have_text(f"Pause queue {QUEUE}?")
    dialog.get_by_role("button", name="Pause").click()
    expect(page.locator("#toast")).to_have_text(f"Queue {QUEUE} paused")
    assert_inert(page)
