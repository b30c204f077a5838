"""The application's own connection, one per request (``get_db()``), on SQLite,
PostgreSQL or MySQL/MariaDB (PyMySQL, the queue's own driver, whose connections it
joins), and its ``books`` table (``flask init-db``). Statements are written with ``?``
placeholders; ``run`` gives each driver its own."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import click
import psycopg
import pymysql
from flask import Flask, current_app, g
from flask.cli import with_appcontext

from conveyor.config import application_conninfo, parse_url
from conveyor.drivers.mysql.dialect import Server

BOOKS = """CREATE TABLE IF NOT EXISTS books (
    id {serial} PRIMARY KEY,
    isbn VARCHAR(32) NOT NULL UNIQUE,
    title TEXT NOT NULL,
    catalogued BOOLEAN NOT NULL DEFAULT FALSE
)"""
SERIAL = {"sqlite": "INTEGER", "postgresql": "BIGSERIAL", "mysql": "BIGINT AUTO_INCREMENT"}
Duplicate = (sqlite3.IntegrityError, psycopg.errors.UniqueViolation, pymysql.err.IntegrityError)


def dialect() -> str:
    return parse_url(current_app.config["DATABASE_URL"]).backend


def get_db() -> Any:
    """This request's DB-API connection; its transaction ends with the request."""
    if "db" not in g:
        url: str = current_app.config["DATABASE_URL"]
        if dialect() == "sqlite":
            g.db = sqlite3.connect(url.removeprefix("sqlite:///"))
        elif dialect() == "mysql":
            # The queue's connection options, with transactions the request ends.
            options = Server.from_url(url).connect_kwargs(10.0)
            g.db = pymysql.connect(**{**options, "autocommit": False})
        else:
            # conveyor's options (?schema=…) are not libpq's: the schema becomes the
            # connection's search_path, and the rest goes to libpq as it is.
            g.db = psycopg.connect(application_conninfo(url))
    return g.db


def run(statement: str, params: Sequence[Any] = ()) -> Any:
    """Run a statement (``?`` placeholders) on this request's connection; its cursor."""
    cursor = get_db().cursor()
    cursor.execute(statement if dialect() == "sqlite" else statement.replace("?", "%s"), params)
    return cursor


def insert_book(isbn: str, title: str) -> int:
    """Insert a book; its id. MySQL has no ``INSERT … RETURNING``: the new row's id."""
    if dialect() == "mysql":
        return int(run("INSERT INTO books (isbn, title) VALUES (?, ?)", (isbn, title)).lastrowid)
    cursor = run("INSERT INTO books (isbn, title) VALUES (?, ?) RETURNING id", (isbn, title))
    return int(cursor.fetchone()[0])


def close_db(error: BaseException | None = None) -> None:
    conn = g.pop("db", None)
    if conn is not None:
        conn.rollback()  # what a view did not commit does not happen
        conn.close()


def init_db() -> None:
    run(BOOKS.format(serial=SERIAL[dialect()]))
    get_db().commit()


@click.command("init-db")
@with_appcontext
def init_db_command() -> None:
    """Create the books table."""
    init_db()
    click.echo("books table ready")


def init_app(app: Flask) -> None:
    app.teardown_appcontext(close_db)
    app.cli.add_command(init_db_command)
