"""Looking at the queue: ``jobs``, ``show``, ``stats`` (live with ``--watch``), ``info``."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from conveyor.cli.base import PANEL_JOBS, PANEL_WATCH, DbOption, JsonOption, app, fail
from conveyor.cli.claims import (
    ClaimSummary,
    claims_table,
    summarize,
    with_registered,
    workers_table,
)
from conveyor.cli.connection import open_queue
from conveyor.cli.output import (
    console,
    err_console,
    job_details,
    jobs_table,
    print_json,
    say,
    stats_json,
    stats_table,
    task_stats_json,
    task_stats_table,
    titled,
)
from conveyor.queue import MAX_LIST, Queue


@app.command(rich_help_panel=PANEL_JOBS)
def jobs(
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this queue.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            "-s",
            help="Only this status: pending, running, completed, failed, cancelled.",
        ),
    ] = None,
    key: Annotated[str | None, typer.Option("--key", "-k", help="Only jobs with this key.")] = None,
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="Only jobs of this task.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many jobs.")] = 50,
    after: Annotated[
        int | None,
        typer.Option("--after", help="Page on: the last id of the previous page."),
    ] = None,
    oldest_first: Annotated[
        bool, typer.Option("--oldest-first", help="Ascending ids (FIFO order).")
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs, newest first."""
    with open_queue(db) as q:
        found = q.jobs(queue=queue, status=status, key=key, task=task, limit=limit,
                       after=after, newest_first=not oldest_first)  # fmt: skip
        now = q.now()
    if as_json:
        print_json([job.to_dict() for job in found])
        return
    if not found:
        say("no jobs match", style="dim")
        return
    console().print(jobs_table(found, now))
    if len(found) == limit:  # on stderr: a pipe reading the table gets the table alone
        err_console().print(f"(first {limit}; next page: --after {found[-1].id})", style="dim")


@app.command(rich_help_panel=PANEL_JOBS)
def show(
    job_id: Annotated[int, typer.Argument(help="The job's id.", metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Everything about one job: its fields, subscribers, the jobs it waits for and the
    jobs that wait for it."""
    with open_queue(db) as q:
        job = q.get(job_id)
        if job is None:
            raise fail(f"job {job_id} does not exist")
        subscribers = q.subscribers(job_id)
        dependents = q.dependents(job_id)
        depends_on = [q.get(i) or i for i in job.depends_on]
        now = q.now()
    if as_json:
        print_json({**job.to_dict(), "subscribers": subscribers, "dependents": dependents})
    else:
        console().print(
            job_details(job, now, subscribers, depends_on=depends_on, dependents=dependents)
        )


@app.command(rich_help_panel=PANEL_WATCH)
def stats(
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="Only this queue.")] = None,
    by_task: Annotated[
        bool,
        typer.Option(
            "--by-task",
            help="Counts per task instead of per queue.",
        ),
    ] = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C.")] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between refreshes with --watch.", min=0.1)
    ] = 2.0,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Counts per status, per queue (or per task with --by-task). --watch keeps it live
    (with --json: one line a tick)."""
    view = _by_task if by_task else _by_queue
    with open_queue(db) as q:
        if not watch:
            _print_stats(q, queue, as_json, view)
            return
        with interrupt_ends() as stop:  # Ctrl-C is how a watch ends: not an error
            _watch_stats(q, queue, as_json, interval, stop, view)


@dataclass(frozen=True, slots=True)
class _View:
    """How ``stats`` shows the counts: as a JSON document, or as a table."""

    document: Callable[[Queue, str | None], dict[str, Any]]
    table: Callable[[Queue, str | None], RenderableType]


def _task_table(q: Queue, queue: str | None) -> RenderableType:
    per_task = q.task_stats(queue)
    return task_stats_table(per_task) if per_task else Text("no jobs yet", style="dim")


_by_queue = _View(
    document=lambda q, queue: stats_json(q.queue_stats(queue)),
    table=lambda q, queue: stats_table(q.queue_stats(queue), q.now()),
)
_by_task = _View(
    document=lambda q, queue: {"queue": queue, **task_stats_json(q.task_stats(queue))},
    table=_task_table,
)


def _print_stats(q: Queue, queue: str | None, as_json: bool, view: _View) -> None:
    if as_json:
        print_json(view.document(q, queue))
    else:
        console().print(view.table(q, queue))


def _watch_stats(
    q: Queue, queue: str | None, as_json: bool, interval: float, stop: threading.Event,
    view: _View,
) -> None:  # fmt: skip
    if as_json:
        while not stop.is_set():  # JSON lines: one compact document per tick
            sys.stdout.write(json.dumps(view.document(q, queue), default=str) + "\n")
            sys.stdout.flush()
            stop.wait(interval)
        return
    out = console()
    if not out.is_terminal:
        while not stop.is_set():
            now = q.now()
            out.print(f"{now.isoformat(timespec='seconds')}")
            out.print(view.table(q, queue))
            stop.wait(interval)
        return
    with Live(console=out, auto_refresh=False) as live:
        while not stop.is_set():
            now = q.now()
            footer = Text(f"{q.url} · {now:%H:%M:%S} UTC · Ctrl-C to stop", style="dim")
            live.update(Group(view.table(q, queue), footer), refresh=True)
            stop.wait(interval)


@contextmanager
def interrupt_ends() -> Iterator[threading.Event]:
    """Ctrl-C sets the event instead of raising wherever the main thread happens to be
    (inside a database call, an interrupt can leave the connection pool unable to
    close). A second Ctrl-C interrupts at once."""
    stop = threading.Event()

    def first(signum: int, frame: FrameType | None) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


@app.command(rich_help_panel=PANEL_WATCH)
def info(db: DbOption = None, as_json: JsonOption = False) -> None:
    """One screen: the database, its queues, the workers (idle ones too) and their claims."""
    with open_queue(db) as q:
        now = q.now()
        per_queue = q.queue_stats()
        running = q.jobs(status="running", limit=MAX_LIST)
        version = q.schema_version()
        registered = q.workers()
    busy, claims = summarize(running, now)
    workers = with_registered(busy, registered)
    truncated = len(running) == MAX_LIST
    if as_json:
        print_json({
            "database": q.url,
            "dialect": q.dialect,
            "schema_version": version,
            "listen_notify": q.listens,
            "now": now.isoformat(),
            "stats": stats_json(per_queue),
            "workers": [w.to_dict() for w in workers],
            "claims": [c.to_dict() for c in claims],
            "running_truncated": truncated,
        })  # fmt: skip
        return
    out = console()
    out.print(Text(f"{q.url}", style="bold") + Text(
        f"  ({q.dialect}, schema v{version}, database clock {now:%Y-%m-%d %H:%M:%S} UTC)",
        style="dim",
    ))  # fmt: skip
    out.print()
    width = out.width
    queues = stats_table(per_queue, now, width=width) if per_queue else Text("no jobs yet")
    out.print(titled("queues", queues))
    table = workers_table(workers, now, width=width) if workers else Text("none running")
    out.print(titled("workers", table))
    if claims:
        out.print(titled("claims", claims_table(claims, now, width=width)))
    _hints(claims, truncated)


def _hints(claims: list[ClaimSummary], truncated: bool) -> None:
    expired = [c for c in claims if c.expired]
    if expired:
        say(
            f"{len(expired)} claim(s) past their lease: a running worker recovers them, or "
            "'conveyor release CLAIM' / 'conveyor reset-claims --older-than 10m' does it now",
            style="yellow",
        )
    if truncated:
        say(f"(workers and claims drawn from the first {MAX_LIST} running jobs)", style="dim")
