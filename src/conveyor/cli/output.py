"""How the CLI shows things: rich tables on a terminal (plain text when piped; rich
drops colours by itself, and honours NO_COLOR), and JSON for scripts."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from conveyor.cli.durations import describe_duration
from conveyor.cli.tables import Cell, Column, fitted
from conveyor.job import ErrorKind, Job, Stats, Status, sum_stats

STATUS_STYLES = {
    Status.PENDING: "yellow",
    Status.RUNNING: "cyan",
    Status.COMPLETED: "green",
    Status.FAILED: "bold red",
    Status.CANCELLED: "magenta",
}
STATUS_ORDER = [Status.PENDING, Status.RUNNING, Status.COMPLETED, Status.FAILED, Status.CANCELLED]


# Width for tables written to a pipe or a file: there is no terminal to fit, and rich's
# fallback of 80 columns would cut the headers short. $COLUMNS still wins.
PIPE_WIDTH = 160


@cache
def console() -> Console:
    """Tables and messages: stdout."""
    return _console(stderr=False)


@cache
def err_console() -> Console:
    """Progress bars and live views: stderr, so stdout stays clean for pipes."""
    return _console(stderr=True)


def _console(*, stderr: bool) -> Console:
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(stderr=stderr, highlight=False, width=width)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def say(message: str, style: str | None = None) -> None:
    console().print(message, style=style, markup=False)


def status_text(status: Status | str) -> Text:
    return Text(str(status), style=STATUS_STYLES.get(Status(status), ""))


def when(now: datetime, moment: datetime | None) -> str:
    """``3m ago`` or ``in 20s`` against the database clock."""
    if moment is None:
        return "-"
    delta = (moment - now).total_seconds()
    if abs(delta) < 1:
        return "now"
    text = describe_duration(delta)
    return f"in {text}" if delta > 0 else f"{text} ago"


def short(value: Any, width: int = 40) -> str:
    """A JSON value on one line, cut to ``width`` characters."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def first_line(text: str | None) -> str | None:
    """An error's first line: the message, without the traceback stored after it."""
    if not text or not text.strip():
        return None
    return text.strip().splitlines()[0]


def progress_cell(job: Job) -> str:
    p = job.progress
    if p.total is None and p.completed is None:
        return ""
    done = p.completed or 0
    total = "?" if p.total is None else str(p.total)
    failed = f" ({p.failed} failed)" if p.failed else ""
    return f"{done}/{total}{failed}"


def jobs_table(jobs: Iterable[Job], now: datetime, *, width: int | None = None) -> Table:
    """Jobs as rows. The id, status, tries and times always show in full; the free-text
    columns share what is left of ``width`` (default: the console's), queue and task
    names whole when they fit; when room is short, the key, progress and outcome
    columns are left out if no job has one, then the key, the progress and the creation
    time go (``conveyor show`` has every field)."""
    rows = [_job_row(job, now) for job in jobs]
    return fitted(_JOB_COLUMNS, rows, width or console().width)


_JOB_COLUMNS = (
    Column("id", right=True),
    Column("queue", free=True, cap=20, whole=True),
    Column("task", free=True, cap=32, whole=True),
    Column("status"),
    Column("tries", right=True),
    Column("key", free=True, cap=20, optional=True, drop=3),
    Column("progress", optional=True, drop=2),
    Column("created", drop=1),
    Column("error / result", short="outcome", free=True, cap=40, optional=True, least=16),
)


def _job_row(job: Job, now: datetime) -> dict[str, Cell]:
    # A completed job may still carry the error of an earlier attempt: show its result.
    outcome = job.result if job.status == Status.COMPLETED else first_line(job.error)
    return {
        "id": str(job.id),
        "queue": job.queue,
        "task": job.task,
        "status": status_text(job.status),
        "tries": f"{job.attempts}/{job.max_attempts}",
        "key": job.key or "",
        "progress": progress_cell(job),
        "created": when(now, job.created_at),
        "error / result": short(outcome, 40),
    }


def job_details(
    job: Job,
    now: datetime,
    subscribers: list[str],
    *,
    depends_on: Sequence[Job | int] = (),
    dependents: Sequence[int] = (),
) -> RenderableType:
    """Every field of ``job``; ``depends_on``: the jobs it waits for (a job, or the id
    of one that is gone), ``dependents``: the ids of the jobs that wait for it."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    rows: list[tuple[str, Any]] = [
        ("job", Text(f"{job.id}  ") + status_text(job.status) + Text(_standing(job))),
        ("task", job.task),
        ("queue", job.queue),
        ("key", job.key or "-"),
        ("priority", str(job.priority)),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("created", _stamp(now, job.created_at)),
        ("run at", _stamp(now, job.run_at)),
        ("started", _stamp(now, job.started_at)),
        ("finished", _stamp(now, job.finished_at)),
    ]
    if job.claim_id:
        rows += [
            ("claim", job.claim_id),
            ("worker", job.worker or "-"),
            ("heartbeat", _stamp(now, job.heartbeat_at)),
            ("lease ends", _stamp(now, job.lease_expires_at)),
        ]
    p = job.progress
    if p.total is not None or p.completed is not None:
        rows.append(("progress", progress_cell(job)))
    for label, value in (("current", p.current), ("checkpoint", p.checkpoint),
                         ("detail", p.detail)):  # fmt: skip
        if value is not None:
            rows.append((label, _json(value)))
    rows.append(("payload", _json(job.payload)))
    if job.result is not None:
        rows.append(("result", _json(job.result)))
    if job.error:
        rows.append((_error_label(job), Text(job.error, style="red")))
    if subscribers:
        rows.append(("subscribers", ", ".join(subscribers)))
    if job.depends_on:
        listed = ", ".join(
            f"{d.id} ({d.status})" if isinstance(d, Job) else f"{d} (pruned)"
            for d in (depends_on or job.depends_on)
        )
        waiting = f"; {job.waiting_for} not done yet" if job.waiting_for else ""
        rows.append(("waits for", f"{listed}{waiting}"))
    if dependents:
        rows.append(("dependents", ", ".join(str(i) for i in dependents)))
    for label, value in rows:
        grid.add_row(label, value if isinstance(value, Text) else Text(str(value)))
    return grid


def _standing(job: Job) -> str:
    """What the status means for the job's future."""
    if job.status == Status.FAILED:
        return " (final)"
    if job.status == Status.PENDING and job.error:
        return f" (will retry: attempt {job.attempts + 1} of {job.max_attempts})"
    return ""


def _error_label(job: Job) -> str:
    """The error's row: whether it ended the job, and why."""
    if job.status == Status.FAILED:
        why = "terminal" if job.error_kind == ErrorKind.TERMINAL else "no attempts left"
        return f"error (final: {why})"
    if job.status == Status.PENDING:
        return "error (retryable)"
    return "last error"


def stats_table(
    per_queue: Mapping[str, Stats], now: datetime, *, width: int | None = None
) -> Table:
    """One row per queue, and a total row when there are several. On a narrow terminal
    the counts no queue has are left out and the headers shorten."""
    names = sorted(per_queue)
    lines = [(Text(name), per_queue[name]) for name in names]
    if len(names) > 1:
        lines.append((Text("all queues", style="bold"), sum_stats(per_queue.values())))
    rows: list[dict[str, Cell]] = []
    for name, stats in lines:
        row: dict[str, Cell] = {"queue": name}
        for status in STATUS_ORDER:
            count = getattr(stats, str(status))
            row[str(status)] = Text(_count(count), style=STATUS_STYLES[status] if count else "")
        row["scheduled"] = _count(stats.scheduled)
        row["expired"] = Text(_count(stats.expired), style="red" if stats.expired else "")
        row["oldest pending"] = when(now, stats.oldest_pending_at)
        rows.append(row)
    return fitted(_STATS_COLUMNS, rows, width or console().width)


_STATS_COLUMNS = (
    Column("queue", free=True, cap=40),
    Column("pending", short="pend", right=True),
    Column("running", short="run", right=True),
    Column("completed", short="done", right=True),
    Column("failed", short="fail", right=True),
    Column("cancelled", short="canc", right=True, optional=True),
    Column("scheduled", short="sched", right=True, optional=True),
    Column("expired", short="exp", right=True, optional=True),
    Column("oldest pending", short="oldest", optional=True),
)


def stats_json(per_queue: Mapping[str, Stats]) -> dict[str, Any]:
    """``{"total": {...}, "queues": {name: {...}}}``; filtered to one queue, that
    queue's counts are the total."""
    total = sum_stats(per_queue.values())
    queues = {name: s.to_dict() for name, s in sorted(per_queue.items())}
    return {"total": total.to_dict(), "queues": queues}


def progress_bar(*, transient: bool = False) -> Progress:
    """A bar on stderr for long work; hidden when stderr is not a terminal."""
    target = err_console()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=target,
        transient=transient,
        disable=not target.is_terminal,
    )


def titled(title: str, body: RenderableType) -> Group:
    return Group(Text(title, style="bold underline"), body, Text(""))


def _count(n: int) -> str:
    return str(n) if n else "·"


def _stamp(now: datetime, moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return f"{moment.isoformat(timespec='seconds')} ({when(now, moment)})"


def _json(value: Any) -> str:
    indent = 2 if isinstance(value, dict | list) else None
    return json.dumps(value, ensure_ascii=False, indent=indent)
