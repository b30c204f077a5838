"""The overview in Chromium: counts per queue and status that follow the database
without a reload, live updates that pause, the throughput chart, paused queues, and
the admin's maintenance actions."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.dashboard.conftest import WAIT_MS, Opener, Server


def cell(page: Any, queue: str, column: str) -> Any:
    return page.locator(f'tr[data-queue="{queue}"] [data-col="{column}"]')


def test_counts_change_without_a_reload(any_server: Server, browse: Opener) -> None:
    page = browse(any_server.page_url())
    expect(page.get_by_text("No jobs yet")).to_be_visible()
    page.evaluate("window.stillTheSamePage = true")

    created = any_server.api.post(
        "/api/jobs/batch", json={"queue": "mail", "jobs": [{"task": "send"}] * 3}
    )
    assert created.status_code == 201
    expect(cell(page, "mail", "pending")).to_have_text("3")
    expect(page.locator('[data-card="pending"] .card-value')).to_have_text("3")

    claim = any_server.api.post("/api/queues/mail/claim", json={"limit": 1}).json()
    job = claim["jobs"][0]["id"]
    any_server.api.post(
        f"/api/jobs/{job}/fail",
        json={"claim_id": claim["claim_id"], "error": "x", "retryable": False},
    )
    expect(cell(page, "mail", "pending")).to_have_text("2")
    expect(cell(page, "mail", "failed")).to_have_text("1")
    assert page.evaluate("window.stillTheSamePage") is True


def test_live_updates_pause_and_resume(server: Server, browse: Opener) -> None:
    server.queue.enqueue("send", queue="mail")
    page = browse(server.page_url())
    expect(cell(page, "mail", "pending")).to_have_text("1")
    page.keyboard.press("p")
    expect(page.locator("#live-toggle")).to_have_attribute("aria-pressed", "true")
    server.queue.enqueue("send", queue="mail")
    page.wait_for_timeout(4500)  # two polls' worth: nothing may move while paused
    expect(cell(page, "mail", "pending")).to_have_text("1")
    page.get_by_role("button", name="Resume live updates").click()
    expect(cell(page, "mail", "pending")).to_have_text("2")


def test_past_lease_oldest_pending_and_the_chart(any_server: Server, browse: Opener) -> None:
    q = any_server.queue
    q.enqueue_many([{"task": "sync"}] * 4, queue="sync")
    done = q.claim("sync", limit=2)
    q.complete_many([(j.id, done.id, None) for j in done])
    q.claim("sync", limit=1, lease=1)  # its worker never comes back
    page = browse(any_server.page_url())
    expect(cell(page, "sync", "expired")).to_have_text("1", timeout=WAIT_MS)
    expect(page.locator('[data-card="running"] .card-note')).to_have_text("1 past their lease")
    expect(cell(page, "sync", "oldest")).to_have_text(re.compile(r"^\d+ s$"))
    figure = page.locator("figure.chart")
    expect(figure.locator("svg[role=img]")).to_have_attribute(
        "aria-label", "Jobs per minute over the last hour: 2 completed, 0 failed"
    )
    assert figure.locator("rect.ok").count() >= 1


def test_pause_and_resume_a_queue_with_confirmation(any_server: Server, browse: Opener) -> None:
    any_server.queue.enqueue("send", queue="mail")
    page = browse(any_server.page_url())
    row = page.locator('tr[data-queue="mail"]')
    row.get_by_role("button", name="Pause").click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_contain_text("Pause queue mail?")
    dialog.get_by_role("button", name="Back").click()
    assert not any_server.queue.queue_settings("mail").get("mail", None)

    row.get_by_role("button", name="Pause").click()
    page.locator("dialog[open]").get_by_role("button", name="Pause").click()
    expect(cell(page, "mail", "state")).to_have_text("paused")
    assert any_server.queue.queue_settings("mail")["mail"].paused
    assert any_server.queue.claim("mail").jobs == []

    row.get_by_role("button", name="Resume").click()
    page.locator("dialog[open]").get_by_role("button", name="Resume").click()
    expect(cell(page, "mail", "state")).to_have_text("active")
    assert len(any_server.queue.claim("mail").jobs) == 1


def test_reset_old_claims_and_prune(server: Server, browse: Opener) -> None:
    q = server.queue
    q.enqueue_many([{"task": "t"}] * 3, queue="work")
    held = q.claim("work", limit=2)
    finished = q.claim("work", limit=1)
    q.complete(finished.jobs[0].id, finished.id)
    page = browse(server.page_url())
    expect(cell(page, "work", "running")).to_have_text("2")

    page.locator("#reset-minutes").fill("0")
    page.get_by_role("button", name="Reset claims…").click()
    page.locator("dialog[open]").get_by_role("button", name="Reset claims").click()
    expect(page.locator("#toast")).to_contain_text("2 claim(s) reset")
    expect(cell(page, "work", "pending")).to_have_text("2")
    assert all(q.get(j.id).status == "pending" for j in held)  # type: ignore[union-attr]

    page.locator("#prune-days").fill("0")
    page.get_by_role("button", name="Prune…").click()
    page.locator("dialog[open]").get_by_role("button", name="Prune").click()
    expect(page.locator("#toast")).to_contain_text("1 job(s) deleted")
    assert q.get(finished.jobs[0].id) is None
