"""A book processing pipeline: OCR and extraction over hundreds of pages.

At most one active job per book (a second start is refused, as an HTTP API would answer
409), progress written as absolute values after every page, a checkpoint (the last
completed page) so a re-run resumes instead of starting over, heartbeats so a dead
worker is noticed, per-page errors kept in the progress detail, retryable versus
terminal errors, and exponential backoff 2-4-8-16 s.

The OCR engine is a stand-in: a few milliseconds a page, a page it cannot read now and
then, one rate limit on the second attempt of the first run, and a corrupt file."""

from __future__ import annotations

import time
from typing import Any

import conveyor

QUEUE = "books"
app = conveyor.App()
UNREADABLE_EVERY = 37  # every 37th page fails OCR (kept in detail, the job goes on)
PAGE_SECONDS = 0.01


class BookBusy(Exception):
    """A job for this book is already pending or running (HTTP 409 in a web app)."""


@app.task(
    name="books.process",
    queue=QUEUE,
    max_attempts=5,
    backoff=conveyor.Backoff(base=2, factor=2, jitter=0),  # 2, 4, 8, 16 s
)
def process_book(ctx: conveyor.Context, book: str, pages: int) -> dict[str, Any]:
    if book.endswith(".corrupt"):
        raise conveyor.Terminal(f"{book}: not a PDF")
    resume_after = ctx.checkpoint or 0  # the last page completed by any earlier run
    detail = dict(ctx.job.progress.detail or {"errors": {}, "runs": []})
    detail["runs"] = [*detail["runs"], {"attempt": ctx.attempt, "resumed_after": resume_after}]
    failed = len(detail["errors"])
    for page in range(resume_after + 1, pages + 1):
        if ctx.cancelled:  # the lease was lost or the job cancelled: stop writing
            break
        if ctx.attempt == 2 and page == resume_after + 5:
            raise conveyor.Retry("OCR service rate-limited us")  # backoff, then resume
        time.sleep(PAGE_SECONDS)
        if page % UNREADABLE_EVERY == 0:
            detail["errors"][str(page)] = {"kind": "retryable", "error": "page unreadable"}
            failed += 1
        # Absolute values: if this write is replayed, nothing changes.
        ctx.progress(
            total=pages,
            completed=page - failed,
            failed=failed,
            current=f"page {page}",
            checkpoint=page,
            detail=detail,
        )
    return {"book": book, "pages": pages, "unreadable": sorted(map(int, detail["errors"]))}


def start(book: str, pages: int) -> conveyor.Job:
    """Start processing a book, unless a job for it is already active."""
    try:
        return process_book.using(key=book, on_active="raise").enqueue(book=book, pages=pages)
    except conveyor.DuplicateJob as exc:
        raise BookBusy(str(exc)) from None


def poll(q: conveyor.Queue, book: str) -> conveyor.Job | None:
    """What the UI polls every few seconds. Stale detection happens on the server: a job
    whose worker stopped heartbeating has an expired lease, and recover() puts it back
    to pending (or fails it when its attempts are spent)."""
    q.recover()
    return q.latest(book, queue=QUEUE)
