"""Adding and showing books."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, request

from examples.frameworks.flask_app.db import Duplicate, get_db, insert_book, run
from examples.frameworks.flask_app.extensions import conveyor_
from examples.frameworks.flask_app.tasks import catalogue

books = Blueprint("books", __name__)


@books.post("/books")
def add_book() -> tuple[dict[str, Any], int]:
    """The book's catalogue job is enqueued on the request's own connection before the
    book is inserted: a duplicate ISBN rolls back both."""
    data = request.get_json(force=True)
    isbn, conn = str(data["isbn"]), get_db()
    try:
        job = catalogue.enqueue(isbn=isbn, key=f"book:{isbn}", conn=conn)
        book_id = insert_book(isbn, data["title"])
        conn.commit()
    except Duplicate:
        conn.rollback()
        return {"error": f"ISBN {isbn} is in the catalogue already"}, 409
    return {"id": book_id, "catalogue_job": job.id}, 201


@books.get("/books/<int:book_id>")
def show_book(book_id: int) -> dict[str, Any]:
    row = run("SELECT isbn, title, catalogued FROM books WHERE id = ?", (book_id,)).fetchone()
    if row is None:
        abort(404)
    job = conveyor_.queue.latest(f"book:{row[0]}")
    return {"id": book_id, "isbn": row[0], "title": row[1], "catalogued": bool(row[2]),
            "catalogue_job": None if job is None else job.status}  # fmt: skip
