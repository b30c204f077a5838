"""Operating the queue: migrate, retry, cancel, release a claim, reset old claims, prune.

Commands that act on many jobs answer ``--json`` with ``{"count": N, …}``: N jobs acted
on (or, with ``prune --dry-run``, that would be), and what else the command knows."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from typing import Annotated

import typer

from conveyor import crypto
from conveyor.cli.base import (
    EXIT_ERROR,
    PANEL_ADMIN,
    PANEL_JOBS,
    DbOption,
    JsonOption,
    app,
    fail,
    one_line,
    usage,
)
from conveyor.cli.connection import open_queue
from conveyor.cli.durations import describe_duration, parse_duration
from conveyor.cli.output import err_console, print_json, progress_bar, say
from conveyor.errors import ConfigurationError, InvalidTransition, JobNotFound
from conveyor.maintenance.reencrypt import reencrypt as reencrypt_all
from conveyor.ops.admin import prune as checked_prune
from conveyor.queue import Queue

_PAGE = 500


@app.command(rich_help_panel=PANEL_ADMIN)
def migrate(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Create or upgrade the schema."""
    with open_queue(db, create=True, migrate=False) as q:
        applied = q.migrate()
        version = q.schema_version()
    if as_json:
        print_json({"database": q.url, "schema_version": version, "applied": applied})
    else:
        say(f"schema at version {version} ({len(applied)} migration(s) applied) on {q.url}")


@app.command(rich_help_panel=PANEL_JOBS)
def retry(
    job_id: Annotated[int | None, typer.Argument(help="The job to retry.", metavar="[ID]")] = None,
    all_failed: Annotated[
        bool, typer.Option("--all-failed", help="Retry every failed job (of --queue).")
    ] = False,
    queue: Annotated[
        str | None, typer.Option("--queue", "-q", help="With --all-failed: only this queue.")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Put a final job (failed, cancelled, completed) back to pending, attempts reset."""
    if (job_id is None) == (not all_failed):
        raise usage("give one job ID, or --all-failed")
    if queue is not None and not all_failed:
        raise usage("--queue goes with --all-failed")
    with open_queue(db) as q:
        if job_id is not None:
            job = q.retry(job_id)
            if as_json:
                print_json(job.to_dict())
            else:
                say(f"job {job.id} is pending again (attempts reset)")
            return
        retried, skipped = _retry_failed(q, queue)
    if as_json:
        print_json({"count": len(retried), "ids": retried, "skipped": skipped})
        return
    where = f" in queue {queue}" if queue else ""
    say(f"retried {len(retried)} failed job(s){where}")
    for item in skipped:
        say(f"  skipped job {item['id']}: {item['reason']}", style="yellow")


def _retry_failed(q: Queue, queue: str | None) -> tuple[list[int], list[dict[str, object]]]:
    retried: list[int] = []
    skipped: list[dict[str, object]] = []
    cursor = 0
    with progress_bar() as bar:
        task = bar.add_task("retry failed jobs", total=q.stats(queue).failed)
        while True:
            page = q.jobs(queue=queue, status="failed", limit=_PAGE, after=cursor)
            if not page:
                break
            for job in page:
                try:
                    retried.append(q.retry(job.id).id)
                except InvalidTransition as exc:  # another job has its key, or it moved on
                    skipped.append({"id": job.id, "reason": str(exc)})
                bar.advance(task)
            cursor = page[-1].id
    return retried, skipped


@app.command(rich_help_panel=PANEL_JOBS)
def cancel(
    job_ids: Annotated[list[int], typer.Argument(help="The jobs to cancel.", metavar="ID...")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel pending or running jobs (a running task's later reports are refused).

    Each job is cancelled on its own: one that cannot be (unknown, or already final) is
    reported and the others are still cancelled; the exit code is then 1."""
    cancelled: list[int] = []
    refused: list[dict[str, object]] = []
    with open_queue(db) as q:
        for job_id in dict.fromkeys(job_ids):
            try:
                cancelled.append(q.cancel(job_id).id)
            except (JobNotFound, InvalidTransition) as exc:
                refused.append({"id": job_id, "error": str(exc)})
    if as_json:
        print_json({"count": len(cancelled), "ids": cancelled, "refused": refused})
    else:
        for job_id in cancelled:
            say(f"job {job_id} cancelled")
        for item in refused:
            typer.echo(f"error: {one_line(item['error'])}", err=True)
    if refused:
        raise typer.Exit(EXIT_ERROR)


@app.command(rich_help_panel=PANEL_ADMIN)
def release(
    claim_id: Annotated[str, typer.Argument(help="The claim id.", metavar="CLAIM")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Put a claim's running jobs back to pending (its worker's later writes are refused)."""
    with open_queue(db) as q:
        count = q.release(claim_id)
    if count == 0:
        raise fail(f"claim {claim_id} holds no running jobs (unknown, finished or already reset)")
    if as_json:
        print_json({"count": count, "claim_id": claim_id})
    else:
        say(f"released {count} job(s) of claim {claim_id}: pending again")


@app.command("reset-claims", rich_help_panel=PANEL_ADMIN)
def reset_claims(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Claims made longer ago than this (10m, 2h, 1d).",
            metavar="DURATION",
        ),
    ],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Put back to pending every running job claimed longer ago than --older-than."""
    age = parse_duration(older_than)
    with open_queue(db) as q:
        count = q.reset_claims(age)
    if as_json:
        print_json({"count": count, "older_than_seconds": age.total_seconds()})
    else:
        say(f"reset {count} job(s) claimed more than {describe_duration(age.total_seconds())} ago")


@app.command(rich_help_panel=PANEL_ADMIN)
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Jobs finished longer ago than this (7d, 12h).",
            metavar="DURATION",
        ),
    ],
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status", "-s", help="Final status to delete (repeat, or a,b); default completed."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count the jobs it would delete; delete none.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Delete without asking (scripts, cron).")
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete final jobs that finished longer ago than --older-than.

    On a terminal it counts them and asks first; elsewhere (a script, cron) it needs
    --yes. --dry-run only counts."""
    age = parse_duration(older_than)
    statuses = [s.strip() for value in status or ["completed"] for s in value.split(",")]
    statuses = [s for s in statuses if s]
    checked_prune(older_than=age, statuses=statuses)  # bad statuses: refused before asking
    asking = not (yes or dry_run)
    if asking and not sys.stdin.isatty():
        raise usage("prune deletes jobs: add --yes to confirm (or --dry-run to count them)")
    what = ", ".join(statuses)
    span = describe_duration(age.total_seconds())
    with open_queue(db) as q:
        if dry_run or asking:
            count = _count_prunable(q, age, statuses)
            if dry_run:
                _pruned(count, statuses, age, as_json, dry_run=True)
                return
            if not typer.confirm(
                f"delete {count} job(s) ({what}) finished more than {span} ago?", err=True
            ):
                raise fail("nothing deleted")
        with err_console().status("pruning…"):
            removed = q.prune(older_than=age, statuses=statuses)
    _pruned(removed, statuses, age, as_json, dry_run=False)


def _pruned(
    count: int, statuses: list[str], age: timedelta, as_json: bool, *, dry_run: bool
) -> None:
    if as_json:
        print_json({"count": count, "dry_run": dry_run, "statuses": statuses,
                    "older_than_seconds": age.total_seconds()})  # fmt: skip
        return
    verb = "would remove" if dry_run else "removed"
    span = describe_duration(age.total_seconds())
    say(f"{verb} {count} job(s) ({', '.join(statuses)}) finished more than {span} ago")


def _count_prunable(q: Queue, age: timedelta, statuses: list[str]) -> int:
    """The jobs ``prune`` would delete now: final, finished at or before now - age. A job
    finished then was created before then too, which narrows the pages read."""
    cutoff: datetime = q.now() - age
    count = 0
    for status in statuses:
        cursor = None
        while True:
            page = q.jobs(status=status, created_before=cutoff + timedelta(seconds=1),
                          limit=_PAGE, after=cursor)  # fmt: skip
            count += sum(1 for j in page if j.finished_at is not None and j.finished_at <= cutoff)
            if len(page) < _PAGE:
                break
            cursor = page[-1].id
    return count


@app.command(rich_help_panel=PANEL_ADMIN)
def reencrypt(
    batch: Annotated[
        int, typer.Option("--batch", min=1, max=10_000, help="Jobs per transaction.")
    ] = 500,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Seal encrypted payloads and results again with the first key of
    $CONVEYOR_ENCRYPTION_KEYS (after putting a new key first), so that older keys can
    be dropped."""
    keys = crypto.keys_from_env()
    if not keys:
        raise fail(f"no keys: set {crypto.ENV_KEYS} to comma-separated Fernet keys, new first")
    try:
        keyring = crypto.Keyring(keys)
    except ConfigurationError as exc:
        raise fail(str(exc)) from None
    with open_queue(db) as q:
        done = reencrypt_all(q, keyring, batch=batch)
    if as_json:
        print_json({"count": done.jobs, "values": done.values, "unopened": done.unopened})
        return
    say(f"re-encrypted {done.values} value(s) in {done.jobs} job(s)")
    if done.unopened:
        err_console().print(
            f"{done.unopened} value(s) were left as they are: none of the keys opens them"
        )
