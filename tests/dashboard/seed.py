"""A queue that looks lived in, for the console's screenshots and for trying it by hand:
jobs in every state over six queues, retries with tracebacks, a book being read page by
page, a claim past its lease, a paused queue, limits, workers, schedules, and an hour of
throughput.

``python -m tests.dashboard.seed sqlite:///console.db`` fills a database; then
``conveyor serve --db sqlite:///console.db`` shows it."""

from __future__ import annotations

import math
import sys
import time
from datetime import UTC, datetime, timedelta

import conveyor

TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/mail/tasks.py", line 41, in send_receipt
    smtp.sendmail(sender, [to], message.as_bytes())
  File "/usr/lib/python3.11/smtplib.py", line 887, in sendmail
    raise SMTPRecipientsRefused(senderrs)
smtplib.SMTPRecipientsRefused: {'{to}': (550, b'5.1.1 mailbox unavailable')}"""

TIMEOUT = """Traceback (most recent call last):
  File "/srv/app/sync/catalogue.py", line 88, in push_batch
    response = client.post("/v2/books/batch", json=batch, timeout=10)
  File "/srv/app/.venv/lib/python3.11/site-packages/httpx/_client.py", line 1146, in post
    return self.request("POST", url, json=json, timeout=timeout)
httpx.ReadTimeout: catalogue API timed out after 10 s"""


def seed(q: conveyor.Queue) -> dict[str, int]:
    """Fill ``q``; returns the ids worth a look (``book``: the job reading pages)."""
    ids: dict[str, int] = {}
    ids["book"] = _books(q)
    ids["workflow"] = _workflows(q)
    _downloads(q)
    _mail(q)
    _sync(q)
    _fetch(q)
    _subtitles(q)
    _later(q)
    q.pause("subtitles")
    q.set_limits("fetch", max_running=8, rate="30/1m")
    q.set_limits("books", group_max_running=1)
    _workers(q)
    _schedules(q)
    _throughput(q)
    if q.dialect == "sqlite":
        _age(q)
    return ids


def _finish(q: conveyor.Queue, queue: str, completed: int, worker: str) -> None:
    claim = q.claim(queue, limit=completed, worker=worker)
    q.complete_many(
        [(job.id, claim.id, {"ok": True, "took_ms": 40 + job.id % 300}) for job in claim]
    )


def _workflows(q: conveyor.Queue) -> int:
    """Three runs: a finished chain, an import whose one failed row cancelled its
    callback, and a book read page by page (300 pages, one failed); returns the book's."""
    report = conveyor.chain("reports.collect", "reports.render", "reports.publish",
                            label="nightly-report")  # fmt: skip
    run = q.enqueue_workflow(report)
    for job in run.jobs.values():
        claim = q.claim_job(job.id, worker="cron-01:worker-1")
        q.complete(job.id, claim.id, {"ok": True})

    imports = conveyor.Workflow("import 2026-11")
    rows = [imports.add("imports.row", row=n, queue="imports") for n in range(40)]
    imports.add("imports.report_success", after=rows, queue="imports")
    run = q.enqueue_workflow(imports)
    steps = list(run.jobs.values())
    for job in steps[:40]:
        claim = q.claim_job(job.id, worker="etl-02:worker-1")
        if job.step == "row-13":
            q.fail(job.id, claim.id, "ValueError: row 13: no ISBN", retryable=False)
        else:
            q.complete(job.id, claim.id, {"imported": True})

    book = conveyor.Workflow("book-42")
    extract = book.add("books.extract_text", book=42, queue="ocr")
    pages = [book.add("books.ocr_page", book=42, page=n, after=[extract], queue="ocr")
             for n in range(1, 301)]  # fmt: skip
    done = book.add("books.finalize", book=42, after=pages, queue="ocr")
    book.add("books.notify_owner", book=42, after=[done], on_dependency_failure="run",
             queue="ocr")  # fmt: skip
    run = q.enqueue_workflow(book)
    ids = [run.jobs["extract_text"].id] + [run.jobs[p.name].id for p in pages]
    for n, job_id in enumerate(ids[:232]):
        claim = q.claim_job(job_id, worker=f"ocr-0{1 + n % 3}:worker-1")
        if n == 117:
            q.fail(job_id, claim.id, "OCRError: page 117 is blank", retryable=False)
        else:
            q.complete(job_id, claim.id, {"chars": 1800 + n})
    for n, job_id in enumerate(ids[232:238]):
        q.claim_job(job_id, worker=f"ocr-0{1 + n % 3}:worker-2", lease=600)
    return run.id


def _downloads(q: conveyor.Queue) -> None:
    items = [{"task": "downloads.fetch", "payload": {"url": f"https://files.example.org/v/{n:05}.mp4"}}
             for n in range(1, 181)]  # fmt: skip
    q.enqueue_many(items, queue="downloads")
    _finish(q, "downloads", 150, "build-03:worker-2")
    q.claim("downloads", limit=4, worker="build-03:worker-2")


def _mail(q: conveyor.Queue) -> None:
    people = ["ada", "grace", "alan", "edsger", "barbara", "ken", "dennis", "margaret"]
    items = [{"task": "mail.send_receipt", "payload": {"to": f"{p}@example.org", "order": 9000 + i},
              "key": f"receipt-{9000 + i}", "max_attempts": 3}
             for i, p in enumerate(people * 6)]  # fmt: skip
    jobs = q.enqueue_many(items, queue="mail")
    _finish(q, "mail", 36, "web-01:worker-1")
    # Three attempts each, the last refused for good: failed, with their history.
    for job in jobs[36:41]:
        to = job.payload["to"]
        for attempt in range(3):
            claim = q.claim_job(job.id, worker=f"web-0{1 + attempt % 2}:worker-1")
            text = TRACEBACK.replace("{to}", to)
            q.fail(job.id, claim.id, text, retryable=attempt < 2, delay=0)


def _sync(q: conveyor.Queue) -> None:
    items = [{"task": "catalogue.sync_batch", "payload": {"books": list(range(n, n + 100))}}
             for n in range(0, 4000, 100)]  # fmt: skip
    q.enqueue_many(items, queue="sync")
    _finish(q, "sync", 30, "sync-runner-a")
    claim = q.claim("sync", limit=2, worker="sync-runner-b")
    job = claim.jobs[0]
    q.fail(job.id, claim.id, TIMEOUT, retryable=True, delay=120)
    # A claim whose worker stopped answering: its lease runs out.
    q.claim("sync", limit=1, lease=1, worker="sync-runner-c")
    time.sleep(1.2)


def _fetch(q: conveyor.Queue) -> None:
    stories = ["the-long-way-home", "stars-over-kyoto", "a-quiet-harbour", "glass-orchard",
               "the-cartographers-daughter", "ninth-winter", "salt-and-cedar"]  # fmt: skip
    for story in stories * 3:
        q.enqueue("fics.fetch_metadata", {"url": f"https://fics.example.net/s/{story}"},
                  queue="fetch", key=f"https://fics.example.net/s/{story}",
                  subscriber=f"chat:{abs(hash(story)) % 9000 + 1000}")  # fmt: skip
    _finish(q, "fetch", 4, "bot-01:worker-1")
    claim = q.claim("fetch", limit=1, worker="bot-01:worker-1")
    q.fail(claim.jobs[0].id, claim.id, "404: no story at that address", retryable=False)


def _subtitles(q: conveyor.Queue) -> None:
    items = [{"task": "videos.subtitle", "payload": {"video": f"lecture-{n:03}.mkv", "lang": "en"},
              "max_attempts": 5} for n in range(1, 25)]  # fmt: skip
    q.enqueue_many(items, queue="subtitles")
    _finish(q, "subtitles", 9, "gpu-01:worker-1")


def _later(q: conveyor.Queue) -> None:
    """Jobs scheduled for later: digests at the top of coming hours, and a retry of a
    rate-limited call waiting out its back-off."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    for n, team in enumerate(["support", "sales", "ops", "research", "design"]):
        q.enqueue("mail.weekly_digest", {"team": team}, queue="mail",
                  run_at=now + timedelta(hours=1 + n), key=f"digest-{team}")  # fmt: skip
    job = q.enqueue("fics.fetch_metadata", {"url": "https://fics.example.net/s/late-bloomer"},
                    queue="fetch", key="https://fics.example.net/s/late-bloomer")  # fmt: skip
    claim = q.claim_job(job.id, worker="bot-01:worker-1")
    q.fail(job.id, claim.id, "429: too many requests, retry after 600 s", delay=600)


def _books(q: conveyor.Queue) -> int:
    book = q.enqueue("books.ocr", {"book": "isbn-978-0-14-044913-6", "pages": 100},
                     queue="books", key="isbn-978-0-14-044913-6", group="isbn-978-0-14-044913-6",
                     subscriber="pipeline:extract")  # fmt: skip
    after = q.enqueue("books.extract_chapters", {"book": "isbn-978-0-14-044913-6"},
                      queue="books", after=[book.id])  # fmt: skip
    q.enqueue("books.index", {"book": "isbn-978-0-14-044913-6"}, queue="books", after=[after.id])
    claim = q.claim_job(book.id, worker="ocr-02:worker-3")
    q.fail(book.id, claim.id, "scanner jammed at page 41", retryable=True, delay=0)
    claim = q.claim_job(book.id, worker="ocr-02:worker-3", lease=600)
    detail = {"unit": "pages", "resumed_after": 40, "dpi": 300}
    q.progress(book.id, claim.id, total=100, completed=78, failed=1, current={"page": 79},
               checkpoint=78, detail=detail)  # fmt: skip
    return book.id


def _workers(q: conveyor.Queue) -> None:
    version = conveyor.__version__
    for name, host, pid, queues, concurrency, running in [
        ("web-01:worker-1", "web-01", 4121, ["mail", "fetch"], 8, 0),
        ("build-03:worker-2", "build-03", 771, ["downloads"], 2, 2),
        ("ocr-02:worker-3", "ocr-02", 20417, ["books"], 2, 1),
        ("sync-runner-b", "sync-01", 3310, ["sync"], 16, 1),
    ]:
        # What each worker's tasks run: the first of its running jobs (the rest were
        # claimed ahead and wait for a slot).
        held = [j for j in q.jobs(status="running", limit=100) if j.worker == name]
        busy = [(j.id, j.started_at or q.now()) for j in held[:running]]
        q.worker_seen(name, host=host, pid=pid, queues=queues, concurrency=concurrency,
                      version=version, running=len(busy), ttl=3600, busy=busy)  # fmt: skip


def _schedules(q: conveyor.Queue) -> None:
    now = q.now()
    hour, minute = timedelta(hours=1), timedelta(minutes=1)
    q.save_schedule("nightly-prune", task="maintenance.prune", queue="default", spec="0 3 * * *",
                    first_slot=now - 21 * hour, next_slot=now + 3 * hour)  # fmt: skip
    q.save_schedule("catalogue-refresh", task="catalogue.refresh", queue="sync", spec="every 15m",
                    first_slot=now - 11 * minute, next_slot=now + 4 * minute)  # fmt: skip


def _age(q: conveyor.Queue) -> None:
    """Spread the jobs' lives over the last half hour (the seed wrote them within
    seconds): each job's times move back by the same amount, 6 s per job enqueued after
    it, so their order holds. A running job keeps its claim; its failed attempts move
    half as far. SQLite keeps times as epoch seconds, errors as JSON."""
    back = "((SELECT max(id) FROM conveyor_jobs) - id) * 6.0"
    final = "status <> 'running'"
    moved = ", ".join(
        f"{column} = CASE WHEN {final} THEN {column} - {back} ELSE {column} END"
        for column in ("started_at", "finished_at", "updated_at", "claimed_at", "heartbeat_at")
    )
    errors = (
        "(SELECT json_group_array(json_set(value, '$.at', json_extract(value, '$.at') - "
        f"CASE WHEN {final} THEN {back} ELSE {back} / 2 END)) FROM json_each(errors))"
    )
    with q.driver.session() as session:
        cur = getattr(session, "_cur")  # noqa: B009 - a fixture, not a queue operation
        cur.execute(
            f"UPDATE conveyor_jobs SET created_at = created_at - {back},"
            f" run_at = CASE WHEN run_at <= created_at + 1 THEN run_at - {back} ELSE run_at END,"
            f" errors = CASE WHEN errors IS NULL THEN NULL ELSE {errors} END, {moved}"
        )


def _throughput(q: conveyor.Queue) -> None:
    """An hour of completions and failures per minute, written straight into the table the
    chart reads (the jobs above finished within the last seconds)."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    rows = []
    for back in range(1, 60):
        minute = now - timedelta(minutes=back)
        wave = 60 + 35 * math.sin(back / 7) + (back * 37 % 23)
        failed = 6 if back in (17, 18) else (1 if back % 9 == 0 else 0)
        rows.append((minute, "downloads", int(wave), failed))
        rows.append((minute, "mail", int(wave / 3), 0))
    insert = "INSERT INTO conveyor_throughput (minute, queue, completed, failed) VALUES "
    with q.driver.session() as session:
        cur = getattr(session, "_cur")  # noqa: B009 - a fixture, not a queue operation
        if q.dialect == "sqlite":
            values = [(int(m.timestamp()), queue, c, f) for m, queue, c, f in rows]
            cur.executemany(insert + "(?, ?, ?, ?)", values)
        else:
            cur.executemany(insert + "(%s, %s, %s, %s)", rows)
    _history(q)


def _history(q: conveyor.Queue) -> None:
    """A week before that, hour by hour: busy days, quiet nights, one bad afternoon.
    Written as per-minute rows at each hour's start and rolled up like a worker would."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    rows = []
    for back in range(2, 7 * 24):
        at = hour - timedelta(hours=back)
        day = 0.35 + 0.65 * max(0.0, math.sin((at.hour - 6) / 24 * 2 * math.pi))
        completed = int(2400 * day + (back * 53 % 170))
        failed = 180 if back in (50, 51) else back * 7 % 11
        rows.append((at, "downloads", completed, failed))
        rows.append((at, "mail", completed // 4, 0))
    insert = "INSERT INTO conveyor_throughput (minute, queue, completed, failed) VALUES "
    with q.driver.session() as session:
        cur = getattr(session, "_cur")  # noqa: B009 - a fixture, not a queue operation
        if q.dialect == "sqlite":
            values = [(int(m.timestamp()), queue, c, f) for m, queue, c, f in rows]
            cur.executemany(insert + "(?, ?, ?, ?)", values)
        else:
            cur.executemany(insert + "(%s, %s, %s, %s)", rows)
    q.roll_up_throughput()


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///console.db"
    with conveyor.connect(url) as queue:
        print(seed(queue))
