"""Flow control and what runs the work: pause and resume queues, set their limits, list
registered workers and periodic schedules."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from conveyor.cli.base import PANEL_ADMIN, PANEL_WATCH, DbOption, JsonOption, app, usage
from conveyor.cli.connection import open_queue
from conveyor.cli.output import console, print_json, say, when
from conveyor.cli.tables import Cell, Column, fitted
from conveyor.codec import to_json
from conveyor.errors import InvalidArgument
from conveyor.info import QueueSettings, Rate

QueueArg = Annotated[str, typer.Argument(help="The queue.", metavar="QUEUE")]


@app.command(rich_help_panel=PANEL_ADMIN)
def pause(queue: QueueArg, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Stop every worker claiming from QUEUE until it is resumed; running jobs finish."""
    with open_queue(db) as q:
        settings = q.pause(queue)
    _settled(settings, as_json, f"queue {queue} is paused: no new claims until resumed")


@app.command(rich_help_panel=PANEL_ADMIN)
def resume(queue: QueueArg, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Let workers claim from a paused QUEUE again."""
    with open_queue(db) as q:
        settings = q.resume(queue)
    _settled(settings, as_json, f"queue {queue} is running again")


@app.command(rich_help_panel=PANEL_ADMIN)
def limits(
    queue: Annotated[
        str | None, typer.Argument(help="The queue (none: list every queue's).", metavar="[QUEUE]")
    ] = None,
    max_running: Annotated[
        int | None,
        typer.Option("--max-running", help="Jobs of the queue running at once, on all workers."),
    ] = None,
    group_max_running: Annotated[
        int | None,
        typer.Option("--group-max-running", help="The same, for each group of the queue."),
    ] = None,
    rate: Annotated[
        str | None, typer.Option("--rate", help="Starts per window, as in 10/1s or 100/m.")
    ] = None,
    group_rate: Annotated[
        str | None, typer.Option("--group-rate", help="The same, for each group.")
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove every limit of QUEUE.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show queues' flow control, or set QUEUE's limits (the options given replace all of
    them; --clear removes them)."""
    changing = clear or any(v is not None for v in (max_running, group_max_running, rate,
                                                      group_rate))  # fmt: skip
    if changing and queue is None:
        raise usage("name the QUEUE whose limits to set")
    if clear and any(v is not None for v in (max_running, group_max_running, rate, group_rate)):
        raise usage("--clear takes no limits with it")
    try:
        queue_rate = None if rate is None else Rate.parse(rate, "--rate")
        each_rate = None if group_rate is None else Rate.parse(group_rate, "--group-rate")
    except InvalidArgument as exc:
        raise usage(str(exc)) from None
    with open_queue(db) as q:
        if changing:
            assert queue is not None
            settings = q.set_limits(
                queue, max_running=max_running, group_max_running=group_max_running,
                rate=queue_rate, group_rate=each_rate,
            )  # fmt: skip
            _settled(settings, as_json, f"queue {queue}: {_describe(settings)}")
            return
        found = q.queue_settings(queue)
    if as_json:
        print_json({"queues": to_json(found)})
        return
    if not found:
        say("no queue has flow control" if queue is None else f"queue {queue} has no limits")
        return
    rows: list[dict[str, Cell]] = [
        {"queue": name, "paused": "yes" if settings.paused else "no",
         "limits": _describe(settings, paused=False)}
        for name, settings in found.items()
    ]  # fmt: skip
    columns = (Column("queue", free=True), Column("paused"), Column("limits", free=True, wrap=True))
    console().print(fitted(columns, rows, console().width))


@app.command(rich_help_panel=PANEL_WATCH)
def workers(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Registered workers, idle ones too: where they run, their queues, jobs running."""
    with open_queue(db) as q:
        found = q.workers()
        now = q.now()
    if as_json:
        print_json({"workers": to_json(found)})
        return
    if not found:
        say("no worker is registered (none running, or all stopped)")
        return
    rows: list[dict[str, Cell]] = [
        {"worker": w.name, "queues": ",".join(w.queues), "running": f"{w.running}/{w.concurrency}",
         "last seen": when(now, w.last_seen_at), "started": when(now, w.started_at),
         "version": w.version}
        for w in found
    ]  # fmt: skip
    columns = (
        Column("worker", free=True),
        Column("queues", free=True),
        Column("running", right=True),
        Column("last seen", short="seen"),
        Column("started", optional=True),
        Column("version", optional=True),
    )
    console().print(fitted(columns, rows, console().width))


@app.command(rich_help_panel=PANEL_WATCH)
def schedules(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Periodic schedules: the task each enqueues, its last and next run."""
    with open_queue(db) as q:
        found = q.schedules()
        now = q.now()
    if as_json:
        print_json({"schedules": [{**to_json(s), "last_run": to_json(s.last_run)} for s in found]})
        return
    if not found:
        say("no periodic schedule is declared (workers declare their app's when they start)")
        return
    rows: list[dict[str, Cell]] = [
        {"schedule": s.name, "task": s.task, "queue": s.queue, "when": s.spec,
         "last run": _moment(now, s.last_run), "next run": _moment(now, s.next_slot)}
        for s in found
    ]  # fmt: skip
    columns = (
        Column("schedule", free=True),
        Column("task", free=True),
        Column("queue", free=True),
        Column("when", free=True),
        Column("last run", short="last"),
        Column("next run", short="next"),
    )
    console().print(fitted(columns, rows, console().width))


def _moment(now: datetime, moment: datetime | None) -> str:
    return "-" if moment is None else when(now, moment)


def _settled(settings: QueueSettings, as_json: bool, message: str) -> None:
    if as_json:
        print_json(to_json(settings))
    else:
        say(message)


def _describe(settings: QueueSettings, *, paused: bool = True) -> str:
    parts = ["paused"] if paused and settings.paused else []
    if settings.max_running is not None:
        parts.append(f"at most {settings.max_running} running")
    if settings.group_max_running is not None:
        parts.append(f"at most {settings.group_max_running} running per group")
    if settings.rate is not None:
        parts.append(f"{settings.rate.limit} starts per {settings.rate.per:g}s")
    if settings.group_rate is not None:
        parts.append(
            f"{settings.group_rate.limit} starts per {settings.group_rate.per:g}s per group"
        )
    return ", ".join(parts) or "no limits"
