"""The catalogue sync, run by ``flask conveyor worker`` inside the Flask application
context (so it uses ``get_db()`` like a view)."""

from __future__ import annotations

import conveyor
from examples.frameworks.flask_app.db import get_db, run

tasks = conveyor.App()


@tasks.task(name="books.catalogue", max_attempts=5)
def catalogue(ctx: conveyor.Context, isbn: str) -> dict[str, str]:
    # A real catalogue would be called here; this one marks the book as sent.
    run("UPDATE books SET catalogued = TRUE WHERE isbn = ?", (isbn,))
    get_db().commit()
    return {"isbn": isbn}
