"""Workers and schedules pages: every registered worker, idle ones too, kept current."""

from __future__ import annotations

import re
from datetime import timedelta

from playwright.sync_api import expect

from tests.dashboard.conftest import Opener, Server


def test_workers_busy_and_idle(any_server: Server, browse: Opener) -> None:
    q = any_server.queue
    q.worker_seen("web-1:w1", host="web-1", pid=101, queues=["mail", "fetch"], concurrency=8,
                  version="0.1.0", running=3, ttl=600)  # fmt: skip
    q.worker_seen("web-2:w1", host="web-2", pid=202, queues=["mail"], concurrency=4,
                  version="0.1.0", running=0, ttl=600)  # fmt: skip
    page = browse(any_server.page_url("workers"))
    rows = page.locator("table.workers tbody tr")
    expect(rows).to_have_count(2)
    busy = rows.filter(has_text="web-1:w1")
    expect(busy).to_contain_text("3/8")
    expect(busy.locator(".badge")).to_have_text("busy")
    expect(busy.get_by_role("link", name="fetch")).to_be_visible()
    idle = rows.filter(has_text="web-2:w1")
    expect(idle.locator(".badge")).to_have_text("idle")
    expect(idle).to_contain_text("202")
    expect(page.locator("main")).to_contain_text("2 worker(s): 1 busy, 1 idle")

    q.worker_stopped("web-1:w1")
    expect(rows).to_have_count(1)
    page.goto(any_server.page_url())
    expect(page.locator('[data-card="workers"] .card-value')).to_have_text("1")


def test_schedules(server: Server, browse: Opener) -> None:
    now = server.queue.now()
    server.queue.save_schedule("nightly", task="reports.nightly", queue="reports",
                               spec="0 3 * * *", first_slot=now - timedelta(hours=2),
                               next_slot=now + timedelta(hours=3))  # fmt: skip
    page = browse(server.page_url("schedules"))
    row = page.locator("table.schedules tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("nightly")
    expect(row.locator("code")).to_have_text("0 3 * * *")
    expect(row.locator("td").nth(4)).to_have_text(re.compile(r"^in (3 h|2 h 59 min)$"))
    row.get_by_role("link", name="reports.nightly").click()
    expect(page.locator("#f-task")).to_have_value("reports.nightly")
