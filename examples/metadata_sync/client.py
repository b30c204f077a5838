"""The sync client that runs on other machines: ask for up to 100 books without a
Hardcover id, look each one up, store the ids, and acknowledge the batch with the next
request (``previousProcessingId``), until no book is left.

It survives a restart without reprocessing: the batch it holds and the books it has done
are saved (atomically) to a state file after every book; started again with the same
file, it finishes that batch first, then acknowledges it."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx


def catalogue_lookup(title: str, *, delay: float = 0.0) -> str | None:
    """The stand-in for Hardcover's search API: a title containing "unknown" has no
    match; any other gets an id derived from the title. ``delay``: its latency."""
    if delay:
        time.sleep(delay)
    if "unknown" in title.lower():
        return None
    return "hc-" + hashlib.sha256(title.encode()).hexdigest()[:12]


class State:
    """What the client must remember across a crash: its batch and the books done."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.processing_id: str | None = None
        self.books: list[dict[str, Any]] = []
        self.done: set[str] = set()
        if path is not None and path.exists():
            saved = json.loads(path.read_text())
            self.processing_id = saved.get("processingId")
            self.books = saved.get("books", [])
            self.done = set(saved.get("done", []))

    def hold(self, processing_id: str, books: list[dict[str, Any]]) -> None:
        self.processing_id, self.books, self.done = processing_id, books, set()
        self.save()

    def finished(self, book_id: str) -> None:
        self.done.add(book_id)
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        data = {"processingId": self.processing_id, "books": self.books, "done": sorted(self.done)}
        # Write aside, then rename: a crash leaves the old state or the new, never half.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


# A 503 says the database was unavailable, or rolled the request's transaction back every
# time it ran. The same request is sent again after the pause it asks for, a few times,
# before the client gives up: a PATCH stores the same id again, and a batch claimed by a
# request whose answer was lost returns to the queue when its lease runs out.
UNAVAILABLE_TRIES = 5
LONGEST_PAUSE = 10.0


def send(http: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """``http.request``, sent again on a 503 (``UNAVAILABLE_TRIES`` in all)."""
    for _ in range(UNAVAILABLE_TRIES - 1):
        answer = http.request(method, path, **kwargs)
        if answer.status_code != 503:
            return answer
        time.sleep(_pause(answer.headers.get("Retry-After")))
    return http.request(method, path, **kwargs)


def _pause(retry_after: str | None) -> float:
    try:
        seconds = float(retry_after) if retry_after is not None else 1.0
    except ValueError:  # an HTTP date, or nonsense: the default
        seconds = 1.0
    return min(max(seconds, 0.0), LONGEST_PAUSE)


def run_client(
    url: str,
    *,
    token: str | None = None,
    state_file: Path | None = None,
    delay: float = 0.0,
    on_book: Callable[[dict[str, Any]], None] | None = None,
    stop_after_batches: int | None = None,
) -> dict[str, int]:
    """Sync until no book is left; returns counts. ``on_book`` is called with each book
    looked up. ``stop_after_batches``: walk away holding the next batch unacknowledged
    (what a crashed client leaves behind)."""
    state = State(state_file)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    counts = {"batches": 0, "books": 0, "found": 0, "resumed": 0}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=60) as http:

        def work(books: list[dict[str, Any]], *, resumed: bool = False) -> None:
            for book in books:
                if book["id"] in state.done:
                    continue
                if resumed and _has_id(http, book["id"]):
                    state.finished(book["id"])  # stored just before the crash
                    continue
                hardcover_id = catalogue_lookup(book["title"], delay=delay)
                if hardcover_id is not None:
                    answer = send(
                        http, "PATCH", f"/api/books/{book['id']}",
                        json={"hardcoverId": hardcover_id},
                    )  # fmt: skip
                    answer.raise_for_status()
                    counts["found"] += 1
                counts["books"] += 1
                state.finished(book["id"])
                if on_book is not None:
                    on_book({"book": book["id"], "hardcoverId": hardcover_id})

        if state.processing_id and state.books:  # a batch left by a run that died
            counts["resumed"] = len(state.books) - len(state.done)
            work(state.books, resumed=True)
        while True:
            params = {"previousProcessingId": state.processing_id} if state.processing_id else {}
            answer = send(http, "GET", "/api/missing/hardcover", params=params)
            answer.raise_for_status()
            batch = answer.json()
            books = [{"id": b["id"], "title": b["title"]} for b in batch["books"]]
            state.hold(batch["processingId"], books)
            if not books:
                return counts
            counts["batches"] += 1
            if stop_after_batches is not None and counts["batches"] > stop_after_batches:
                return counts
            work(books)


def _has_id(http: httpx.Client, book_id: str) -> bool:
    answer = send(http, "GET", f"/api/books/{book_id}")
    if answer.status_code == 404:
        return True  # gone: nothing to do
    answer.raise_for_status()
    return answer.json()["hardcoverId"] is not None
