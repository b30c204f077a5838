"""The typer application every command module registers on, and the error shell."""

from __future__ import annotations

import sys

import typer

from conveyor.errors import ConveyorError

app = typer.Typer(
    name="conveyor",
    help="conveyor: a durable job queue in SQLite or PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DB_HELP = "Database URL (default: $CONVEYOR_DATABASE_URL, else sqlite:///conveyor.db)."


def run(application: typer.Typer) -> int:
    try:
        application(standalone_mode=False)
    except ConveyorError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 1
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        return 130
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except Exception as exc:  # usage errors (typer's click) and anything unexpected
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):
            show(file=sys.stderr)
            return int(exc.exit_code)  # type: ignore[attr-defined]
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        return 1
    return 0


@app.callback()
def _root() -> None:
    """conveyor: a durable job queue in SQLite or PostgreSQL."""
