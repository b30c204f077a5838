"""The CLI reference page, written from the commands themselves so it cannot drift:
``python -m conveyor.cli.reference > docs/cli.md``."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import typer
import typer.main
from typer import _click as click
from typer.core import TyperGroup

from conveyor.cli import app

INTRO = """\
# Command line reference

Generated from the commands themselves: `python -m conveyor.cli.reference > docs/cli.md`.
`conveyor COMMAND --help` prints the same on a terminal.

Every command that touches a database takes `--db URL`. Which database, in one order
everywhere: `--db`, else `$CONVEYOR_DATABASE_URL`, else the URL in code (for `conveyor
worker`, the app's `App(url)`), else `sqlite:///conveyor.db` in the current directory. The
same order holds in Python: `$CONVEYOR_DATABASE_URL` beats `App(url)` and `connect(url)`.
`conveyor demo` alone never reads the variable: it uses its own
`sqlite:///conveyor-demo.db`, or the `--db` you give it. Commands that only look at a
database never create one: a SQLite path that does not exist is an error.

Output is a table on a terminal, fitted to its width (at 80 columns headers shorten, the
least important columns are left out and long free text is cut with `…`), plain text when
piped (`NO_COLOR` is honoured). Every command but `worker`, `serve` and `bench` also
prints JSON with `--json`; a command that acts on many jobs answers `{"count": N, …}`, N
being the jobs it acted on (or, with `prune --dry-run`, would act on), beside what else it
knows (`ids`, `skipped`, `refused`). Progress bars, live views and the "next page" hint of
`jobs` go to stderr, so stdout stays clean for a pipe.

Exit codes: `0` success; `1` the operation was refused (an unknown job, a job in the wrong
state, a claim that holds nothing, a "no" to a question), or the environment cannot be
used: the database cannot be opened or reached, `serve`'s port is taken; `2` a mistake in
what was typed: a usage mistake, or a value the command or the queue refuses (a malformed
`--payload`, a bad line of an `--file`, a name with control characters, an unknown
status). Errors are one line on stderr, starting `error:` (`enqueue --file` writes one
such line per bad line); `130` interrupted. Set `CONVEYOR_DEBUG=1` to see the traceback of
an unexpected error.

Durations are written `30s`, `10m`, `2h`, `1d`, `1w`, `1h30m`, or a bare number of
seconds. Times are ISO 8601 with a zone: `2030-01-01T09:00:00Z`, `…+02:00`.
"""


def render(application: typer.Typer = app) -> str:
    group = typer.main.get_command(application)
    ctx = click.Context(group, info_name="conveyor")
    assert isinstance(group, TyperGroup)
    names = group.list_commands(ctx)
    parts = [INTRO, "## Commands\n", _index(group, ctx, names)]
    for name in names:
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            parts.append(_command(name, command))
    return "\n".join(parts).rstrip() + "\n"


def _index(group: TyperGroup, ctx: click.Context, names: list[str]) -> str:
    rows = ["| command | what it does |", "|---|---|"]
    for name in names:
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            rows.append(f"| [`{name}`](#conveyor-{name}) | {_first_line(command.help)} |")
    return "\n".join(rows) + "\n"


def _command(name: str, command: click.Command) -> str:
    params = [p for p in command.params if not getattr(p, "hidden", False)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    usage = " ".join(["conveyor", name, *(_argument_usage(p) for p in arguments), "[OPTIONS]"])
    lines = [f"## conveyor {name}\n", f"```\n{usage}\n```\n", _text(command.help) + "\n"]
    if arguments:
        lines.append("| argument | |\n|---|---|")
        lines += [f"| `{_argument_usage(p)}` | {_cell(getattr(p, 'help', None))} |"
                  for p in arguments]  # fmt: skip
        lines.append("")
    lines.append("| option | |\n|---|---|")
    lines += [f"| {_option_usage(p)} | {_option_help(p)} |" for p in options]
    return "\n".join(lines) + "\n"


def _argument_usage(param: Any) -> str:
    name = param.metavar or str(param.name).upper()
    return name if param.required or name.startswith("[") else f"[{name}]"


def _option_usage(param: Any) -> str:
    names = " / ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    if getattr(param, "is_flag", False):
        return names
    return f"{names} `{param.metavar or str(param.name).upper()}`"


def _option_help(param: Any) -> str:
    text = _cell(getattr(param, "help", None))
    default = param.default
    if param.required:
        text += " Required."
    elif getattr(param, "is_flag", False) and param.secondary_opts:
        text += f" Default: `{param.opts[0] if default else param.secondary_opts[0]}`."
    elif (
        default is not None
        and default is not False
        and param.show_default is not False
        and not callable(default)
        and not isinstance(default, (list, tuple))
    ):
        text += f" Default: `{default}`."
    return text.strip()


def _text(help_text: str | None) -> str:
    return inspect.cleandoc(help_text or "")


def _first_line(help_text: str | None) -> str:
    return _cell(_text(help_text).split("\n\n", 1)[0])


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


if __name__ == "__main__":
    sys.stdout.write(render())
