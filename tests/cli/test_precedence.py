"""Which database a command uses, in one order everywhere: ``--db``, then
``$CONVEYOR_DATABASE_URL``, then the URL the code names (``App(url)``, ``connect(url)``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import conveyor
from tests.cli.conftest import Cli, cli_env

APP = """
import conveyor

app = conveyor.App({url!r})


@app.task(name="hello")
def hello(ctx):
    return "hi"
"""


def _seed(url: str) -> None:
    with conveyor.connect(url, use_env=False) as q:
        q.enqueue("hello")


def _statuses(url: str) -> list[str]:
    with conveyor.connect(url, use_env=False) as q:
        return [job.status for job in q.jobs()]


@pytest.fixture
def three(tmp_path: Path) -> tuple[str, str, str]:
    """The URL in code, the one in the environment, the one on the command line: each
    database holds one pending job."""
    urls = tuple(f"sqlite:///{tmp_path / name}.db" for name in ("code", "env", "flag"))
    for url in urls:
        _seed(url)
    (tmp_path / "prec_tasks.py").write_text(APP.format(url=urls[0]))
    return urls  # type: ignore[return-value]


def test_the_environment_beats_the_url_in_code(
    cli: Cli, tmp_path: Path, three: tuple[str, str, str]
) -> None:
    code, env, flag = three
    environ = cli_env(PYTHONPATH=str(tmp_path), CONVEYOR_DATABASE_URL=env)
    result = cli("worker", "--app", "prec_tasks:app", "--burst", env=environ)
    assert result.code == 0, result.describe()
    assert _statuses(env) == ["completed"]
    assert _statuses(code) == ["pending"]
    assert _statuses(flag) == ["pending"]


def test_the_command_line_beats_the_environment_and_the_code(
    cli: Cli, tmp_path: Path, three: tuple[str, str, str]
) -> None:
    code, env, flag = three
    environ = cli_env(PYTHONPATH=str(tmp_path), CONVEYOR_DATABASE_URL=env)
    result = cli("worker", "--app", "prec_tasks:app", "--burst", "--db", flag, env=environ)
    assert result.code == 0, result.describe()
    assert _statuses(flag) == ["completed"]
    assert _statuses(env) == ["pending"]
    assert _statuses(code) == ["pending"]


def test_without_either_the_code_decides(
    cli: Cli, tmp_path: Path, three: tuple[str, str, str]
) -> None:
    code, env, _ = three
    result = cli("worker", "--app", "prec_tasks:app", "--burst",
                 env=cli_env(PYTHONPATH=str(tmp_path)))  # fmt: skip
    assert result.code == 0, result.describe()
    assert _statuses(code) == ["completed"]
    assert _statuses(env) == ["pending"]


def test_connect_follows_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, three: tuple[str, str, str]
) -> None:
    code, env, _ = three
    monkeypatch.setenv("CONVEYOR_DATABASE_URL", env)
    with conveyor.connect(code) as q:
        assert Path(q.url.removeprefix("sqlite:///")).name == "env.db"
    with conveyor.connect(code, use_env=False) as q:
        assert Path(q.url.removeprefix("sqlite:///")).name == "code.db"
    monkeypatch.delenv("CONVEYOR_DATABASE_URL")
    with conveyor.connect(code) as q:
        assert Path(q.url.removeprefix("sqlite:///")).name == "code.db"


def test_help_states_the_order(cli: Cli) -> None:
    for command in ("worker", "jobs", "serve"):
        text = " ".join(cli(command, "--help", env=cli_env(COLUMNS="200")).stdout.split())
        assert "$CONVEYOR_DATABASE_URL" in text
        assert "the app's URL" in text or command != "worker", text
