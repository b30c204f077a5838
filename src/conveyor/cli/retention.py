"""Retention policies: ``conveyor retention set``, ``list`` and ``clear``."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from conveyor.cli.base import PANEL_ADMIN, DbOption, JsonOption, app, usage
from conveyor.cli.connection import open_queue
from conveyor.cli.durations import parse_duration
from conveyor.cli.output import console, print_json, say
from conveyor.cli.tables import Cell, Column, fitted
from conveyor.codec import to_json
from conveyor.info import RetentionPolicy
from conveyor.ops.retention import keep_text

FOR_EVER = ("forever", "for-ever", "never")


class Action(StrEnum):
    set = "set"
    list = "list"
    clear = "clear"


@app.command(rich_help_panel=PANEL_ADMIN)
def retention(
    action: Annotated[
        Action, typer.Argument(help="set a policy, list them, or clear one.", metavar="ACTION")
    ],
    status: Annotated[
        str | None,
        typer.Option("--status", "-s", help="completed, failed or cancelled."),
    ] = None,
    keep: Annotated[
        str | None,
        typer.Option(
            "--keep",
            help="How long jobs are kept after they finished (7d, 12h), or 'forever'.",
            metavar="DURATION",
        ),
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", "-q", help="Only this queue's jobs (none: any).")
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="Only this task's jobs (none: any).")
    ] = None,
    archive: Annotated[
        str | None,
        typer.Option(
            "--archive",
            help="Where pruned jobs' records go first: task:NAME or file:PATH.",
            metavar="TARGET",
        ),
    ] = None,
    retire_keys: Annotated[
        bool,
        typer.Option(
            "--retire-keys", help="Pruned jobs' keys stay taken (as if the job were there)."
        ),
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Retention policies: how long final jobs are kept, per status, queue and task.

    `retention set --status S --keep D` writes one (replacing the one for the same
    status, queue and task); `retention list` shows them; `retention clear` deletes the
    one of --status, --queue and --task (every status's without --status). A job's
    most specific policy wins: queue and task, then task, then queue, then the
    status's default. Workers prune what the policies let go, in small batches."""
    if action is not Action.set and (keep is not None or archive is not None or retire_keys):
        raise usage(f"retention {action.value} takes no --keep, --archive or --retire-keys")
    if action is Action.list and (status or queue or task):
        raise usage("retention list takes no --status, --queue or --task")
    if action is Action.set:
        if status is None or keep is None:
            raise usage("retention set needs --status and --keep")
        kept = None if keep.strip().lower() in FOR_EVER else parse_duration(keep, "--keep")
        with open_queue(db) as q:
            policy = q.set_retention(
                status, kept, queue=queue, task=task, archive=archive, retire_keys=retire_keys
            )
        if as_json:
            print_json(to_json(policy))
        else:
            say(_describe(policy))
        return
    with open_queue(db) as q:
        if action is Action.clear:
            removed = q.clear_retention(status=status, queue=queue, task=task)
            if as_json:
                print_json({"count": removed})
            else:
                say(f"{removed} polic{'y' if removed == 1 else 'ies'} cleared")
            return
        policies = q.retention_policies()
    if as_json:
        print_json({"policies": to_json(policies)})
        return
    if not policies:
        say("no retention policy: finished jobs are kept until pruned")
        return
    rows: list[dict[str, Cell]] = [
        {"status": p.status, "queue": p.queue or "any", "task": p.task or "any",
         "keep": keep_text(p.keep_seconds), "archive": p.archive or "",
         "keys": "retired" if p.retire_keys else ""}
        for p in policies
    ]  # fmt: skip
    columns = (
        Column("status"), Column("queue", free=True), Column("task", free=True), Column("keep"),
        Column("archive", free=True), Column("keys"),
    )  # fmt: skip
    console().print(fitted(columns, rows, console().width))


def _describe(p: RetentionPolicy) -> str:
    scope = ", ".join(
        part for part in (p.queue and f"queue {p.queue}", p.task and f"task {p.task}") if part
    )
    text = f"{p.status} jobs ({scope or 'any queue and task'}): kept {keep_text(p.keep_seconds)}"
    if p.archive:
        text += f", archived to {p.archive}"
    if p.retire_keys:
        text += ", keys retired"
    return text
