"""The operator's views in Chromium: jobs not yet due (scheduled or waiting to retry)
with run now, what each worker runs right now (and what it only claimed ahead), run
times, deleting one job; and the slips: no stray "null" for readers, every count a
link, the oldest pending job counted among those due, the Workers page kept live."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from playwright.sync_api import expect

from tests.dashboard.conftest import Opener, Server, sign_in
from tests.dashboard.test_signin import UNAUTHORIZED


def cell(page: Any, queue: str, column: str) -> Any:
    return page.locator(f'tr[data-queue="{queue}"] [data-col="{column}"]')


def no_null_text(page: Any) -> None:
    """No text node of the page reads "null" (a null appended as text)."""
    nulls = page.evaluate(
        """() => {
          const walker = document.createTreeWalker(document.querySelector("main"),
                                                   NodeFilter.SHOW_TEXT);
          const found = [];
          while (walker.nextNode()) {
            if (walker.currentNode.textContent.trim() === "null") found.push(
              walker.currentNode.parentElement.outerHTML.slice(0, 80));
          }
          return found;
        }"""
    )
    assert nulls == []


def confirm(page: Any, button: str) -> None:
    page.locator("dialog[open]").get_by_role("button", name=button).click()


def retry_waiting(q: Any, queue: str = "mail") -> int:
    job = q.enqueue("send", {"to": "ada@example.org"}, queue=queue)
    claim = q.claim_job(job.id)
    q.fail(job.id, claim.id, "SMTP 451: try again later", delay=3600)
    return int(job.id)


# -- the slips --------------------------------------------------------------------------
def test_a_reader_sees_no_stray_null(token_server: Server, browse: Opener) -> None:
    q = token_server.queue
    q.enqueue("send", queue="mail")
    page = browse(token_server.page_url(), allow=UNAUTHORIZED)
    sign_in(page, "reader")
    expect(cell(page, "mail", "pending")).to_have_text("1")
    no_null_text(page)
    page.goto(token_server.page_url("jobs"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    no_null_text(page)
    page.goto(token_server.page_url("scheduled"))
    expect(page.locator("#deferred-info")).to_have_text("0 job(s)")
    no_null_text(page)


def test_the_scheduled_count_links_to_the_jobs_behind_it(server: Server, browse: Opener) -> None:
    q = server.queue
    later = [q.enqueue("digest", queue="mail", run_at=q.now() + timedelta(minutes=m))
             for m in (120, 30)]  # fmt: skip
    retrying = retry_waiting(q)
    q.enqueue("digest", queue="other", run_at=q.now() + timedelta(hours=3))
    page = browse(server.page_url())
    link = cell(page, "mail", "scheduled").get_by_role("link")
    expect(link).to_have_text("3")
    expect(page.locator('[data-card="scheduled"] .card-value')).to_have_text("4")
    link.click()
    expect(page).to_have_url(re.compile(r"/scheduled\?queue=mail$"))
    rows = page.locator("table.deferred tbody tr")
    # Soonest first: a digest in 30 min, the retry in an hour, a digest in two.
    expect(rows).to_have_count(3)
    ids = [int(t) for t in rows.locator("td:first-child").all_inner_texts()]
    assert ids == [later[1].id, retrying, later[0].id]
    expect(rows.filter(has_text="retrying")).to_have_count(1)
    page.get_by_role("link", name="Waiting to retry").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("SMTP 451: try again later")
    expect(page.locator('[data-kind="retrying"]')).to_have_attribute("aria-current", "page")
    expect(rows.first.locator('[data-col="due"]')).to_have_text(re.compile(r"^in (59 min|1 h)"))


def test_oldest_pending_counts_only_jobs_that_are_due(server: Server, browse: Opener) -> None:
    q = server.queue
    q.enqueue("digest", queue="mail", run_at=q.now() + timedelta(days=2))
    page = browse(server.page_url())
    expect(cell(page, "mail", "pending")).to_contain_text("1")
    expect(cell(page, "mail", "oldest")).to_have_text("\u2013")  # none
    expect(page.locator('[data-card="oldest-pending"] .card-note')).to_have_text(
        "nothing due waits"
    )
    q.enqueue("send", queue="mail")
    expect(cell(page, "mail", "oldest")).to_have_text(re.compile(r"^\d+ s$"))


# -- scheduled and retrying jobs, run now -------------------------------------------------
def test_run_one_job_now_and_then_all(server: Server, browse: Opener) -> None:
    q = server.queue
    scheduled = [q.enqueue("digest", queue="mail", run_at=q.now() + timedelta(hours=1 + n))
                 for n in range(3)]  # fmt: skip
    retrying = retry_waiting(q)
    page = browse(server.page_url("scheduled"))
    rows = page.locator("table.deferred tbody tr")
    expect(rows).to_have_count(4)
    row = page.locator(f'tr[data-job="{scheduled[2].id}"]')
    row.get_by_role("button", name="Run now").click()
    expect(page.locator("dialog[open]")).to_contain_text("due now instead of at its scheduled")
    confirm(page, "Run now")
    expect(rows).to_have_count(3)
    assert [j.id for j in q.claim("mail", limit=5).jobs] == [scheduled[2].id]

    page.get_by_role("link", name="Waiting to retry").click()
    expect(rows).to_have_count(1)
    page.get_by_role("button", name="Run all now…").click()
    confirm(page, "Run all now")
    expect(page.locator("#toast")).to_contain_text("1 job(s) due now")
    expect(page.get_by_text("No job waits")).to_be_visible()
    job = q.get(retrying)
    assert job is not None and job.attempts == 1 and job.run_at <= q.now()
    page.get_by_role("link", name="All not yet due").click()
    expect(rows).to_have_count(2)


def test_run_now_from_the_job_page(server: Server, browse: Opener) -> None:
    q = server.queue
    job = q.enqueue("digest", queue="mail", run_at=q.now() + timedelta(hours=5))
    page = browse(server.page_url(f"jobs/{job.id}"))
    page.get_by_role("button", name="Run now").click()
    confirm(page, "Run now")
    expect(page.get_by_role("button", name="Run now")).to_have_count(0)
    fresh = q.get(job.id)
    assert fresh is not None and fresh.run_at <= q.now()


def test_a_reader_gets_no_run_now(token_server: Server, browse: Opener) -> None:
    q = token_server.queue
    job = q.enqueue("digest", queue="mail", run_at=q.now() + timedelta(hours=5))
    page = browse(token_server.page_url("scheduled"), allow=UNAUTHORIZED)
    sign_in(page, "reader")
    expect(page.locator(f'tr[data-job="{job.id}"]')).to_be_visible()
    expect(page.locator("main button")).to_have_count(0)


# -- the busy view, and jobs claimed ahead ------------------------------------------------
def test_the_busy_view_tells_running_jobs_from_jobs_claimed_ahead(
    any_server: Server, browse: Opener
) -> None:
    q = any_server.queue
    jobs = [q.enqueue("fetch", {"n": n}, queue="fetch") for n in range(3)]
    claim = q.claim("fetch", limit=3, worker="bot-1")
    started = q.now()
    q.worker_seen("bot-1", host="bot", pid=7, queues=["fetch"], concurrency=1, version="1",
                  running=1, ttl=600, busy=[(jobs[0].id, started)])  # fmt: skip
    page = browse(any_server.page_url("workers"))
    busy = page.locator("table.running-now tbody tr")
    expect(busy).to_have_count(3)
    expect(page.locator(f'table.running-now tr[data-job="{jobs[0].id}"] .badge')).to_have_text(
        "running"
    )
    for job in jobs[1:]:
        expect(page.locator(f'table.running-now tr[data-job="{job.id}"] .badge')).to_have_text(
            "claimed · waiting"
        )
    worker = page.locator('tr[data-worker="bot-1"] [data-col="running"]')
    expect(worker).to_contain_text("1/1")
    expect(worker).to_contain_text("+2 waiting")
    expect(page.locator("#busy-info")).to_have_text(
        "1 running, 2 claimed ahead and waiting for a free slot."
    )

    # Live, as the other pages: a job that ends leaves the view at the next poll, with
    # no new word from the worker's registry entry.
    q.complete(jobs[0].id, claim.id, "ok")
    expect(busy).to_have_count(2)
    expect(worker).to_contain_text("0/1")

    # The job's own page and the jobs list say the same.
    page.goto(any_server.page_url(f"jobs/{jobs[1].id}"))
    expect(page.locator("main h1 .badge")).to_have_text("claimed · waiting")
    expect(page.locator("#claimed-ahead")).to_contain_text("bot-1 claimed this job ahead")
    page.goto(any_server.page_url("jobs?status=running"))
    expect(page.locator("table.jobs .status-claimed")).to_have_count(2)


# -- run times, delete --------------------------------------------------------------------
def test_run_times_on_the_list_and_the_job(server: Server, browse: Opener) -> None:
    q = server.queue
    job = q.enqueue("send", queue="mail")
    claim = q.claim("mail")
    q.complete(job.id, claim.id, "sent")
    page = browse(server.page_url("jobs"))
    run_time = page.locator(f'tr:has([data-focus="job-{job.id}"]) [data-col="run-time"]')
    expect(run_time).to_have_text(re.compile(r"^\d+\.\d+ s$"))
    page.goto(server.page_url(f"jobs/{job.id}"))
    expect(page.locator("#run-time")).to_have_text(re.compile(r"^\d+\.\d+ s$"))
    expect(page.locator("dt", has_text="Run time")).to_be_visible()


def test_delete_a_final_job(server: Server, browse: Opener) -> None:
    q = server.queue
    done = q.enqueue("send", queue="mail", subscriber="audit")
    q.complete(done.id, q.claim("mail").id, "sent")
    pending = q.enqueue("send", queue="mail")
    page = browse(server.page_url(f"jobs/{pending.id}"))
    expect(page.get_by_role("button", name="Cancel")).to_be_visible()
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)
    page.goto(server.page_url(f"jobs/{done.id}"))
    page.get_by_role("button", name="Delete").click()
    expect(page.locator("dialog[open]")).to_contain_text("deleted for good")
    confirm(page, "Delete job")
    expect(page).to_have_url(re.compile(r"/jobs\?queue=mail$"))
    expect(page.locator("#toast")).to_contain_text(f"Job {done.id} was deleted")
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    assert q.get(done.id) is None and q.subscribers(done.id) == []


# -- throughput history ----------------------------------------------------------------------
def test_throughput_over_a_day_and_a_week(server: Server, browse: Opener) -> None:
    q = server.queue
    hour = q.now().replace(minute=0, second=0, microsecond=0)
    rows = [
        (hour - timedelta(hours=3), "mail", 40, 2),  # within the day, per minute
        (hour - timedelta(days=3), "mail", 500, 5),  # within the week, rolled up below
        (hour - timedelta(days=3), "fetch", 100, 0),
    ]
    with q.driver.session() as session:
        cur = getattr(session, "_cur")  # noqa: B009 - a fixture, not a queue operation
        cur.executemany(
            "INSERT INTO conveyor_throughput VALUES (?, ?, ?, ?)",
            [(int(t.timestamp()), name, c, f) for t, name, c, f in rows],
        )
    assert q.roll_up_throughput() == 2
    page = browse(server.page_url())
    caption = page.locator(".chart figcaption")
    expect(caption).to_contain_text("in the last hour, per minute")
    expect(caption).to_contain_text("0 completed")
    page.locator("#chart-range").select_option("day")
    expect(page).to_have_url(re.compile(r"/\?range=day$"))
    expect(caption).to_contain_text("40 completed")
    expect(caption).to_contain_text("2 failed")
    expect(caption).to_contain_text("in the last 24 hours, per hour")
    expect(page.locator(".chart svg g:has(rect.hit)")).to_have_count(24)
    page.locator("#chart-range").select_option("week")
    expect(caption).to_contain_text("640 completed")
    expect(page.locator(".chart svg g:has(rect.hit)")).to_have_count(168)
    # One queue, over the week.
    page.goto(server.page_url("?queue=mail&range=week"))
    expect(caption).to_contain_text("540 completed")
    expect(page.locator("#chart-range")).to_have_value("week")


# -- search by payload ------------------------------------------------------------------------
def test_search_jobs_by_a_payload_field(server: Server, browse: Opener) -> None:
    q = server.queue
    ids = [q.enqueue("mail.send", {"to": f"u{n % 2}@example.org", "n": n}, queue="mail").id
           for n in range(6)]  # fmt: skip
    page = browse(server.page_url("jobs"))
    page.locator("#f-payload").fill("to=u1@example.org")
    page.locator("#f-queue").fill("mail")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"payload=to%3Du1%40example.org"))
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(3)
    shown = [int(t) for t in rows.locator("td:first-child").all_inner_texts()]
    assert shown == [ids[5], ids[3], ids[1]]
    expect(page.locator("#list-info")).to_contain_text(
        "3 job(s) whose payload has to = u1@example.org, newest first, all jobs searched"
    )
    # Pages of a search go on below where the last one stopped.
    page.goto(server.page_url("jobs?payload=n%3D4&limit=20"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(str(ids[4]))
    page.goto(server.page_url("jobs?payload=nonsense"))
    expect(page.locator("#banner")).to_contain_text("the payload filter reads field=value")


# -- per-task figures -------------------------------------------------------------------------
def test_runs_failures_and_run_times_per_task(server: Server, browse: Opener) -> None:
    q = server.queue
    for _ in range(3):
        job = q.enqueue("mail.send", queue="mail")
        q.complete(job.id, q.claim("mail").id, None)
    failed = q.enqueue("mail.send", queue="mail")
    q.fail(failed.id, q.claim("mail").id, "boom", retryable=False)
    page = browse(server.page_url())
    row = page.locator('table.tasks tr[data-task="mail.send"]')
    expect(row.locator('[data-col="runs"]')).to_have_text("4")
    expect(row.locator('[data-col="failures"]')).to_have_text("1")
    expect(row.locator('[data-col="rate"]')).to_have_text("25 %")
    expect(row.locator('[data-col="p50"]')).to_have_text(re.compile(r"^\d+ ms$|^\d+\.\d s$"))
    expect(row.locator('[data-col="p95"]')).to_have_text(re.compile(r"^\d+ ms$|^\d+\.\d s$"))
    row.locator('[data-col="failures"] a').click()
    expect(page).to_have_url(re.compile(r"/jobs\?task=mail.send&status=failed$"))
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
