"""User mistakes end in one line on stderr and a non-zero exit code, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, Result, assert_one_line_error, cli_env, run_cli


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unknown_scheme_is_refused(cli: Cli) -> None:
    result = cli("jobs", "--db", "oracle://root@localhost/db")
    assert_one_line_error(result, contains="unsupported scheme 'oracle'")


def test_text_that_is_not_a_url_is_refused(cli: Cli) -> None:
    assert_one_line_error(cli("stats", "--db", "conveyor.db"), contains="database URL")


def test_a_sqlite_file_in_a_missing_directory_is_refused(cli: Cli) -> None:
    result = cli("enqueue", "t", "--db", "sqlite:///no/such/dir/q.db")
    assert_one_line_error(result, contains="no such directory")


def test_reading_a_database_that_does_not_exist_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    result = cli("jobs", "--db", "sqlite:///typo.db")
    assert_one_line_error(result, contains="no database at 'typo.db'")
    assert not (tmp_path / "typo.db").exists()


def test_reading_a_database_without_conveyor_tables_creates_nothing(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    (tmp_path / "conveyor.db").touch()  # an empty SQLite file (the fixture's path)
    result = cli("stats", "--db", db_url)
    assert_one_line_error(result, contains="no conveyor tables")
    assert_one_line_error(cli("jobs", "--db", db_url), contains="conveyor migrate")
    assert cli("enqueue", "t", "--db", db_url).code == 0  # writing creates the tables


def test_an_unreachable_postgresql_fails_fast_with_one_line(tmp_path: Path) -> None:
    url = f"postgresql://root@127.0.0.1:{_closed_port()}/test"
    # The library's pool would retry for 10 s; the CLI probes once. The timeout is only a
    # generous bound that turns a hang into a failure.
    result = run_cli("stats", "--db", url, cwd=tmp_path, timeout=8)
    assert_one_line_error(result, contains="cannot connect to PostgreSQL")


def test_the_environment_variable_names_the_database(cli: Cli, sqlite_url: str) -> None:
    assert cli("enqueue", "t", "--db", sqlite_url).code == 0
    listed = cli("jobs", "--json", env=cli_env(CONVEYOR_DATABASE_URL=sqlite_url)).json()
    assert [job["task"] for job in listed] == ["t"]


def test_the_default_database_is_conveyor_db_in_the_working_directory(
    cli: Cli, tmp_path: Path
) -> None:
    assert cli("enqueue", "t").code == 0
    assert (tmp_path / "conveyor.db").exists()


def test_an_unknown_job_is_an_error(cli: Cli, db_url: str) -> None:
    cli("migrate", "--db", db_url)
    assert_one_line_error(cli("show", "99", "--db", db_url), contains="job 99 does not exist")
    assert_one_line_error(cli("retry", "99", "--db", db_url), contains="does not exist")
    assert_one_line_error(cli("cancel", "99", "--db", db_url), contains="does not exist")


def test_serve_without_the_server_extra_says_which_extra_to_install(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['uvicorn'] = None; sys.argv = ['conveyor', 'serve']; "
    done = subprocess.run(
        [sys.executable, "-c", hide + "from conveyor.cli import main; main()"],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(), timeout=60, check=False,
    )  # fmt: skip
    result = Result(("serve",), done.returncode, done.stdout, done.stderr)
    assert_one_line_error(result, code=1, contains="pip install 'conveyor[server]'")
    assert "uvicorn is not installed" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["jobs", "--status", "sleeping"], "status: expected one of pending"),
        (["jobs", "--limit", "0"], "limit"),
        (["enqueue", "t", "--priority", "99999999999"], "priority"),
        (["enqueue", "", "--queue", "q"], "task"),
        (["enqueue", "t", "--queue", "inv\u202eoice"], "bidirectional"),
        (["enqueue", "t", "--key", "a\x85b"], "control characters"),
        (["enqueue", "t", "--payload", "{nope"], "--payload: malformed JSON"),
        (["enqueue", "t", "--run-at", "9999-12-31T23:00:00-14:00"], "--run-at"),
        (["enqueue", "t", "--delay", "3000000d"], "--delay"),
        (
            ["prune", "--older-than", "1d", "--status", "running", "--yes"],
            "expected final statuses",
        ),
        (["retry", "--all-failed", "--queue", "a\nb"], "control characters"),
        (["fail", "--key", "k", "--error", ""], "error"),
        (["reset-claims", "--older-than", "1m", "--task", "a\nb"], "control characters"),
    ],
)
def test_values_the_queue_refuses_exit_2_with_one_line(
    cli: Cli, sqlite_url: str, args: list[str], message: str
) -> None:
    """A value that is wrong is a mistake in what was typed: exit 2, as for usage."""
    cli("migrate", "--db", sqlite_url)
    assert_one_line_error(cli(*args, "--db", sqlite_url), code=2, contains=message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["jobs", "--bogus"], "No such option: --bogus"),
        (["nosuch"], "No such command"),
        (["show", "abc"], "valid integer"),
        (["show"], "Missing argument"),
        (["reset-claims"], "Missing option '--older-than'"),
        (["reset-claims", "--older-than", "10 minutes"], "expected a duration such as"),
        (["enqueue", "t", "--run-at", "tomorrow"], "ISO 8601"),
        (["enqueue", "t", "--run-at", "2030-01-01T09:00:00"], "with a zone"),
        (["enqueue", "t", "--run-at", "2030-01-01T09:00:00Z", "--delay", "1m"], "not both"),
        (["enqueue"], "a TASK name is required"),
        (["retry"], "give one job ID, or --all-failed"),
        (["retry", "3", "--all-failed"], "give one job ID, or --all-failed"),
        (["cancel"], "give job IDs, or --key"),
        (["cancel", "3", "--key", "k"], "give job IDs, or --key"),
        (["fail", "--key", "k"], "Missing option '--error'"),
        (["fail", "--error", "why"], "Missing option '--key'"),
    ],
)
def test_usage_mistakes_exit_2_with_one_line(cli: Cli, args: list[str], message: str) -> None:
    result = cli(*args)
    assert_one_line_error(result, code=2, contains=message)
    assert "--help" in result.stderr


def test_no_arguments_prints_the_help(cli: Cli) -> None:
    result = cli()
    shown = result.stdout + result.stderr
    assert result.code == 2
    assert "enqueue" in shown
    assert "reset-claims" in shown


def test_version(cli: Cli) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.stdout.startswith("conveyor ")
