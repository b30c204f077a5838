"""The typer application every command module registers on, the options they share,
and the error shell: a user mistake is one line on stderr and a non-zero exit code."""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from collections.abc import Iterable
from typing import Annotated, Any

import typer
import typer.rich_utils
from rich.columns import Columns
from rich.text import Text
from typer._click import Command, Context
from typer.core import TyperGroup

from conveyor.errors import ConveyorError, InvalidArgument

# The order of ``conveyor --help``: daily work first, administration last. Commands
# not listed follow in the order they were registered.
COMMAND_ORDER = [
    "enqueue", "jobs", "show", "retry", "cancel",
    "stats", "info", "workers", "schedules",
    "worker", "serve", "demo", "bench",
    "pause", "resume", "limits",
    "release", "reset-claims", "prune", "migrate",
]  # fmt: skip


class _OrderedGroup(TyperGroup):
    def list_commands(self, ctx: Context) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.help:
            command.help = unwrapped(command.help)
        return command


def unwrapped(text: str) -> str:
    """A docstring's paragraphs each on one line, so help fills the terminal's width
    instead of breaking where the source line did."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


class _FoldingColumns(Columns):
    """The help of each option in ``--help``: a word longer than its column (a URL, an
    environment variable, a default) folds onto the next line instead of being cut
    with an ellipsis, so every default and name is shown whole."""

    def __init__(self, renderables: Iterable[Any] = (), *args: Any, **options: Any) -> None:
        items = list(renderables)
        for item in items:
            if isinstance(item, Text):
                item.overflow = "fold"
        super().__init__(items, *args, **options)


setattr(typer.rich_utils, "Columns", _FoldingColumns)  # noqa: B010 (a module's global)

app = typer.Typer(
    name="conveyor",
    cls=_OrderedGroup,
    help="conveyor: a durable job queue in SQLite or PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Help panels that group the commands in ``conveyor --help``.
PANEL_JOBS = "Jobs"
PANEL_WATCH = "Watch"
PANEL_ADMIN = "Administer"
PANEL_RUN = "Run"

DB_HELP = "Database URL (default: $CONVEYOR_DATABASE_URL, else sqlite:///conveyor.db)."
# The worker runs an app that may name a database of its own: it comes last.
WORKER_DB_HELP = (
    "Database URL. Beats $CONVEYOR_DATABASE_URL, which beats the app's URL in code "
    "(App(url)); with none of them, sqlite:///conveyor.db."
)
JSON_HELP = "Print JSON for scripts instead of tables."

DbOption = Annotated[
    str | None, typer.Option("--db", help=DB_HELP, show_default=False, metavar="URL")
]
JsonOption = Annotated[bool, typer.Option("--json", help=JSON_HELP)]

# Exit codes: 1 a refused operation (unknown job, wrong state) or a database that cannot
# be opened or reached; 2 a mistake in what was typed: usage, or a value the command or
# the queue refuses (InvalidArgument); 130 interrupted (Ctrl-C), 141 stdout closed early
# (``| head``).
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
DEBUG_ENV = "CONVEYOR_DEBUG"


def one_line(text: object) -> str:
    """Database drivers write messages over several lines; a terminal error is one."""
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; ``raise fail(...)`` ends the command."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(EXIT_ERROR)


def usage(message: str) -> Exception:
    """A mistake in how the command was called; ``raise usage(...)`` exits 2."""
    from typer._click.exceptions import UsageError

    return UsageError(message)


def invalid(message: str) -> typer.Exit:
    """A value the command refuses (a malformed payload, a bad line of a file): prints
    ``error: message`` on stderr; ``raise invalid(...)`` exits 2, as a usage mistake."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(EXIT_USAGE)


def run(application: typer.Typer) -> int:
    """Run the CLI and turn every expected failure into one line and an exit code."""
    try:
        # Outside standalone mode, click returns a typer.Exit's code instead of raising.
        outcome = application(standalone_mode=False, prog_name="conveyor")
    except InvalidArgument as exc:  # a value the queue refuses: a mistake in what was typed
        typer.echo(f"error: {one_line(exc)}", err=True)
        return EXIT_USAGE
    except ConveyorError as exc:
        typer.echo(f"error: {one_line(exc)}", err=True)
        return EXIT_ERROR
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        return _report_other(exc)
    return outcome if isinstance(outcome, int) else 0


def _report_other(exc: Exception) -> int:
    from typer._click import exceptions as click_errors

    if isinstance(exc, click_errors.NoArgsIsHelpError):
        exc.show(file=sys.stderr)  # the help text, as for ``conveyor`` alone
        return EXIT_USAGE
    if isinstance(exc, click_errors.UsageError):
        where = exc.ctx.command_path if exc.ctx is not None else "conveyor"
        message = one_line(exc.format_message())
        typer.echo(f"error: {message} (see '{where} --help')", err=True)
        return EXIT_USAGE
    if isinstance(exc, click_errors.ClickException):
        typer.echo(f"error: {one_line(exc.format_message())}", err=True)
        return exc.exit_code or EXIT_ERROR
    if os.environ.get(DEBUG_ENV):
        traceback.print_exc()
    else:
        typer.echo(
            f"error: unexpected {type(exc).__name__}: {one_line(exc)} "
            f"(set {DEBUG_ENV}=1 for the traceback)",
            err=True,
        )
    return EXIT_ERROR


def _silence_stdout() -> None:
    # The reader went away; point stdout at /dev/null so the interpreter's final
    # flush does not raise a second BrokenPipeError.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def _print_version(value: bool) -> None:
    if value:
        from conveyor import __version__

        typer.echo(f"conveyor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """conveyor: a durable job queue in SQLite or PostgreSQL."""
