"""Each framework test gets a database of its own: a SQLite file, or a new PostgreSQL
database (an application's tables and its queue live together, in its default schema)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.conftest import PG_URL, require_postgres

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_name(request: pytest.FixtureRequest) -> str:
    """The example applications keep their own tables with their own drivers (sqlite3,
    psycopg; Django's MySQL engine would need mysqlclient, a C extension): they have no
    MySQL side yet."""
    return str(request.param)


def _server_url(database: str) -> str:
    parts = urlsplit(PG_URL)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", "", ""))


def drop_database(name: str) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_name() -> str:
    return f"conveyor_fw_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def app_db_url(backend_name: str, tmp_path: Path, database_name: str) -> Iterator[str]:
    """An empty database for an application: ``sqlite:///…`` or ``postgresql://…``."""
    if backend_name == "sqlite":
        yield f"sqlite:///{tmp_path / 'app.db'}"
        return
    require_postgres()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database_name}"')
    try:
        yield _server_url(database_name)
    finally:
        drop_database(database_name)
