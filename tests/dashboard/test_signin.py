"""Tokens in the browser: a token server shows a sign-in form, keeps the token in that
tab only, and shows readers no action controls at all."""

from __future__ import annotations

from dataclasses import replace

from playwright.sync_api import expect

from conveyor.web.auth import Tokens
from tests.dashboard.conftest import TOKEN_OF, Opener, Server, sign_in

# Before sign-in the page asks the API who it is talking to, and hears 401.
UNAUTHORIZED = ("401",)
ACTIONS = "main button[data-action], main form.tool, #bulk button"


def test_a_token_server_shows_the_sign_in_form(token_server: Server, browse: Opener) -> None:
    token_server.queue.enqueue("send", queue="mail")
    page = browse(token_server.page_url(), allow=UNAUTHORIZED)
    form = page.locator("form#signin")
    expect(form).to_be_visible()
    expect(page.locator("#token")).to_have_attribute("type", "password")
    expect(page.locator("#token")).to_be_focused()
    expect(page.locator("header nav")).to_be_hidden()
    expect(page.locator("main table")).to_have_count(0)  # nothing is shown before sign-in

    page.locator("#token").fill("not-the-token")
    page.keyboard.press("Enter")
    expect(page.locator("#signin-error")).to_have_text("That token is not valid.")
    assert page.evaluate("sessionStorage.getItem('conveyor.token')") is None

    sign_in(page, "admin")
    expect(page.locator('tr[data-queue="mail"] [data-col="pending"]')).to_have_text("1")
    expect(page.locator("#who .role")).to_have_text("admin")


def test_the_token_stays_in_that_tab(token_server: Server, browse: Opener) -> None:
    page = browse(token_server.page_url(), allow=UNAUTHORIZED)
    sign_in(page, "reader")
    assert page.evaluate("sessionStorage.getItem('conveyor.token')") == TOKEN_OF["reader"]
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    page.reload()  # the same tab keeps it
    expect(page.locator("#who .role")).to_have_text("reader")

    other_tab = browse(token_server.page_url(), context=page.context, allow=UNAUTHORIZED)
    expect(other_tab.locator("form#signin")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.locator("form#signin")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('conveyor.token')") is None


def test_a_revoked_token_brings_the_sign_in_form_back(token_server: Server, browse: Opener) -> None:
    page = browse(token_server.page_url("jobs"), allow=UNAUTHORIZED)
    sign_in(page, "reader")
    expect(page.locator("main h1")).to_have_text("Jobs")
    # The operators rotate the tokens: the reader's is no longer among them.
    state = token_server.app.state.conveyor
    token_server.app.state.conveyor = replace(state, tokens=Tokens({TOKEN_OF["admin"]: "admin"}))
    expect(page.locator("#signin-error")).to_have_text(
        "Your token is no longer accepted: sign in again."
    )
    assert page.evaluate("sessionStorage.getItem('conveyor.token')") is None
    sign_in(page, "admin")
    expect(page.locator("#who .role")).to_have_text("admin")


def test_a_reader_sees_no_action_controls(token_server: Server, browse: Opener) -> None:
    q = token_server.queue
    failed = q.enqueue("send", queue="mail").id
    claim = q.claim_job(failed)
    q.fail(failed, claim.id, "boom", retryable=False)
    running = q.enqueue("send", queue="mail").id
    q.claim_job(running)

    page = browse(token_server.page_url(), allow=UNAUTHORIZED)
    sign_in(page, "reader")
    expect(page.locator('tr[data-queue="mail"] [data-col="failed"]')).to_have_text("1")
    expect(page.locator(ACTIONS)).to_have_count(0)
    expect(page.get_by_role("columnheader", name="Actions")).to_have_count(0)
    loaded = {  # something that shows only once the page has read its data
        "jobs?status=failed": f'[data-focus="job-{failed}"]',
        f"jobs/{failed}": "main h1 .status-failed",
        f"jobs/{running}": "section[aria-labelledby=claim-title]",
    }
    for path, sign in loaded.items():
        page.goto(token_server.page_url(path))
        expect(page.locator(sign)).to_be_visible()
        expect(page.locator(ACTIONS)).to_have_count(0)
        # The filter form's own button is the only one a reader gets.
        expect(page.locator("main button:not(#filters button)")).to_have_count(0)


def test_an_admin_sees_them(token_server: Server, browse: Opener) -> None:
    q = token_server.queue
    failed = q.enqueue("send", queue="mail").id
    q.fail(failed, q.claim_job(failed).id, "boom", retryable=False)
    page = browse(token_server.page_url("jobs?status=failed"), allow=UNAUTHORIZED)
    sign_in(page, "admin")
    expect(page.get_by_role("button", name="Retry all failed…")).to_be_visible()
    page.goto(token_server.page_url(f"jobs/{failed}"))
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    page.get_by_role("button", name="Retry").click()
    page.locator("dialog[open]").get_by_role("button", name="Retry").click()
    expect(page.locator("main h1 .badge")).to_have_text("pending")
