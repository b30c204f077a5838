"""Shared fixtures. Every contract test runs on SQLite, on a real PostgreSQL and on a real
MySQL or MariaDB.

PostgreSQL: ``$CONVEYOR_TEST_POSTGRES_URL`` (default: root@127.0.0.1:5432/test). Each test
gets a schema of its own, dropped afterwards. MySQL: ``$CONVEYOR_TEST_MYSQL_URL``
(default: root@127.0.0.1:3306/test); each test gets a database of its own, dropped
afterwards. Without a server the tests of that database skip, except under ``CI=true``,
where an unreachable server fails the run."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import conveyor
from tests.worker.procs import WorkerProcess

PG_URL = os.environ.get("CONVEYOR_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MYSQL_URL = os.environ.get("CONVEYOR_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
BACKENDS = ["sqlite", "postgresql", "mysql"]

_pg_state: dict[str, str | None] = {}
_mysql_state: dict[str, str | None] = {}
# The MySQL databases made for tests: drop_schema drops these whole.
_mysql_databases: set[str] = set()


def postgres_problem() -> str | None:
    """None when the test PostgreSQL answers, else why not (checked once)."""
    if "problem" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(PG_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_state["problem"] = None
        except Exception as exc:
            _pg_state["problem"] = f"PostgreSQL at {PG_URL} is unreachable: {exc}"
    return _pg_state["problem"]


def require_postgres() -> None:
    problem = postgres_problem()
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"{problem} (CI=true: PostgreSQL tests must run)")
    pytest.skip(problem)


def _mysql_server() -> dict[str, object]:
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(MYSQL_URL)
    return {
        "host": parts.hostname or "localhost",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "connect_timeout": 3,
        "autocommit": True,
    }


def mysql_problem() -> str | None:
    """None when the test MySQL answers, else why not (checked once)."""
    if "problem" not in _mysql_state:
        try:
            import pymysql

            pymysql.connect(**_mysql_server()).close()  # type: ignore[arg-type]
            _mysql_state["problem"] = None
        except Exception as exc:
            _mysql_state["problem"] = f"MySQL at {MYSQL_URL} is unreachable: {exc}"
    return _mysql_state["problem"]


def require_mysql() -> None:
    problem = mysql_problem()
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"{problem} (CI=true: MySQL tests must run)")
    pytest.skip(problem)


def require_mysqlclient() -> None:
    """mysqlclient (in the dev extra) is importable; outside CI its tests skip if not."""
    try:
        import MySQLdb  # noqa: F401
    except ImportError as exc:
        problem = f"mysqlclient is not installed: {exc}"
        if IN_CI:
            pytest.fail(f"{problem} (CI=true: its tests must run)")
        pytest.skip(problem)


def mysql_connection(database: str | None = None, *, autocommit: bool = True) -> Any:
    """A PyMySQL connection to the test server (to ``database``, if given). An
    application's connection has autocommit off, PyMySQL's default."""
    import pymysql

    options = _mysql_server()
    options["autocommit"] = autocommit
    if database:
        options["database"] = database
    return pymysql.connect(**options)  # type: ignore[arg-type]


def fresh_url(backend: str, tmp_path: Path) -> tuple[str, str | None]:
    """A URL to an empty database, and the PostgreSQL schema (or MySQL database) to drop
    afterwards."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'conveyor.db'}", None
    if backend in ("mysql", "mysqlclient"):
        require_mysql()
        database = f"t_{uuid.uuid4().hex[:12]}"
        with mysql_connection() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
        _mysql_databases.add(database)
        base = MYSQL_URL.split("?", 1)[0].rsplit("/", 1)[0]
        if backend == "mysqlclient":  # the same database through the C client library
            require_mysqlclient()
            return f"{base}/{database}?client=mysqlclient", database
        return f"{base}/{database}", database
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}schema={schema}", schema


def drop_schema(schema: str) -> None:
    if schema in _mysql_databases:
        with mysql_connection() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{schema}`")
        _mysql_databases.discard(schema)
        return
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend_name: str, tmp_path: Path) -> Iterator[str]:
    """A URL to a fresh, empty database on each backend."""
    url, schema = fresh_url(backend_name, tmp_path)
    yield url
    if schema:
        drop_schema(schema)


@pytest.fixture
def q(db_url: str) -> Iterator[conveyor.Queue]:
    """A migrated queue on each backend."""
    queue = conveyor.connect(db_url)
    yield queue
    queue.close()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """Worker processes a test starts (``start_worker``): killed when it ends."""
    started: list[WorkerProcess] = []
    yield started
    for proc in started:
        proc.kill()
