"""The application's own connection, one per request (``get_db()``), on SQLite or
PostgreSQL, and its ``books`` table (``flask init-db``)."""

from __future__ import annotations

import sqlite3
from typing import Any

import click
import psycopg
from flask import Flask, current_app, g
from flask.cli import with_appcontext

from conveyor.config import application_conninfo

BOOKS = """CREATE TABLE IF NOT EXISTS books (
    id {serial} PRIMARY KEY,
    isbn TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    catalogued BOOLEAN NOT NULL DEFAULT FALSE
)"""
Duplicate = (sqlite3.IntegrityError, psycopg.errors.UniqueViolation)


def get_db() -> Any:
    """This request's DB-API connection; its transaction ends with the request."""
    if "db" not in g:
        url: str = current_app.config["DATABASE_URL"]
        if url.startswith("sqlite:///"):
            g.db = sqlite3.connect(url.removeprefix("sqlite:///"))
        else:
            # conveyor's options (?schema=…) are not libpq's: the schema becomes the
            # connection's search_path, and the rest goes to libpq as it is.
            g.db = psycopg.connect(application_conninfo(url))
    return g.db


def placeholder() -> str:
    return "?" if isinstance(get_db(), sqlite3.Connection) else "%s"


def close_db(error: BaseException | None = None) -> None:
    conn = g.pop("db", None)
    if conn is not None:
        conn.rollback()  # what a view did not commit does not happen
        conn.close()


def init_db() -> None:
    conn = get_db()
    serial = "INTEGER" if isinstance(conn, sqlite3.Connection) else "BIGSERIAL"
    conn.execute(BOOKS.format(serial=serial))
    conn.commit()


@click.command("init-db")
@with_appcontext
def init_db_command() -> None:
    """Create the books table."""
    init_db()
    click.echo("books table ready")


def init_app(app: Flask) -> None:
    app.teardown_appcontext(close_db)
    app.cli.add_command(init_db_command)
