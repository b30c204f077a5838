"""Operating the queue: migrate, retry, cancel, release a claim, reset old claims, prune."""

from __future__ import annotations

from typing import Annotated

import typer

from conveyor.cli.base import PANEL_ADMIN, PANEL_JOBS, DbOption, JsonOption, app, fail, usage
from conveyor.cli.connection import open_queue
from conveyor.cli.durations import describe_duration, parse_duration
from conveyor.cli.output import err_console, print_json, progress_bar, say
from conveyor.errors import InvalidTransition
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
        print_json({"retried": len(retried), "ids": retried, "skipped": skipped})
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
    job_id: Annotated[int, typer.Argument(help="The job to cancel.", metavar="ID")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a pending or running job (a running task's later reports are refused)."""
    with open_queue(db) as q:
        job = q.cancel(job_id)
    if as_json:
        print_json(job.to_dict())
    else:
        say(f"job {job.id} cancelled")


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
        print_json({"claim_id": claim_id, "reset_count": count})
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
        print_json({"reset_count": count})
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
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete final jobs that finished longer ago than --older-than."""
    age = parse_duration(older_than)
    statuses = [s.strip() for value in status or ["completed"] for s in value.split(",")]
    with open_queue(db) as q, err_console().status("pruning…"):
        removed = q.prune(older_than=age, statuses=[s for s in statuses if s])
    if as_json:
        print_json({"removed_count": removed})
    else:
        what = ", ".join(statuses)
        span = describe_duration(age.total_seconds())
        say(f"removed {removed} job(s) ({what}) finished more than {span} ago")
