"""Metadata sync: books get their Hardcover id from CLI clients on several machines.

The application owns a ``books`` table. A book without a ``hardcoverId`` is a job in the
``hardcover`` queue, keyed by the book's id: it enters the queue in the transaction that
inserts the book, and leaves it (completed) in the transaction that gives the book its
id, whatever the job's state. Clients ask ``GET /api/missing/hardcover`` for up to 100
books; the answer's ``processingId`` is a conveyor claim id, and sending it back as
``previousProcessingId`` with the next request acknowledges that batch (the claim's jobs
complete in the transaction that claims the next batch). Admins reset claims older than
N minutes or one claim by id, and clean up queue entries of books that have their id."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import Body, FastAPI, Path, Query, Response
from pydantic import BaseModel, Field
from starlette.types import ASGIApp

import conveyor
from examples._common import declare_retention
from examples._db import AppDatabase, Tx
from examples._web import ApiError, BodyLimit, NoNul, install_errors

QUEUE = "hardcover"
TASK = "hardcover.sync"
BATCH = 100
# A claim nobody acknowledges is held until an admin resets it; after this long its
# lease runs out and the books go back to the queue on their own (a safety net).
DEFAULT_CLAIM_LEASE = timedelta(days=1)
# The queue's finished jobs are pruned after these; the book ids stay taken (retired
# keys): "never hand out the same book twice" outlives the jobs.
RETENTION = {
    "completed": timedelta(days=30),
    "failed": timedelta(days=30),
    "cancelled": timedelta(days=30),
}
MAX_TITLE = 500
MAX_ID = 200
MAX_BODY = 64 * 1024  # a book's JSON is well under 1 KB

TABLES = """
CREATE TABLE IF NOT EXISTS books (
    id           TEXT PRIMARY KEY,
    title        TEXT NOT NULL,
    hardcover_id TEXT,
    created_at   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS books_missing ON books (created_at, id) WHERE hardcover_id IS NULL
"""
# MySQL indexes text of a bounded length only, and has no partial index.
MYSQL_TABLES = f"""
CREATE TABLE IF NOT EXISTS books (
    id           VARCHAR({MAX_ID}) PRIMARY KEY,
    title        TEXT NOT NULL,
    hardcover_id TEXT,
    created_at   VARCHAR(40) NOT NULL,
    INDEX books_missing (created_at, id)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
"""


def processing_id(claim_id: str) -> str:
    """A claim id as the API shows it: a canonical UUID (8-4-4-4-12)."""
    return str(uuid.UUID(claim_id))


def claim_id(processing_id: str | None) -> str | None:
    """The claim behind a ``processingId`` (canonical or bare hex); ``None`` for text
    that is no UUID: it names no claim, so it acknowledges or releases nothing."""
    if not processing_id:
        return None
    try:
        return uuid.UUID(processing_id).hex
    except ValueError:
        return None


def book_out(row: dict[str, Any]) -> dict[str, Any]:
    """A book in the API's format."""
    return {
        "id": row["id"],
        "title": row["title"],
        "hardcoverId": row["hardcover_id"],
        "createdAt": row["created_at"],
    }


class Library:
    """The books and their queue, in one database."""

    def __init__(self, url: str, *, claim_lease: timedelta = DEFAULT_CLAIM_LEASE) -> None:
        self.q = conveyor.connect(url)  # first: it creates the schema on PostgreSQL
        # A book acknowledged without a match keeps its completed job's key for good, so
        # no restart hands it out again once the job itself is pruned.
        declare_retention(self.q, QUEUE, RETENTION, retire_keys=True)
        self.db = AppDatabase(url)
        self.db.create(sqlite=TABLES, postgresql=TABLES, mysql=MYSQL_TABLES)
        self.claim_lease = claim_lease

    def close(self) -> None:
        self.db.close()
        self.q.close()

    # -- books --------------------------------------------------------------------------
    def add_book(self, title: str) -> dict[str, Any]:
        """Insert a book and queue it, atomically: both or neither."""
        book_id = str(uuid.uuid4())
        now = datetime.now(UTC).isoformat()

        def insert(tx: Tx) -> None:
            tx.execute(
                "INSERT INTO books (id, title, created_at) VALUES (:id, :title, :now)",
                {"id": book_id, "title": title, "now": now},
            )
            self._enqueue(tx, book_id)

        self.db.retried(insert)
        return {"id": book_id, "title": title, "hardcoverId": None, "createdAt": now}

    def get_book(self, book_id: str) -> dict[str, Any] | None:
        with self.db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM books WHERE id = :id", {"id": book_id})
        return None if row is None else book_out(row)

    def set_hardcover_id(self, book_id: str, hardcover_id: str | None) -> dict[str, Any] | None:
        """Store the book's id; with one, it leaves the queue whatever its state (in the
        same transaction); cleared, it joins the queue again. A transaction the database
        rolled back to break a deadlock (MySQL, beside the clients' claims) runs again."""

        def store(tx: Tx) -> dict[str, Any] | None:
            update = "UPDATE books SET hardcover_id = :hc WHERE id = :id"
            params = {"id": book_id, "hc": hardcover_id}
            if tx.dialect == "mysql":  # no UPDATE … RETURNING: the row read after
                changed = tx.execute(update, params)
                row = tx.one("SELECT * FROM books WHERE id = :id", params) if changed else None
            else:
                row = tx.one(update + " RETURNING *", params)
            if row is None:
                return None
            if hardcover_id is None:
                self._enqueue(tx, book_id)
            else:
                self.q.complete_by_key(
                    book_id, queue=QUEUE, include_failed=True,
                    result={"hardcoverId": hardcover_id}, conn=tx.conn,
                )  # fmt: skip
            return row

        row = self.db.retried(store)
        return None if row is None else book_out(row)

    def _enqueue(self, tx: Tx, book_id: str) -> None:
        self.q.enqueue(TASK, {"bookId": book_id}, queue=QUEUE, key=book_id, conn=tx.conn)

    def fill_queue(self, *, chunk: int = 500) -> int:
        """Start-up: every book without a ``hardcoverId`` that has never been through the
        queue gets a job. A book already queued keeps its job (the key dedupes), and one
        whose job completed — a client acknowledged it without finding a match — is not
        queued again (``on_completed="return"``): only clearing its id does that. Returns
        how many books were new to the queue."""
        lock = " FOR UPDATE" if self.db.dialect in ("postgresql", "mysql") else ""
        after = ("", "")
        added = 0

        def queue_chunk(tx: Tx) -> tuple[list[dict[str, Any]], list[conveyor.Job]]:
            # Locked until the jobs commit, so a book given its id meanwhile waits and
            # then completes the job it finds.
            rows = tx.all(
                "SELECT id, created_at FROM books WHERE hardcover_id IS NULL"
                " AND (created_at > :at OR (created_at = :at AND id > :id))"
                f" ORDER BY created_at, id LIMIT :n{lock}",
                {"at": after[0], "id": after[1], "n": chunk},
            )
            # One at a time: ``enqueue_many`` takes no dedupe policy per item.
            jobs = [
                self.q.enqueue(
                    TASK,
                    {"bookId": r["id"]},
                    queue=QUEUE,
                    key=r["id"],
                    on_completed="return",
                    conn=tx.conn,
                )
                for r in rows
            ]
            return rows, jobs

        while True:
            rows, jobs = self.db.retried(queue_chunk)
            if not rows:
                return added
            added += sum(not j.deduplicated for j in jobs)
            after = (rows[-1]["created_at"], rows[-1]["id"])

    # -- the sync clients' batches ------------------------------------------------------
    def missing(self, previous: str | None) -> dict[str, Any]:
        """Acknowledge the previous batch (if any) and claim the next 100 books."""
        claim = self.q.claim(QUEUE, limit=BATCH, lease=self.claim_lease, ack=claim_id(previous))
        ids = [job.key for job in claim.jobs if job.key is not None]
        books: list[dict[str, Any]] = []
        if ids:
            names = {f"b{n}": book_id for n, book_id in enumerate(ids)}
            with self.db.transaction(write=False) as tx:
                rows = tx.all(
                    f"SELECT * FROM books WHERE id IN ({', '.join(':' + n for n in names)})",
                    names,
                )
            by_id = {r["id"]: r for r in rows}
            books = [book_out(by_id[i]) for i in ids if i in by_id]
        return {
            "books": books,
            "processingId": processing_id(claim.id),
            "remainingUnclaimed": claim.remaining,
        }

    # -- admin ----------------------------------------------------------------------------
    def reset(self, older_than: timedelta) -> int:
        return self.q.reset_claims(older_than, queue=QUEUE)

    def release(self, processing_id: str) -> int:
        claim = claim_id(processing_id)
        return 0 if claim is None else self.q.release(claim, queue=QUEUE)

    def cleanup(self) -> int:
        """Complete the queued jobs of books that have their id (set by other means than
        this API, which completes them itself)."""
        removed = 0
        for status in ("pending", "running"):
            after: int | None = None
            while page := self.q.jobs(queue=QUEUE, status=status, limit=500, after=after):
                after = page[-1].id
                keys = {f"b{n}": j.key for n, j in enumerate(page) if j.key is not None}
                if not keys:
                    continue
                with self.db.transaction(write=False) as tx:
                    done = tx.all(
                        "SELECT id, hardcover_id FROM books WHERE hardcover_id IS NOT NULL"
                        f" AND id IN ({', '.join(':' + n for n in keys)})",
                        keys,
                    )
                for row in done:
                    removed += self.q.complete_by_key(
                        row["id"], queue=QUEUE, include_failed=True,
                        result={"hardcoverId": row["hardcover_id"]},
                    )  # fmt: skip
        return removed


# -- the HTTP API -------------------------------------------------------------------------
class NewBook(BaseModel):
    title: Annotated[str, Field(min_length=1, max_length=MAX_TITLE), NoNul]


class BookPatch(BaseModel):
    hardcoverId: Annotated[str | None, Field(min_length=1, max_length=MAX_ID), NoNul]


BookId = Annotated[str, Path(min_length=1, max_length=MAX_ID), NoNul]
ProcessingId = Annotated[str, Path(max_length=MAX_ID), NoNul]


def create_api(library: Library) -> ASGIApp:
    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        library.fill_queue()
        yield

    api = FastAPI(title="metadata sync", lifespan=lifespan)
    install_errors(api)

    @api.post("/api/books", status_code=201)
    def add_book(body: NewBook) -> dict[str, Any]:
        title = body.title.strip()
        if not title:
            raise ApiError(422, "title: expected some text")
        return library.add_book(title)

    @api.get("/api/books/{book_id}")
    def get_book(book_id: BookId) -> dict[str, Any]:
        book = library.get_book(book_id)
        if book is None:
            raise ApiError(404, f"no book {book_id!r}")
        return book

    @api.patch("/api/books/{book_id}")
    def patch_book(book_id: BookId, body: Annotated[BookPatch, Body()]) -> dict[str, Any]:
        book = library.set_hardcover_id(book_id, body.hardcoverId)
        if book is None:
            raise ApiError(404, f"no book {book_id!r}")
        return book

    @api.get("/api/missing/hardcover")
    def missing(
        previousProcessingId: Annotated[str | None, Query(max_length=MAX_ID), NoNul] = None,
    ) -> dict[str, Any]:
        return library.missing(previousProcessingId or None)

    @api.post("/api/admin/hardcover-queue/reset")
    def reset(
        olderThan: Annotated[float, Query(ge=0, le=10 * 365 * 24 * 60)],
    ) -> dict[str, int]:
        return {"resetCount": library.reset(timedelta(minutes=olderThan))}

    @api.delete("/api/admin/hardcover-queue/claims/{processing_id}")
    def release(processing_id: ProcessingId) -> dict[str, int]:
        return {"resetCount": library.release(processing_id)}

    @api.post("/api/admin/hardcover-queue/cleanup")
    def cleanup() -> dict[str, int]:
        return {"removedCount": library.cleanup()}

    @api.get("/healthz", include_in_schema=False)
    def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    return BodyLimit(api, MAX_BODY)
