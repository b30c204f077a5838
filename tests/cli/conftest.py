"""Drive the real ``conveyor`` command in subprocesses, as a user or a script would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conveyor.config import ENV_URL

# A bounded wait for one command; they take well under a second.
COMMAND_TIMEOUT_S = 60


@dataclass
class Result:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.describe()
        return json.loads(self.stdout)

    def describe(self) -> str:
        return f"conveyor {' '.join(self.args)} -> {self.code}\n{self.stdout}\n{self.stderr}"


Cli = Callable[..., Result]


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (ENV_URL, "COLUMNS")}
    env.update({"NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}, **extra)
    return env


def run_cli(
    *args: str, cwd: Path, input: str | None = None, env: dict[str, str] | None = None,
    timeout: float = COMMAND_TIMEOUT_S,
) -> Result:  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "conveyor", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=env or cli_env(),
        timeout=timeout,
    )
    return Result(args, done.returncode, done.stdout, done.stderr)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """``cli("jobs", "--json")``: run conveyor in a fresh directory."""

    def call(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        return run_cli(*args, cwd=tmp_path, input=input, env=env)

    return call


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """For behaviour of the CLI itself, where the database makes no difference."""
    return f"sqlite:///{tmp_path / 'cli.db'}"


def assert_one_line_error(result: Result, *, code: int = 1, contains: str = "") -> None:
    """A user mistake: a non-zero exit and exactly one line on stderr, no traceback."""
    assert result.code == code, result.describe()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.describe()
    assert lines[0].startswith("error: "), result.describe()
    assert contains.lower() in lines[0].lower(), result.describe()
    assert "Traceback" not in result.stderr
