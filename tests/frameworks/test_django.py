"""The Django recipe (examples/frameworks/django_app): the shop's own tests, run by
``manage.py test`` on SQLite, PostgreSQL and MySQL as its developers would, enqueue inside
``transaction.atomic()`` on Django's connection, roll back and see no job, enqueue on
commit, and run the worker command; plus the integration's settings."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.errors import ConfigurationError
from conveyor.integrations.django.config import database_url
from tests.frameworks.conftest import ROOT, drop_database

SHOP = ROOT / "examples/frameworks/django_app"


def _manage(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=SHOP, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_shop_tests_pass(app_db_url: str, backend_name: str, database_name: str) -> None:
    try:
        run = _manage("test", "shop", "--noinput", "-v", "2", url=app_db_url)
    finally:
        if backend_name != "sqlite":  # when a failed run left it behind
            drop_database(f"test_{database_name}", backend_name)
    report = run.stderr
    assert run.returncode == 0, report[-4000:]  # any failing test fails the run
    for name in (
        "test_a_rolled_back_atomic_block_takes_its_task_with_it",
        "test_a_refused_order_leaves_neither_order_nor_task",
        "test_the_first_order_opens_the_queue_inside_its_transaction",
        "test_on_commit_enqueues_only_once_committed",
        "test_the_worker_command_sends_the_receipts",
        "test_results_show_status_return_value_and_errors",
    ):
        assert name in report, name
    assert "Ran 7 tests" in report and "\nOK" in report


@pytest.mark.parametrize("backend_name", ["sqlite"])
def test_migrate_creates_conveyor_s_tables_and_the_worker_runs(app_db_url: str) -> None:
    migrated = _manage("migrate", "--run-syncdb", "--noinput", url=app_db_url)
    assert migrated.returncode == 0, migrated.stderr
    with sqlite3.connect(app_db_url.removeprefix("sqlite:///")) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"shop_order", "conveyor_jobs"} <= tables
    worker = _manage("conveyor_worker", "--burst", url=app_db_url)
    assert worker.returncode == 0, worker.stderr
    assert "nothing to do" in worker.stderr


def test_a_django_database_gives_the_queue_s_url(tmp_path: Path) -> None:
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": tmp_path / "db.sqlite3"}
    assert database_url(sqlite) == f"sqlite:///{tmp_path / 'db.sqlite3'}"
    postgres = {
        "ENGINE": "django.db.backends.postgresql", "NAME": "shop", "USER": "app",
        "PASSWORD": "p@ss:word", "HOST": "db.internal", "PORT": 5433,
        "OPTIONS": {"sslmode": "require", "server_side_binding": True},
    }  # fmt: skip
    assert database_url(postgres, schema="jobs") == (
        "postgresql://app:p%40ss%3Aword@db.internal:5433/shop?sslmode=require&schema=jobs"
    )
    with pytest.raises(ConfigurationError, match="in-memory"):
        database_url({**sqlite, "NAME": ":memory:"})
    mysql = {
        "ENGINE": "django.db.backends.mysql", "NAME": "shop", "USER": "app",
        "PASSWORD": "p@ss", "HOST": "db.internal", "PORT": "3307",
        "OPTIONS": {"charset": "utf8mb4"},
    }  # fmt: skip
    assert database_url(mysql) == "mysql://app:p%40ss@db.internal:3307/shop"
    assert database_url({**mysql, "HOST": "", "PORT": ""}) == "mysql://app:p%40ss@/shop"
    for unreachable in ({"HOST": "/run/mysqld/mysqld.sock"},
                        {"OPTIONS": {"read_default_file": "/etc/my.cnf"}}):  # fmt: skip
        with pytest.raises(ConfigurationError, match="over TCP"):
            database_url({**mysql, **unreachable})
    with pytest.raises(ConfigurationError, match="SQLite, PostgreSQL and MySQL"):
        database_url({"ENGINE": "django.db.backends.oracle", "NAME": "shop"})


def test_a_typo_in_the_settings_stops_the_project_at_start_up() -> None:
    setup = (
        "import django; from django.conf import settings; "
        "settings.configure(INSTALLED_APPS=['conveyor.integrations.django'], "
        "CONVEYOR={'DATABASE_ULR': 'sqlite:///x.db'}); django.setup()"
    )
    run = subprocess.run(
        [sys.executable, "-c", setup], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert run.returncode != 0
    assert "unknown key(s) DATABASE_ULR" in run.stderr
