"""Bulk actions from the jobs list: retry every failed job of a filtered selection, or
cancel every pending one, after confirmation; jobs outside the filter stay as they are."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.dashboard.conftest import Opener, Server


def fail(server: Server, job_id: int) -> None:
    claim = server.queue.claim_job(job_id)
    server.queue.fail(job_id, claim.id, "smtp down", retryable=False)


def test_retry_all_failed_in_queue_mail(any_server: Server, browse: Opener) -> None:
    q = any_server.queue
    mail = [j.id for j in q.enqueue_many([{"task": "send"}] * 5, queue="mail")]
    other = q.enqueue("send", queue="other").id
    for job_id in [*mail[:4], other]:
        fail(any_server, job_id)

    page = browse(any_server.page_url("jobs?queue=mail&status=failed"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(4)
    page.get_by_role("button", name="Retry all failed…").click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_contain_text("queue mail, status failed")
    dialog.get_by_role("button", name="Retry all").click()
    expect(page.locator("#toast")).to_have_text("Retried 4 job(s)")
    expect(page.get_by_text("No job matches these filters.")).to_be_visible()

    assert [q.get(i).status for i in mail] == ["pending"] * 5  # type: ignore[union-attr]
    assert q.get(other).status == "failed"  # type: ignore[union-attr]


def test_cancel_all_pending_of_a_task(server: Server, browse: Opener) -> None:
    q = server.queue
    crawl = [j.id for j in q.enqueue_many([{"task": "crawl"}] * 3)]
    keep = q.enqueue("index").id
    page = browse(server.page_url("jobs?status=pending&task=crawl"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(3)
    page.get_by_role("button", name="Cancel all pending…").click()
    page.locator("dialog[open]").get_by_role("button", name="Back").click()
    assert q.stats().cancelled == 0
    page.get_by_role("button", name="Cancel all pending…").click()
    page.locator("dialog[open]").get_by_role("button", name="Cancel all").click()
    expect(page.locator("#toast")).to_have_text("Cancelled 3 job(s)")
    assert all(q.get(i).status == "cancelled" for i in crawl)  # type: ignore[union-attr]
    assert q.get(keep).status == "pending"  # type: ignore[union-attr]


def test_bulk_goes_on_past_one_request(server: Server, browse: Opener) -> None:
    """More jobs than one request handles: the page repeats until the server is done."""
    q = server.queue
    ids = q.enqueue_ids([{"task": "t"}] * 1150, queue="big")
    page = browse(server.page_url("jobs?queue=big&status=pending"))
    expect(page.locator("table.jobs tbody tr").first).to_be_visible()  # the list is shown
    page.get_by_role("button", name="Cancel all pending…").click()
    page.locator("dialog[open]").get_by_role("button", name="Cancel all").click()
    expect(page.locator("#toast")).to_have_text("Cancelled 1,150 job(s)", timeout=60_000)
    assert q.stats("big").cancelled == len(ids) == 1150


def test_no_bulk_action_without_a_status(server: Server, browse: Opener) -> None:
    server.queue.enqueue("t")
    page = browse(server.page_url("jobs"))
    expect(page.locator("#bulk")).to_contain_text("Pick a status")
    expect(page.locator("#bulk button")).to_have_count(0)
