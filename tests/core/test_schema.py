"""Schema, migrations, URLs and persistence."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import conveyor
from conveyor import ConfigurationError
from conveyor.config import parse_url
from tests.conftest import drop_schema, fresh_url

pytestmark = pytest.mark.queue_kinds("queue")


@pytest.fixture
def fresh(backend_name: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two empty databases on the backend: one migrated at once, one step by step."""
    a, schema_a = fresh_url(backend_name, tmp_path / "a")
    b, schema_b = fresh_url(backend_name, tmp_path / "b")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    yield a, b
    for schema in (schema_a, schema_b):
        if schema:
            drop_schema(schema)


def test_step_by_step_migration_equals_a_fresh_schema(fresh: tuple[str, str]) -> None:
    at_once, stepwise = fresh
    with conveyor.connect(at_once) as q:
        latest = q.driver.latest_version()
        expected = q.driver.describe_schema()
        assert q.driver.schema_version() == latest >= 2
    for version in range(1, latest + 1):
        # Reconnect for every step, with data in the tables, as a real upgrade would.
        with conveyor.connect(stepwise, migrate=False) as q:
            assert q.driver.schema_version() == version - 1
            assert q.migrate(target=version) == [version]
            if version == 1:
                _insert_a_version_1_job(stepwise)
    with conveyor.connect(stepwise) as q:
        assert q.driver.describe_schema() == expected
        assert q.migrate() == []  # nothing left to do
        assert q.stats().pending == 1  # data survived the upgrade, and was counted
        job = q.claim("q").jobs[0]
        assert job.task == "t" and job.errors == () and job.group is None


def test_the_latest_migration_upgrades_a_queue_in_use(fresh: tuple[str, str]) -> None:
    """A database one migration behind, with jobs in every state, upgraded in place: the
    counts, the claimable jobs and the running claims are as they were."""
    url, _ = fresh
    with conveyor.connect(url, migrate=False) as q:
        latest = q.driver.latest_version()
        q.migrate(target=latest - 1)
        done, failed, cancelled, running = (q.enqueue("t", queue="q").id for _ in range(4))
        claims = {job_id: q.claim_job(job_id).id for job_id in (done, failed, running)}
        q.complete(done, claims[done], result=1)
        q.fail(failed, claims[failed], "boom", retryable=False)
        q.cancel(cancelled)
        waiting = q.enqueue("t", queue="q").id
        q.enqueue("other", queue="q")
        q.cancel(q.enqueue("other", queue="elsewhere").id)
        before, charted = q.stats("q"), q.throughput(minutes=5)
    with conveyor.connect(url) as q:
        assert q.driver.schema_version() == latest
        assert q.stats("q") == before
        assert q.throughput(minutes=5) == charted  # deltas not yet folded included
        assert sum(m.completed for m in charted) == sum(m.failed for m in charted) == 1
        tasks = q.task_stats()
        assert tasks.keys() == {"t", "other"}
        t, other = tasks["t"], tasks["other"]
        assert (t.pending, t.running, t.completed, t.failed, t.cancelled) == (1, 1, 1, 1, 1)
        assert (other.pending, other.cancelled, other.total) == (1, 1, 2)
        assert (before.pending, before.running, before.completed) == (2, 1, 1)
        assert (before.failed, before.cancelled) == (1, 1)
        assert q.heartbeat(running, claims[running]).id == running  # the claim still holds
        assert [j.id for j in q.claim("q", limit=10).jobs if j.task == "t"] == [waiting]
        q.complete(running, claims[running])
        assert q.stats("q").completed == 2


def _insert_a_version_1_job(url: str) -> None:
    """A job as the first schema stored it, written with the database's own driver."""
    columns = "(queue, task, priority, run_at, max_attempts, created_at, updated_at)"
    settings = parse_url(url)
    if settings.backend == "sqlite":
        with sqlite3.connect(settings.target) as conn:
            conn.execute(f"INSERT INTO conveyor_jobs {columns} VALUES ('q', 't', 0, 0, 1, 0, 0)")
        return
    if settings.backend == "mysql":
        from tests.conftest import mysql_connection

        database = settings.target.rsplit("/", 1)[1]
        with mysql_connection(database) as conn, conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO conveyor_jobs {columns}"
                " VALUES ('q', 't', 0, UTC_TIMESTAMP(6), 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))"
            )
        return
    import psycopg

    schema = settings.backend_options["schema"]
    with psycopg.connect(settings.target, autocommit=True) as conn:
        conn.execute(
            f'INSERT INTO "{schema}".conveyor_jobs {columns}'  # type: ignore[arg-type]
            " VALUES ('q', 't', 0, now(), 1, now(), now())"
        )


def test_connect_is_idempotent_and_concurrent_safe(db_url: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def open_and_close(_: int) -> int:
        with conveyor.connect(db_url) as q:
            return q.driver.schema_version()

    with ThreadPoolExecutor(6) as pool:
        versions = list(pool.map(open_and_close, range(6)))
    assert len(set(versions)) == 1 and versions[0] >= 2


def test_sqlite_file_persists_across_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'persist.db'}"
    with conveyor.connect(url) as q:
        kept = q.enqueue("t", {"x": 1}, key="k", subscriber="s")
        claim = q.claim(lease=3600)
        q.progress(kept.id, claim.id, total=10, checkpoint=4)
        other = q.enqueue("t", priority=2)
    with conveyor.connect(url) as q:
        job = q.get(kept.id)
        assert job is not None and job.status == "running" and job.claim_id == claim.id
        assert job.progress.checkpoint == 4 and q.subscribers(kept.id) == ["s"]
        assert q.get(other.id).priority == 2  # type: ignore[union-attr]
        assert q.complete(kept.id, claim.id).status == "completed"  # claims outlive processes


def test_sqlite_is_in_wal_mode_with_full_sync_by_default(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    with conveyor.connect(f"sqlite:///{path}"):
        mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"
    with conveyor.connect(f"sqlite:///{path}?synchronous=normal") as q:
        conn = q.driver._conn  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with conveyor.connect(f"sqlite:///{path}") as q:
        conn = q.driver._conn  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_postgres_schemas_keep_queues_apart(tmp_path: Path) -> None:
    a, schema_a = fresh_url("postgresql", tmp_path)
    b, schema_b = fresh_url("postgresql", tmp_path)
    try:
        with conveyor.connect(a) as qa, conveyor.connect(b) as qb:
            qa.enqueue("t")
            assert qa.stats().pending == 1 and qb.stats().pending == 0
    finally:
        drop_schema(schema_a)  # type: ignore[arg-type]
        drop_schema(schema_b)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "backend", "target"),
    [
        ("sqlite:///relative.db", "sqlite", "relative.db"),
        ("sqlite:////abs/path.db", "sqlite", "/abs/path.db"),
        ("sqlite:///:memory:", "sqlite", ":memory:"),
        ("postgresql://u@h:5433/db", "postgresql", "postgresql://u@h:5433/db"),
        (
            "postgres://u@h/db?sslmode=disable&schema=jobs",
            "postgresql",
            "postgresql://u@h/db?sslmode=disable",
        ),
        ("mysql://u:secret@h:3307/jobs", "mysql", "mysql://u:secret@h:3307/jobs"),
        ("mariadb://u@h/jobs?pool_max=4", "mysql", "mysql://u@h/jobs"),
    ],
)
def test_urls(url: str, backend: str, target: str) -> None:
    settings = parse_url(url)
    assert (settings.backend, settings.target) == (backend, target)


def test_url_options() -> None:
    s = parse_url("sqlite:///x.db?synchronous=normal&timeout=5&max_payload_bytes=10")
    assert s.backend_options == {"synchronous": "normal", "timeout": 5.0}
    assert s.queue_options == {"max_payload_bytes": 10}
    assert parse_url("postgresql://h/db?schema=jobs").backend_options == {"schema": "jobs"}
    mysql = parse_url("mysql://h/db?pool_min=2&pool_max=4&connect_timeout=3")
    assert mysql.backend_options == {"pool_min": 2, "pool_max": 4, "connect_timeout": 3.0}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("oracle://h/db", "unsupported scheme 'oracle'"),
        ("mysql://h/db?sslmode=disable", "MySQL URL: unknown option"),
        ("mysql://h/db?schema=jobs", "MySQL URL: unknown option"),
        ("mysql://h/", "expected a database name"),
        ("mariadb://h:port/db", "port must be a number"),
        ("mysql://h/db?pool_max=many", "pool_max: expected an integer"),
        ("no-scheme", "expected sqlite:///"),
        ("sqlite://host/x.db", "three slashes"),
        ("sqlite:///", "expected a file name"),
        ("sqlite:///x.db?colour=red", "unknown option"),
        ("sqlite:///x.db?timeout=soon", "timeout: expected a number"),
        ("sqlite:///x.db?synchronous=off", "synchronous: expected one of"),
        ("postgresql://h/db?schema=bad;name", "schema: expected a plain identifier"),
        ("postgresql://h/db?pool_max=many", "pool_max: expected an integer"),
    ],
)
def test_bad_urls_raise_configuration_error(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        conveyor.connect(url)


def test_url_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "env.db"
    monkeypatch.setenv("CONVEYOR_DATABASE_URL", f"sqlite:///{path}")
    with conveyor.connect() as q:
        q.enqueue("t")
    assert path.exists()


def test_unreachable_postgres_is_a_database_error() -> None:
    with pytest.raises(conveyor.DatabaseError, match="cannot connect"):
        conveyor.connect("postgresql://root@127.0.0.1:1/test?connect_timeout=1")


def test_unreachable_mysql_is_a_database_error_without_the_password() -> None:
    with pytest.raises(conveyor.DatabaseError, match="cannot connect to MySQL") as raised:
        conveyor.connect("mysql://root:hunter2@127.0.0.1:1/test?connect_timeout=1")
    assert "hunter2" not in str(raised.value)
    assert "mysql://root@127.0.0.1:1/test" in str(raised.value)


@pytest.mark.parametrize("backend_name", ["mysql"], indirect=True)
def test_a_mysql_password_is_never_shown(db_url: str) -> None:
    with conveyor.connect(db_url.replace("root@", "root:@")) as q:
        assert "@" in q.url and ":@" not in q.url
    with pytest.raises(ConfigurationError) as raised:
        parse_url(db_url.replace("root@", "root:hunter2@") + "?colour=red")
    assert "hunter2" not in str(raised.value)


def test_the_queue_url_names_its_schema(db_url: str, backend_name: str) -> None:
    with conveyor.connect(db_url) as q:
        if backend_name == "postgresql":
            assert q.url.startswith("postgresql://") and "?schema=t_" in q.url
        elif backend_name == "mysql":
            assert q.url.startswith("mysql://") and q.url.rsplit("/", 1)[1].startswith("t_")
        else:
            assert q.url.startswith("sqlite:///") and q.url.endswith("conveyor.db")


@pytest.mark.parametrize("connect", ["sync", "async"])
def test_a_missing_mysql_driver_names_the_extra(
    connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import sys

    import conveyor.aio

    monkeypatch.setitem(sys.modules, "pymysql", None)  # as if PyMySQL were not installed
    for name in [m for m in sys.modules if m.startswith("conveyor.drivers.mysql")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ConfigurationError, match=r"pip install 'conveyor\[mysql\]'"):
        if connect == "sync":
            conveyor.connect("mysql://root@127.0.0.1:1/test")
        else:
            asyncio.run(conveyor.aio.connect("mysql://root@127.0.0.1:1/test"))
