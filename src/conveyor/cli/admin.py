"""Operating the queue: migrate, enqueue, inspect, retry, reset."""

from __future__ import annotations

from typing import Annotated

import typer

import conveyor
from conveyor.cli.base import DB_HELP, app


@app.command()
def migrate(db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None) -> None:
    """Create or upgrade the schema."""
    with conveyor.connect(db, migrate=False) as q:
        applied = q.migrate()
        version = q.backend.schema_version()
    typer.echo(f"schema at version {version} ({len(applied)} migration(s) applied) on {q.url}")
