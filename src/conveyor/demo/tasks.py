"""The demo's tasks: small stand-ins for the five systems conveyor was built for (the
applications under ``examples/``). They sleep instead of working, and fail on purpose,
as the payload says, so a run is reproducible.

``$CONVEYOR_DEMO_PACE`` scales every pause and retry delay: 1 is watchable, 0 runs as
fast as the workers go (the tests use it). Worker processes read it when they import
this module, so ``conveyor demo`` sets it for them."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

import conveyor
from conveyor.retry import Backoff

PACE_ENV = "CONVEYOR_DEMO_PACE"
_pace: list[float] = []


def pace() -> float:
    """The current pace: set by ``set_pace``, else ``$CONVEYOR_DEMO_PACE``, else 1."""
    if _pace:
        return _pace[-1]
    try:
        return max(0.0, float(os.environ.get(PACE_ENV, "1")))
    except ValueError:
        return 1.0


def set_pace(value: float) -> None:
    _pace[:] = [max(0.0, value)]


def _pause(seconds: float) -> None:
    if pace():
        time.sleep(seconds * pace())


class _PacedBackoff(Backoff):
    """A short backoff (1, 2, 4, 8 s at pace 1), so a retried job comes back while the
    demo is still on screen."""

    __slots__ = ()

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        return super().delay(attempt, rand) * pace()


_BACKOFF = _PacedBackoff(base=1.0, factor=2.0, cap=8.0, jitter=0.2)

app = conveyor.App()


@app.task(name="demo.metadata.sync", queue="demo.metadata", max_attempts=4, backoff=_BACKOFF)
def sync_metadata(ctx: conveyor.Context, books: list[int], timeouts: int = 0) -> dict[str, Any]:
    """Metadata sync: push a batch of books to an external catalogue. The catalogue
    times out on the first ``timeouts`` attempts (retryable)."""
    _pause(0.4)
    if ctx.attempt <= timeouts:
        raise TimeoutError("catalogue API timed out")
    return {
        "synced": len(books),
        "external_ids": {str(b): f"ext-{b * 7919 % 100000}" for b in books},
    }


@app.task(name="demo.fetch.story", queue="demo.fetch", max_attempts=3, backoff=_BACKOFF)
def fetch_story(ctx: conveyor.Context, url: str, missing: bool = False) -> dict[str, Any]:
    """Chat-bot fetch queue: one job per URL (the URL is the key, so a second request
    for it joins the first as a subscriber). A missing page is a terminal error."""
    _pause(0.6)
    if missing:
        raise conveyor.Terminal(f"404: no story at {url}")
    words = 1000 + sum(map(ord, url)) % 90000
    return {"url": url, "title": url.rsplit("/", 1)[-1].replace("-", " ").title(), "words": words}


@app.task(name="demo.subtitles.generate", queue="demo.subtitles", max_attempts=3, backoff=_BACKOFF)
def generate_subtitles(ctx: conveyor.Context, video: str, busy: int = 0) -> dict[str, Any]:
    """Video subtitles: the speech model is busy on the first ``busy`` attempts; after
    three attempts the job fails for good."""
    _pause(0.8)
    if ctx.attempt <= busy:
        raise RuntimeError(f"speech model busy (attempt {ctx.attempt})")
    return {"video": video, "subtitle": f"{video}.srt", "lines": 300 + len(video) * 11}


@app.task(name="demo.books.ocr", queue="demo.books", max_attempts=3, backoff=_BACKOFF)
def read_book(
    ctx: conveyor.Context, book: str, pages: int, unreadable: list[int] | None = None,
    jam_at: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Book pipeline: OCR page by page, reporting progress as absolute values and the
    last page done as the checkpoint. The scanner jams once at ``jam_at``; the retry
    resumes after the checkpoint instead of starting over."""
    bad = set(unreadable or [])
    last_done = ctx.checkpoint if isinstance(ctx.checkpoint, int) else 0
    done = ctx.job.progress.completed or 0
    failed = ctx.job.progress.failed or 0
    for page in range(last_done + 1, pages + 1):
        if page == jam_at and ctx.attempt == 1:
            raise conveyor.Retry(f"scanner jammed at page {page}", delay=1.0 * pace())
        _pause(0.15)
        if page in bad:
            failed += 1
        else:
            done += 1
        ctx.progress(total=pages, completed=done, failed=failed, current={"page": page},
                     checkpoint=page, detail={"resumed": ctx.attempt > 1})  # fmt: skip
    return {"book": book, "pages": pages, "read": done, "unreadable": failed}


@app.task(name="demo.downloads.fetch", queue="demo.downloads", max_attempts=3, backoff=_BACKOFF)
def download(ctx: conveyor.Context, url: str) -> dict[str, str]:
    """Download bot: first in, first out; the result is where the file went."""
    _pause(0.3)
    return {"path": f"/srv/downloads/{url.rsplit('/', 1)[-1]}"}


QUEUES = ["demo.metadata", "demo.fetch", "demo.subtitles", "demo.books", "demo.downloads"]
