"""``conveyor worker``: run an app's tasks until stopped (or, with --burst, until idle)."""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import Annotated

import typer

from conveyor import logformat
from conveyor.cli.base import WORKER_DB_HELP, app
from conveyor.cli.waiting import still_waiting
from conveyor.errors import ConfigurationError
from conveyor.maintenance import Retention
from conveyor.worker.loader import load_app

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_LEVELS = ("debug", "info", "warning", "error")
_log = logging.getLogger("conveyor.worker")


@app.command()
def worker(
    app_spec: Annotated[
        str,
        typer.Option(
            "--app", help="The conveyor.App to run, as module:attribute.", show_default=False
        ),
    ],
    db: Annotated[
        str | None, typer.Option("--db", help=WORKER_DB_HELP, show_default=False, metavar="URL")
    ] = None,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            help="Work through a conveyor HTTP server at this URL instead of a database.",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="CONVEYOR_TOKEN",
            help="Bearer token for --server (a worker or admin token; or $CONVEYOR_TOKEN).",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Tasks running at once.", min=1)] = 10,
    prefetch: Annotated[
        int | None,
        typer.Option(
            help="Jobs claimed ahead of free slots (default: --concurrency, more for short tasks).",
            min=0,
            show_default=False,
        ),
    ] = None,
    queues: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated queues (default: those of the app's tasks).", show_default=False
        ),
    ] = None,
    lease: Annotated[
        float, typer.Option(help="Seconds a claim lasts without a heartbeat.", min=0.001)
    ] = 30.0,
    burst: Annotated[bool, typer.Option(help="Exit once no job is claimable or running.")] = False,
    burst_give_up: Annotated[
        float,
        typer.Option(
            help="With --burst: seconds of failed claims (database or server down) before "
            "the worker gives up and exits 1.",
            min=0.001,
            metavar="S",
        ),
    ] = 30.0,
    grace: Annotated[
        float, typer.Option(help="Seconds running tasks may finish after SIGTERM/SIGINT.", min=0)
    ] = 30.0,
    retain: Annotated[
        list[str] | None,
        typer.Option(
            help="Prune final jobs after an age: STATUS=AGE, as in completed=7d (repeatable).",
            show_default=False,
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
    log_format: Annotated[
        str, typer.Option(help="text, or json: one JSON object per line, for log shippers.")
    ] = "text",
) -> None:
    """Run the tasks of an app. SIGTERM or Ctrl-C stops claiming, lets running tasks
    finish within --grace, and releases the rest; a second signal exits at once."""
    if log_level.lower() not in _LEVELS:
        raise ConfigurationError(
            f"--log-level: expected one of {', '.join(_LEVELS)}, got {log_level!r}"
        )
    if log_format.lower() not in logformat.FORMATS:
        raise ConfigurationError(f"--log-format: expected text or json, got {log_format!r}")
    logformat.configure(log_level, log_format.lower())
    application = load_app(app_spec)
    if db is not None and server is not None:
        raise ConfigurationError("--db and --server: give one or the other, not both")
    if server is not None:
        from conveyor.client import RemoteQueue

        application.bind(RemoteQueue(server, token))  # type: ignore[arg-type]
    elif db is not None:  # the command line beats the environment and the app's own URL
        import conveyor

        application.bind(conveyor.connect(db, use_env=False))
    names = [n.strip() for n in queues.split(",") if n.strip()] if queues else None
    if queues is not None and not names:
        raise ConfigurationError(f"--queues: expected comma-separated names, got {queues!r}")
    stats = application.run_worker(
        queues=names,
        concurrency=concurrency,
        prefetch=prefetch,
        lease=lease,
        burst=burst,
        burst_give_up=burst_give_up,
        grace=grace,
        retention=_retention(retain or []),
    )
    if burst:
        # In JSON, every line on stderr is a log record: the closing words are too.
        say = _log.info if log_format.lower() == "json" else partial(typer.echo, err=True)
        say(stats.summary() or "nothing to do")
        waiting = still_waiting(application.queue, names or application.queues)
        if waiting:
            say(waiting)


def _retention(rules: list[str]) -> Retention | None:
    if not rules:
        return None
    ages: dict[str, float | None] = {"completed": None, "failed": None, "cancelled": None}
    for rule in rules:
        status, _, age = rule.partition("=")
        match = _DURATION.match(age.strip().lower())
        if status.strip() not in ages or match is None:
            raise ConfigurationError(
                f"--retain: expected STATUS=AGE with STATUS completed, failed or cancelled and "
                f"AGE like 90s, 30m, 12h or 7d, got {rule!r}"
            )
        ages[status.strip()] = float(match.group(1)) * _UNIT[match.group(2)]
    return Retention(**ages)
