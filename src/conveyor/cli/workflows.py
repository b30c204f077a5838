"""Workflow runs: ``workflows`` (list), ``workflow ID`` (one run and its steps),
``cancel-workflow ID`` and ``retry-workflow ID``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.console import Group
from rich.text import Text

from conveyor.cli.base import PANEL_ADMIN, PANEL_JOBS, DbOption, JsonOption, app
from conveyor.cli.connection import open_queue
from conveyor.cli.output import (
    console,
    err_console,
    first_line,
    print_json,
    say,
    short,
    status_text,
    when,
)
from conveyor.cli.tables import Cell, Column, fitted
from conveyor.job import Status
from conveyor.workflow import WorkflowRun, WorkflowStatus, WorkflowSummary

RunId = Annotated[int, typer.Argument(help="The run's id.", metavar="ID", min=1)]
_RUN_STYLES = {
    WorkflowStatus.RUNNING: "cyan",
    WorkflowStatus.COMPLETED: "green",
    WorkflowStatus.FAILED: "red",
    WorkflowStatus.CANCELLED: "yellow",
}
_RUN_COLUMNS = (
    Column("id", right=True),
    Column("label", free=True, cap=40),
    Column("status"),
    Column("steps", right=True),
    Column("done", right=True),
    Column("failed", right=True),
    Column("created"),
)
_STEP_COLUMNS = (
    Column("id", right=True),
    Column("step", free=True, cap=30),
    Column("task", free=True, cap=32),
    Column("status"),
    Column("tries", right=True),
    Column("after", free=True, cap=30, optional=True),
    Column("error / result", short="outcome", free=True, cap=40, optional=True),
)


def _run_status(status: WorkflowStatus) -> Text:
    return Text(str(status), style=_RUN_STYLES[status])


def _summary_row(run: WorkflowSummary | WorkflowRun, now: datetime) -> dict[str, Cell]:
    return {
        "id": str(run.id),
        "label": run.label,
        "status": _run_status(run.status),
        "steps": str(run.total),
        "done": str(run.counts["completed"]),
        "failed": str(run.counts["failed"] + run.counts["cancelled"]),
        "created": when(now, run.created_at),
    }


@app.command(rich_help_panel=PANEL_JOBS)
def workflows(
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many runs.")] = 50,
    after: Annotated[
        int | None, typer.Option("--after", help="Page on: the last id of the previous page.")
    ] = None,
    oldest_first: Annotated[bool, typer.Option("--oldest-first", help="Ascending ids.")] = False,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="Only runs in this status: running, completed, failed, cancelled."
        ),
    ] = None,
    label: Annotated[str | None, typer.Option("--label", help="Only runs with this label.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List workflow runs, newest first, with their status and counts."""
    with open_queue(db) as q:
        runs = q.workflows(
            limit=limit, after=after, newest_first=not oldest_first, status=status, label=label
        )
        now = q.now()
    if as_json:
        print_json([r.to_dict() for r in runs])
        return
    if not runs:
        say("no workflow runs", style="dim")
        return
    rows = [_summary_row(r, now) for r in runs]
    console().print(fitted(_RUN_COLUMNS, rows, console().width))
    if len(runs) == limit:
        err_console().print(f"(first {limit}; next page: --after {runs[-1].id})", style="dim")


def _show(run: WorkflowRun, now: datetime, as_json: bool) -> None:
    if as_json:
        print_json(run.to_dict())
        return
    names = {j.id: name for name, j in run.jobs.items()}
    rows: list[dict[str, Cell]] = []
    for name, job in run.jobs.items():
        outcome = job.result if job.status == Status.COMPLETED else first_line(job.error)
        rows.append(
            {
                "id": str(job.id),
                "step": name,
                "task": job.task,
                "status": status_text(job.status),
                "tries": f"{job.attempts}/{job.max_attempts}",
                "after": ", ".join(names.get(d, str(d)) for d in job.depends_on),
                "error / result": short(outcome, 40),
            }
        )
    counts = ", ".join(f"{n} {s}" for s, n in run.counts.items() if n)
    head = Text.assemble(
        (f"workflow {run.id} ", "bold"), (run.label, "bold"), "  ", _run_status(run.status),
        f"  {counts or 'no steps'}  created {when(now, run.created_at)}",
    )  # fmt: skip
    console().print(Group(head, fitted(_STEP_COLUMNS, rows, console().width)))


@app.command(rich_help_panel=PANEL_JOBS)
def workflow(run_id: RunId, db: DbOption = None, as_json: JsonOption = False) -> None:
    """One workflow run: its status, counts and steps."""
    with open_queue(db) as q:
        run = q.workflow(run_id)
        now = q.now()
    _show(run, now, as_json)


@app.command("cancel-workflow", rich_help_panel=PANEL_ADMIN)
def cancel_workflow(run_id: RunId, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Cancel every step of a run that is not final yet."""
    with open_queue(db) as q:
        run = q.cancel_workflow(run_id)
        now = q.now()
    _show(run, now, as_json)


@app.command("retry-workflow", rich_help_panel=PANEL_ADMIN)
def retry_workflow(run_id: RunId, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Retry a run's failed steps and the steps after them that already ended."""
    with open_queue(db) as q:
        run = q.retry_workflow(run_id)
        now = q.now()
    _show(run, now, as_json)
