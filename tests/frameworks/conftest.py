"""Each framework test gets a database of its own: a SQLite file, a new PostgreSQL
database (an application's tables and its queue live together, in its default schema),
or a new MySQL (MariaDB) database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.conftest import (
    MYSQL_URL,
    PG_URL,
    mysql_connection,
    require_mysql,
    require_postgres,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def backend_name(request: pytest.FixtureRequest) -> str:
    """The example applications keep their own tables with their own drivers: sqlite3,
    psycopg, PyMySQL or aiomysql (Flask, FastAPI) and Django's engines (its MySQL one is
    mysqlclient, a C extension: the ``django-mysql`` extra)."""
    return str(request.param)


def _server_url(database: str, base: str = PG_URL) -> str:
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", "", ""))


def drop_database(name: str, backend: str = "postgresql") -> None:
    if backend == "mysql":
        with mysql_connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        return
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_name() -> str:
    return f"conveyor_fw_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def app_db_url(backend_name: str, tmp_path: Path, database_name: str) -> Iterator[str]:
    """An empty database for an application: ``sqlite:///…``, ``postgresql://…`` or
    ``mysql://…``."""
    if backend_name == "sqlite":
        yield f"sqlite:///{tmp_path / 'app.db'}"
        return
    if backend_name == "mysql":
        require_mysql()
        with mysql_connection() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{database_name}` CHARACTER SET utf8mb4")
        try:
            yield _server_url(database_name, MYSQL_URL)
        finally:
            drop_database(database_name, "mysql")
        return
    require_postgres()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database_name}"')
    try:
        yield _server_url(database_name)
    finally:
        drop_database(database_name)
