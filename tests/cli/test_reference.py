"""docs/cli.md is generated from the commands; it must not drift from them."""

from __future__ import annotations

from pathlib import Path

from conveyor.cli.base import app
from conveyor.cli.reference import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_cli_reference_matches_the_commands() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is out of date: python -m conveyor.cli.reference > docs/cli.md"
    )


def test_every_command_has_a_section() -> None:
    text = render()
    for command in app.registered_commands:
        name = command.name or (command.callback.__name__ if command.callback else "")
        assert f"## conveyor {name.replace('_', '-')}\n" in text
