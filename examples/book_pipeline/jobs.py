"""The pipeline's background jobs and what their status looks like to the admin UI.

A ``BookJob`` of the spec is a conveyor job in the ``books`` queue, keyed by the book id
and enqueued with ``on_active="raise"``: one pending or running job per book, enforced
by the database (409 otherwise). Its task is its ``job_type`` (``ocr_batch``,
``extraction``, ``finalization``). Progress is written after every page as absolute
values, with the last completed page as the checkpoint, so a replay changes nothing and
a resumed run starts after it. Extraction jobs share the group ``extraction``, capped
at one running at a time across every worker.

A job has one attempt: if its worker stops heartbeating (the process died), the job's
lease runs out and the next poll finds it failed, with instructions to resume. Errors of
single pages are the pages' own: retryable ones (rate limits) are retried in the task
after 2, 4, 8, 16 s, terminal ones (a corrupt image) are not; either way the job goes on
and the page is listed in ``progress_detail``.

The OCR engine and the LLM are stand-ins whose behaviour the page decides: an image whose
bytes start with ``fail`` is corrupt (terminal), ``flaky`` is rate-limited once, ``busy``
is rate-limited every time, ``slow`` takes a while, and a page whose text starts with
``crash`` makes the extraction's connection drop once (a failure of the whole job)."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import conveyor
from examples._common import user_message
from examples.book_pipeline.store import Store

log = logging.getLogger("examples.book_pipeline")

QUEUE = "books"
JOB_TYPES = ("ocr_batch", "extraction", "finalization")
TASKS = {kind: f"book_pipeline.{kind}" for kind in JOB_TYPES}
EXTRACTION_GROUP = "extraction"


@dataclass(frozen=True)
class Settings:
    stale_after: float = 120.0  # no heartbeat for this long: the job is failed on poll
    heartbeat: float = 30.0  # how often a running job proves it is alive
    retry_base: float = 2.0  # a page's retries wait 2, 4, 8, 16 s
    page_attempts: int = 5
    slow_seconds: float = 1.0
    poll_ms: int = 3000  # how often the admin page polls


class RateLimited(Exception):
    """Retryable: the service asked us to slow down."""


class Corrupt(Exception):
    """Terminal: the input cannot be read; fix it, then retry."""


class StandIns:
    """The OCR engine and the LLM. ``flaky`` and ``crash`` fail once per page (remembered
    in this process, as a service's transient trouble would be)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._failed_once: set[tuple[str, str, int]] = set()
        self._lock = threading.Lock()

    def _first_time(self, kind: str, book_id: str, page: int) -> bool:
        with self._lock:
            first = (kind, book_id, page) not in self._failed_once
            self._failed_once.add((kind, book_id, page))
        return first

    def ocr(self, book_id: str, page: int, image: bytes) -> str:
        if image.startswith(b"fail"):
            raise Corrupt("corrupt image: cannot decode")
        if image.startswith(b"busy"):
            raise RateLimited("429 rate limit exceeded")
        if image.startswith(b"flaky") and self._first_time("ocr", book_id, page):
            raise RateLimited("429 rate limit exceeded")
        if image.startswith(b"slow"):
            time.sleep(self.settings.slow_seconds)
        words = image[:200].decode("utf-8", "replace")
        return f"{words}\n(page {page})"

    def extract(self, book_id: str, page: int, text: str) -> str:
        if text.startswith("crash") and self._first_time("llm", book_id, page):
            raise ConnectionError(f"the LLM connection dropped at page {page}")
        digest = int(hashlib.sha256(text.encode()).hexdigest(), 16)
        return f"topic-{digest % 4}"


def heartbeat_every(settings: Settings) -> float:
    """The heartbeat interval: the design's 30 s, or a third of a shorter lease."""
    return min(settings.heartbeat, settings.stale_after / 3)


def worker_options(settings: Settings) -> dict[str, Any]:
    """How the pipeline's workers hold their jobs: a lease of ``stale_after`` renewed by
    a heartbeat every ``heartbeat`` seconds."""
    return {"lease": settings.stale_after, "heartbeat_interval": heartbeat_every(settings)}


@contextmanager
def pulse(ctx: conveyor.Context, store: Store, every: float) -> Iterator[None]:
    """While a task runs, heartbeat at the design's interval and record each heartbeat in
    the application's table: conveyor clears a job's ``heartbeat_at`` when it recovers
    an expired lease, and the stale message must say when the job last beat. A
    heartbeat the claim no longer allows (the job was failed meanwhile) is refused and
    recorded nowhere, so a worker that wakes up late changes nothing."""
    stop = threading.Event()

    def beat() -> bool:
        try:
            job = ctx.heartbeat()
        except conveyor.StaleClaim:
            return False  # the job is no longer ours: the task learns it at its next write
        except conveyor.ConveyorError as exc:  # the database is away: the next beat
            log.warning("the heartbeat of job %s failed: %s", ctx.job.id, exc)
            return True
        if job.heartbeat_at is not None:
            try:
                store.beat(job.id, job.heartbeat_at.isoformat(timespec="microseconds"))
            except Exception as exc:  # the application's table: recorded at the next beat
                log.warning("recording the heartbeat of job %s failed: %s", ctx.job.id, exc)
        return True

    def loop() -> None:
        while not stop.wait(every) and beat():
            pass

    beat()
    thread = threading.Thread(target=loop, name=f"pulse-{ctx.job.id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def pause(seconds: float) -> None:
    """Wait before a retry (its own name, so a test can record the schedule)."""
    time.sleep(seconds)


def with_retries(
    call: Callable[[], str], settings: Settings, stop: Callable[[], bool]
) -> tuple[str | None, dict[str, Any] | None]:
    """Run ``call``; retry rate limits after 2, 4, 8, 16 s (``settings.retry_base``).
    Returns ``(result, None)`` or ``(None, page_error)``."""
    backoff = conveyor.Backoff(base=settings.retry_base, jitter=0)
    for attempt in range(1, settings.page_attempts + 1):
        try:
            return call(), None
        except RateLimited as exc:
            if attempt == settings.page_attempts or stop():
                return None, {"error": str(exc), "error_type": "retryable", "attempts": attempt}
            pause(backoff.delay(attempt))
        except Corrupt as exc:
            return None, {"error": str(exc), "error_type": "terminal", "attempts": attempt}
    raise AssertionError("unreachable")


def register(app: conveyor.App, store: Store, stand_ins: StandIns, settings: Settings) -> None:
    """The three tasks, on ``app``."""
    options: dict[str, Any] = {"queue": QUEUE, "max_attempts": 1}

    every = heartbeat_every(settings)

    @app.task(name=TASKS["ocr_batch"], **options)
    def ocr_batch(
        ctx: conveyor.Context,
        book_id: str,
        pages: list[int],
        total_items: int,
        resumed_after: int | None = None,
    ) -> dict[str, int]:
        detail = dict(ctx.job.progress.detail or {"page_errors": {}})
        errors: dict[str, Any] = detail["page_errors"]
        done = ctx.checkpoint
        todo = pages[pages.index(done) + 1 :] if done in pages else pages
        completed = (ctx.job.progress.completed or 0) if done is not None else 0
        failed = len(errors)
        with pulse(ctx, store, every):
            for page in todo:
                ctx.progress(total=total_items, completed=completed, failed=failed, current=page)
                store.set_ocr(book_id, page, "processing")
                try:
                    row = store.page(book_id, page)
                    image = row["image"] if row else b""
                    text, problem = with_retries(
                        partial(stand_ins.ocr, book_id, page, image),
                        settings,
                        lambda: ctx.cancelled,
                    )
                except BaseException:
                    store.set_ocr(book_id, page, "pending")  # not read: resuming reads it
                    raise
                if problem is None:
                    store.set_ocr(book_id, page, "completed", text=text)
                    completed += 1
                else:
                    store.set_ocr(book_id, page, "failed", error=problem["error"],
                                  error_type=problem["error_type"])  # fmt: skip
                    errors[str(page)] = problem
                    failed += 1
                # Absolute values: a replay of this write changes nothing.
                ctx.progress(completed=completed, failed=failed, current=page, checkpoint=page,
                             detail={"page_errors": errors})  # fmt: skip
        return {"completed": completed, "failed": failed}

    @app.task(name=TASKS["extraction"], **options)
    def extraction(
        ctx: conveyor.Context, book_id: str, start_page: int, end_page: int, total_items: int
    ) -> dict[str, Any]:
        detail = dict(ctx.job.progress.detail or {})
        detail.setdefault("page_errors", {})
        detail.setdefault("stats", {"subtopics_created": 0, "subtopics_merged": 0})
        # A run after this job's first (the worker stopped): go on after its checkpoint.
        first = start_page if ctx.checkpoint is None else int(ctx.checkpoint) + 1
        completed = ctx.job.progress.completed or 0
        with pulse(ctx, store, every):
            return run_extraction(ctx, book_id, first, end_page, total_items, detail, completed)

    def run_extraction(
        ctx: conveyor.Context,
        book_id: str,
        first: int,
        end_page: int,
        total_items: int,
        detail: dict[str, Any],
        completed: int,
    ) -> dict[str, Any]:
        errors: dict[str, Any] = detail["page_errors"]
        stats: dict[str, int] = detail["stats"]
        for page in range(first, end_page + 1):
            ctx.progress(total=total_items, completed=completed, failed=len(errors),
                         current=page, detail=detail)  # fmt: skip
            row = store.page(book_id, page)
            text = row["text"] if row else None
            if not text:
                errors[str(page)] = {"error": f"no OCR text for page {page}",
                                     "error_type": "terminal", "attempts": 1}  # fmt: skip
                ctx.progress(failed=len(errors), current=page, detail=detail)
                continue
            topic = stand_ins.extract(book_id, page, text)  # a dropped connection ends the job
            new = store.write_guideline(book_id, page, topic)
            stats["subtopics_created" if new else "subtopics_merged"] += 1
            completed += 1
            errors.pop(str(page), None)
            ctx.progress(completed=completed, failed=len(errors), current=page, checkpoint=page,
                         detail=detail)  # fmt: skip
        return {"completed": completed, "failed": len(errors)}

    @app.task(name=TASKS["finalization"], **options)
    def finalization(ctx: conveyor.Context, book_id: str, total_items: int) -> dict[str, int]:
        topics = store.topics(book_id)
        done = int(ctx.checkpoint or 0)
        with pulse(ctx, store, every):
            for index, topic in enumerate(topics[done:], start=done + 1):
                ctx.progress(total=len(topics), completed=index - 1, current=index)
                store.name_subtopic(book_id, topic, topic.replace("-", " ").title())
                ctx.progress(completed=index, current=index, checkpoint=index)
        return {"subtopics": len(topics)}


# -- what the admin UI polls ----------------------------------------------------------
def job_type(job: conveyor.Job) -> str:
    return job.task.removeprefix("book_pipeline.")


def last_completed(job: conveyor.Job) -> int | None:
    """The last page the job finished; for a resumed job that has done none yet, the
    page before the first it will do."""
    payload, last = job.payload, job.progress.checkpoint
    if last is None and job_type(job) == "extraction" and payload["start_page"] > 1:
        last = payload["start_page"] - 1  # a resumed job starts after the pages done before
    if last is None and job_type(job) == "ocr_batch":
        last = payload.get("resumed_after")
    return last if isinstance(last, int) else None


def pages_left(job: conveyor.Job) -> list[int]:
    """The pages an OCR job had not finished (what resuming it OCRs)."""
    pages: list[int] = job.payload["pages"]
    done = job.progress.checkpoint
    return pages[pages.index(done) + 1 :] if done in pages else pages


def job_status(job: conveyor.Job, last_heartbeat: str | None = None) -> dict[str, Any]:
    """A job as the spec's ``JobStatusResponse``: ``status`` is one of pending, running,
    completed, failed (never stale); ``error_message`` is set if and only if it failed.
    ``last_heartbeat``: the heartbeat the application recorded, for a job whose own was
    cleared when its expired lease was recovered."""
    progress, payload = job.progress, job.payload
    failed = job.status in (conveyor.Status.FAILED, conveyor.Status.CANCELLED)
    last = last_completed(job)
    heartbeat = job.heartbeat_at.isoformat() if job.heartbeat_at else last_heartbeat
    error = None
    if failed:
        error = user_message(job.error) or f"the job was {job.status}"
        if job.error and job.error.startswith("lease expired"):
            if job_type(job) == "ocr_batch":
                left = pages_left(job)
                resume = f"page {left[0]}" if left and last is not None else "the start"
            else:
                resume = f"page {last + 1}" if last is not None else "the start"
            error = (
                f"Job interrupted (no heartbeat since {heartbeat or 'it started'}). The server "
                f"may have restarted. Resume from {resume}."
            )
    current = progress.current
    return {
        "job_id": str(job.id),
        "book_id": payload["book_id"],
        "job_type": job_type(job),
        "status": "failed" if failed else str(job.status),
        "total_items": payload.get("total_items"),
        "completed_items": progress.completed or 0,
        "failed_items": progress.failed or 0,
        "current_item": current if isinstance(current, int) else None,
        "last_completed_item": last,
        "progress_detail": None if progress.detail is None else json.dumps(progress.detail),
        "heartbeat_at": heartbeat,
        "started_at": job.created_at.isoformat(),
        "completed_at": job.finished_at.isoformat() if job.finished_at and job.is_final else None,
        "error_message": error,
    }
