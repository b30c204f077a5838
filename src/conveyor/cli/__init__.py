"""The ``conveyor`` command. Each group of commands lives in a module of its own and
registers itself on ``app``; this module only builds the shell and handles errors."""

from __future__ import annotations

import sys

import typer

# Importing a module registers its commands.
from conveyor.cli import admin as _admin  # noqa: F401
from conveyor.cli import bench as _bench  # noqa: F401
from conveyor.cli import demo as _demo  # noqa: F401
from conveyor.cli import enqueue as _enqueue  # noqa: F401
from conveyor.cli import flow as _flow  # noqa: F401
from conveyor.cli import inspect as _inspect  # noqa: F401
from conveyor.cli import retention as _retention  # noqa: F401
from conveyor.cli import serve as _serve  # noqa: F401
from conveyor.cli import worker as _worker  # noqa: F401
from conveyor.cli import workflows as _workflows  # noqa: F401
from conveyor.cli.base import app


def main() -> None:
    """Entry point: user mistakes exit non-zero with one line on stderr, no traceback."""
    from conveyor.cli.base import run

    sys.exit(run(app))


__all__ = ["app", "main", "typer"]
