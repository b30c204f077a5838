"""``--help`` at 80 columns shows every default and name whole: long words fold onto
the next line, none is cut with an ellipsis."""

from __future__ import annotations

import re

import pytest

from conveyor.cli.base import COMMAND_ORDER
from tests.cli.conftest import Cli, cli_env


def _flat(text: str) -> str:
    """The help's words with the box drawing, padding and line breaks taken out."""
    return re.sub(r"[\s│╭╮╰╯─]+", "", text)


@pytest.mark.parametrize("command", COMMAND_ORDER)
def test_help_at_80_columns_cuts_nothing(cli: Cli, command: str) -> None:
    result = cli(command, "--help", env=cli_env(COLUMNS="80"))
    assert result.code == 0, result.describe()
    assert "…" not in result.stdout, result.stdout


def test_long_defaults_are_shown_whole(cli: Cli) -> None:
    demo = _flat(cli("demo", "--help", env=cli_env(COLUMNS="80")).stdout)
    assert "[default:sqlite:///conveyor-demo.db]" in demo
    worker = _flat(cli("worker", "--help", env=cli_env(COLUMNS="80")).stdout)
    assert "$CONVEYOR_DATABASE_URL" in worker
    assert "sqlite:///conveyor.db" in worker
