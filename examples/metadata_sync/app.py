"""Metadata sync: books get their external catalogue id from CLI clients on several
machines.

The application owns a ``books`` table. A book enters the queue in the same transaction
that inserts it, and leaves it when it gets its external id. Clients talk HTTP only:
they claim batches of up to 100, acknowledge the previous batch with the next request,
and see how many remain unclaimed; admins reset claims older than N minutes, or one
claim by id. conveyor's API is mounted inside the application's own ASGI app."""

from __future__ import annotations

import sqlite3
from typing import Any

from fastapi import FastAPI, HTTPException

import conveyor
from conveyor.web import create_app

QUEUE = "catalogue"
TASK = "catalogue.lookup"


def book_key(book_id: int) -> str:
    return f"book-{book_id}"


class Library:
    """The application's data: a SQLite file that also holds the queue."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.q = conveyor.connect(f"sqlite:///{path}")
        with self._db() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS books ("
                " id INTEGER PRIMARY KEY, title TEXT NOT NULL, external_id TEXT)"
            )

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def add_book(self, title: str, *, fail_after_insert: bool = False) -> int | None:
        """Insert a book and queue it, atomically: both or neither."""
        db = self._db()
        try:
            with db:  # commits, or rolls back on error
                book_id = db.execute("INSERT INTO books (title) VALUES (?)", (title,)).lastrowid
                assert book_id is not None
                self.q.enqueue(
                    TASK, {"book_id": book_id, "title": title}, queue=QUEUE,
                    key=book_key(book_id), conn=db,
                )  # fmt: skip
                if fail_after_insert:
                    raise RuntimeError("the application failed after inserting")
            return book_id
        except RuntimeError:
            return None
        finally:
            db.close()

    def set_external_id(self, book_id: int, external_id: str) -> None:
        """The book has its id: store it, and the book leaves the queue."""
        with self._db() as db:
            changed = db.execute(
                "UPDATE books SET external_id = ? WHERE id = ?", (external_id, book_id)
            ).rowcount
        if not changed:
            raise KeyError(book_id)
        self.q.complete_by_key(book_key(book_id), queue=QUEUE, result={"external_id": external_id})

    def missing(self) -> int:
        with self._db() as db:
            return int(
                db.execute("SELECT count(*) FROM books WHERE external_id IS NULL").fetchone()[0]
            )

    def cleanup(self) -> int:
        """Admin: complete queue entries whose book already has its id (work done elsewhere)."""
        with self._db() as db:
            done = [r[0] for r in db.execute("SELECT id FROM books WHERE external_id IS NOT NULL")]
        return sum(self.q.complete_by_key(book_key(b), queue=QUEUE) for b in done)


def web_app(library: Library, tokens: dict[str, str]) -> FastAPI:
    api = FastAPI(title="library")

    @api.put("/books/{book_id}/external-id")
    def put_external_id(book_id: int, body: dict[str, Any]) -> dict[str, Any]:
        try:
            library.set_external_id(book_id, str(body["external_id"]))
        except KeyError:
            raise HTTPException(404, f"no book {book_id}") from None
        return {"book_id": book_id, "external_id": body["external_id"]}

    @api.post("/admin/cleanup")
    def cleanup() -> dict[str, int]:
        return {"removed_count": library.cleanup()}

    api.mount("/queue", create_app(library.q, tokens=tokens))
    return api
