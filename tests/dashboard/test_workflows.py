"""Workflow runs in Chromium: the list filtered and paged from the URL, a run's steps as
a layered graph (a 300-step fan-out drawn as one node, a 300-step chain a page of layers
at a time), each step linked to its job and back, cancel and retry for admins and no
actions for readers."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

import conveyor
from tests.dashboard.conftest import Opener, Server, sign_in
from tests.dashboard.test_job import confirm
from tests.dashboard.test_signin import UNAUTHORIZED

TIMES = "\N{MULTIPLICATION SIGN}"  # in the name of a node of many steps


def _book(q: conveyor.Queue, label: str = "book-42", pages: int = 300) -> conveyor.WorkflowRun:
    wf = conveyor.Workflow(label)
    extract = wf.add("books.extract_text", book=42)
    steps = [wf.add("books.ocr_page", book=42, page=n, after=[extract]) for n in range(pages)]
    done = wf.add("books.finalize", book=42, after=steps)
    wf.add("books.notify_owner", book=42, after=[done], on_dependency_failure="run")
    return q.enqueue_workflow(wf)


def _fail(q: conveyor.Queue, job_id: int) -> None:
    claim = q.claim_job(job_id, worker="ocr-01")
    q.fail(job_id, claim.id, "OCRError: the page is blank", retryable=False)


def _finish(q: conveyor.Queue, job_id: int) -> None:
    claim = q.claim_job(job_id, worker="ocr-01")
    q.complete(job_id, claim.id, {"ok": True})


def test_the_list_is_filtered_and_paged_in_the_url(server: Server, browse: Opener) -> None:
    q = server.queue
    runs = [q.enqueue_workflow(conveyor.chain("a.one", "a.two", label=f"nightly-{n}")).id
            for n in range(22)]  # fmt: skip
    q.cancel_workflow(runs[3])
    failed = runs[5]
    _fail(q, q.workflow(failed).jobs["one"].id)

    page = browse(server.page_url("workflows?limit=20"))
    rows = page.locator("table.workflows tbody tr")
    expect(rows).to_have_count(20)
    expect(rows.first.locator("td").first).to_have_text(str(runs[-1]))  # newest first
    expect(rows.first).to_contain_text("nightly-21")
    expect(rows.first.locator(".badge")).to_have_text("running")
    expect(rows.first).to_contain_text("0/2")
    page.get_by_role("link", name="Older →").click()
    expect(page).to_have_url(re.compile(rf"workflows\?limit=20&after={runs[2]}$"))
    expect(rows).to_have_count(2)
    page.get_by_role("link", name="← Newer").click()
    expect(rows).to_have_count(20)

    page.locator("#wf-status").select_option("failed")
    expect(page).to_have_url(re.compile(r"workflows\?status=failed&limit=20$"))
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".badge")).to_have_text("failed")
    expect(rows.first).to_contain_text("1 failed")
    expect(rows.first).to_contain_text("1 cancelled")

    page.goto(server.page_url("workflows?label=nightly-3"))
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".badge")).to_have_text("cancelled")
    page.locator("#wf-label").fill("nothing-like-this")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("table.workflows tbody td.empty")).to_have_text(
        "No workflow run matches these filters."
    )


def test_a_fan_out_of_300_steps_is_one_node_listed_by_pages(
    any_server: Server, browse: Opener
) -> None:
    q = any_server.queue
    run = _book(q)
    _finish(q, run.jobs["extract_text"].id)
    for n in range(1, 11):
        _finish(q, run.jobs[f"ocr_page-{n}" if n > 1 else "ocr_page"].id)

    page = browse(any_server.page_url(f"workflows/{run.id}"))
    expect(page.locator("main h1 .badge")).to_have_text("running")
    expect(page.locator("#wf-counts")).to_have_text("303 steps: 11 completed, 292 pending")
    nodes = page.locator("svg.dag a.node")
    expect(nodes).to_have_count(4)  # extract, the pages as one, finalize, notify
    expect(page.locator("svg.dag .edge")).to_have_count(3)
    pages = page.locator(f'svg.dag a.node[data-node="ocr_page {TIMES}300"]')
    expect(pages.locator("text.sub")).to_have_text("10/300 done")
    expect(page.locator("svg.dag a.node.status-completed")).to_have_count(1)

    # The steps' table: every step, fifty a page, each linking to its job.
    steps = page.locator("table.steps tbody tr")
    expect(steps).to_have_count(50)
    expect(page.locator("main")).to_contain_text("Page 1 of 7")
    pages.click()
    expect(page).to_have_url(re.compile(rf"workflows/{run.id}\?group=1$"))
    expect(page.locator("#wf-steps-title")).to_have_text(f"Steps of ocr_page {TIMES}300")
    expect(page.locator("main")).to_contain_text("Page 1 of 6")
    page.get_by_role("link", name="pending (290)").click()
    expect(page.locator("main")).to_contain_text("Page 1 of 6")
    expect(steps.first.locator("th")).to_have_text("ocr_page-11")
    expect(steps.first).to_contain_text("extract_text")  # runs after

    # A single step's node opens its job, whose page leads back to the run.
    page.locator('svg.dag a.node[data-node="finalize"]').click()
    finalize = run.jobs["finalize"].id
    expect(page).to_have_url(re.compile(rf"/jobs/{finalize}$"))
    back = page.locator("#job-workflow")
    expect(back).to_have_text(f"Workflow {run.id} · step finalize")
    back.get_by_role("link").click()
    expect(page).to_have_url(re.compile(rf"/workflows/{run.id}$"))
    expect(nodes).to_have_count(4)


def test_a_chain_of_300_steps_is_drawn_a_page_of_layers_at_a_time(
    server: Server, browse: Opener
) -> None:
    wf = conveyor.Workflow("long-chain")
    last = wf.add("etl.step", n=0)
    for n in range(1, 300):
        last = wf.add("etl.step", n=n, after=[last])
    run = server.queue.enqueue_workflow(wf)

    page = browse(server.page_url(f"workflows/{run.id}"))
    expect(page.locator("main")).to_contain_text("Layers 1 to 12 of 300")
    expect(page.locator("svg.dag a.node")).to_have_count(12)
    expect(page.locator("svg.dag a.node").first).to_have_attribute("data-node", "step")
    page.get_by_role("link", name="Later layers ↓").click()
    expect(page.locator("main")).to_contain_text("Layers 13 to 24 of 300")
    expect(page.locator("svg.dag a.node").first).to_have_attribute("data-node", "step-13")
    # Edges from the layer above the ones drawn come in as stubs.
    expect(page.locator("svg.dag .edge.out")).to_have_count(2)


def test_an_admin_retries_failed_steps_and_cancels_the_run(
    any_server: Server, browse: Opener
) -> None:
    q = any_server.queue
    run = _book(q, pages=3)
    _finish(q, run.jobs["extract_text"].id)
    _fail(q, run.jobs["ocr_page-2"].id)
    assert q.workflow(run.id).jobs["finalize"].status == "cancelled"

    page = browse(any_server.page_url(f"workflows/{run.id}"))
    failed = page.locator(f'svg.dag a.node[data-node="ocr_page {TIMES}3"]')
    expect(failed).to_have_class(re.compile(r"status-failed"))
    page.get_by_role("button", name="Retry failed steps").click()
    confirm(page, "Retry failed steps")
    expect(page.locator("#toast")).to_contain_text(
        f"Workflow {run.id}: its failed steps are pending again"
    )
    expect(page.locator("#wf-counts")).to_have_text("6 steps: 1 completed, 5 pending")
    expect(page.get_by_role("button", name="Retry failed steps")).to_have_count(0)
    assert q.workflow(run.id).jobs["finalize"].status == "pending"

    page.get_by_role("button", name="Cancel workflow").click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_contain_text("Every step not yet final (5) is cancelled")
    confirm(page, "Cancel workflow")
    expect(page.locator("main h1 .badge")).to_have_text("cancelled")
    expect(page.get_by_role("button", name="Cancel workflow")).to_have_count(0)
    assert q.workflow(run.id).status == "cancelled"


def test_a_reader_sees_the_run_without_actions(token_server: Server, browse: Opener) -> None:
    q = token_server.queue
    run = _book(q, pages=2)
    _finish(q, run.jobs["extract_text"].id)
    _fail(q, run.jobs["ocr_page"].id)
    page: Any = browse(token_server.page_url(f"workflows/{run.id}"), allow=UNAUTHORIZED)
    sign_in(page, "reader")
    expect(page.locator("svg.dag a.node")).to_have_count(4)
    expect(page.locator("#wf-counts")).to_contain_text("1 failed")
    expect(page.locator("main button")).to_have_count(0)
    page.get_by_role("link", name="Workflows", exact=True).first.click()
    expect(page.locator("table.workflows tbody tr")).to_have_count(1)
