"""The Retention page in Chromium: readers see the policies; admins set one from the
form (confirmed first) and clear one from its row."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.dashboard.conftest import Opener, Server, sign_in
from tests.dashboard.test_operator_views import confirm, no_null_text
from tests.dashboard.test_signin import UNAUTHORIZED


def policy_row(page: Any, status: str, queue: str = "", task: str = "") -> Any:
    return page.locator(f'tr[data-policy="{status}/{queue}/{task}"]')


def test_an_admin_sets_and_clears_a_policy(server: Server, browse: Opener) -> None:
    server.queue.set_retention("failed", None, task="sync", retire_keys=True)
    # The refused save below is a 422 the browser logs.
    page = browse(server.page_url("retention"), allow=("status of 422",))
    forever = policy_row(page, "failed", task="sync")
    expect(forever.locator('[data-col="keep"]')).to_have_text("for ever")
    expect(forever.locator('[data-col="keys"]')).to_have_text("retired")
    page.locator("#retention-queue").fill("mail")
    page.locator("#retention-days").fill("2")
    page.locator("#retention-archive").fill("task:archive-mail")
    page.get_by_role("button", name="Save…").click()
    confirm(page, "Save")
    row = policy_row(page, "completed", "mail")
    expect(row.locator('[data-col="keep"]')).to_have_text("2 d")
    expect(row.locator('[data-col="archive"]')).to_have_text("task:archive-mail")
    [saved] = [p for p in server.queue.retention_policies() if p.queue == "mail"]
    assert (saved.status, saved.keep_seconds, saved.retire_keys) == ("completed", 172800, False)
    # A bad archive is refused by the server: the message shows, nothing is saved.
    page.locator("#retention-archive").fill("s3:bucket")
    page.get_by_role("button", name="Save…").click()
    confirm(page, "Save")
    expect(page.locator("#toast")).to_contain_text("archive: expected")
    forever.get_by_role("button", name="Clear…").click()
    confirm(page, "Clear")
    expect(forever).to_have_count(0)
    assert [p.task for p in server.queue.retention_policies()] == [None]


def test_a_reader_sees_the_policies_without_the_controls(
    token_server: Server, browse: Opener
) -> None:
    token_server.queue.set_retention("completed", 3600, queue="mail")
    page = browse(token_server.page_url("retention"), allow=UNAUTHORIZED)
    sign_in(page, "reader")
    row = policy_row(page, "completed", "mail")
    expect(row.locator('[data-col="keep"]')).to_have_text("1 h")
    expect(page.locator("#retention-form")).to_have_count(0)
    expect(row.get_by_role("button")).to_have_count(0)
    no_null_text(page)
