"""Where the demo's jobs stand: a snapshot read from the database, and its rendering
as the live view (or as one line of text when the output is not a terminal)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from conveyor.demo.workload import FAMILIES
from conveyor.job import Job, Status
from conveyor.queue import MAX_LIST, Queue

_BAR = 20
_ERRORS = 4
_AFTER_ERROR = {
    Status.PENDING: "retry pending",
    Status.RUNNING: "running again",
    Status.COMPLETED: "then completed",
    Status.FAILED: "failed for good",
    Status.CANCELLED: "cancelled",
}


@dataclass
class FamilyCounts:
    total: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    running: int = 0
    waiting: int = 0
    # Attempts that ended in an error (each one a retry, or the final failure).
    errors: int = 0

    @property
    def final(self) -> int:
        return self.completed + self.failed + self.cancelled


@dataclass
class BookProgress:
    job_id: int
    book: str
    pages: int
    completed: int
    failed: int
    resumed: bool


@dataclass
class RecentError:
    job_id: int
    queue: str
    error: str
    status: Status
    at: datetime


@dataclass
class Snapshot:
    families: dict[str, FamilyCounts] = field(default_factory=dict)
    books: list[BookProgress] = field(default_factory=list)
    errors: list[RecentError] = field(default_factory=list)

    @property
    def total(self) -> FamilyCounts:
        out = FamilyCounts()
        for counts in self.families.values():
            for name in out.__dataclass_fields__:
                setattr(out, name, getattr(out, name) + getattr(counts, name))
        return out

    @property
    def done(self) -> bool:
        total = self.total
        return total.total > 0 and total.final == total.total


def snapshot(q: Queue, ids: Iterable[int]) -> Snapshot:
    """Count the demo's jobs (``ids``) by system and state."""
    wanted = set(ids)
    snap = Snapshot({name: FamilyCounts() for name in FAMILIES})
    if not wanted:
        return snap
    cursor, last = min(wanted) - 1, max(wanted)
    while cursor < last:
        page = q.jobs(after=cursor, limit=MAX_LIST)
        if not page:
            break
        for job in page:
            if job.id in wanted:
                _count(snap, job)
        cursor = page[-1].id
    return snap


def _count(snap: Snapshot, job: Job) -> None:
    counts = snap.families.setdefault(job.queue, FamilyCounts())
    counts.total += 1
    status = job.status
    if status == Status.COMPLETED:
        counts.completed += 1
    elif status == Status.FAILED:
        counts.failed += 1
    elif status == Status.CANCELLED:
        counts.cancelled += 1
    elif status == Status.RUNNING:
        counts.running += 1
    else:
        counts.waiting += 1
    succeeded_or_running = status in (Status.COMPLETED, Status.RUNNING)
    counts.errors += max(0, job.attempts - (1 if succeeded_or_running else 0))
    if job.error:
        snap.errors.append(RecentError(job.id, job.queue, job.error, status, job.updated_at))
    if job.queue == "demo.books" and status == Status.RUNNING and isinstance(job.payload, dict):
        p = job.progress
        snap.books.append(BookProgress(
            job.id, str(job.payload.get("book", job.id)), int(job.payload.get("pages", 0)),
            p.completed or 0, p.failed or 0, bool(isinstance(p.detail, dict)
                                                   and p.detail.get("resumed")),
        ))  # fmt: skip


def render(
    snap: Snapshot,
    *,
    header: str,
    elapsed: float,
    notes: Iterable[str] = (),
    compact: bool = False,
    serving: bool = True,
) -> RenderableType:
    """The live view. ``notes``: recent warnings of the workers, shown last.
    ``compact``: one line per system, for short terminals. ``serving``: whether the
    dashboard is up (the last line says what stays up once every job is final)."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("system", no_wrap=True)
    table.add_column("", width=_BAR)
    table.add_column("final", justify="right", no_wrap=True)
    for name, style in (("✓", "green"), ("✗", "red"), ("running", "cyan"),
                        ("waiting", "yellow"), ("errors", "dim")):  # fmt: skip
        table.add_column(name, justify="right", style=style, no_wrap=True)
    for queue, (_, title, shows) in FAMILIES.items():
        c = snap.families.get(queue, FamilyCounts())
        table.add_row(
            Text(title, style="bold") + Text("" if compact else f"\n{shows}", style="dim"),
            ProgressBar(total=max(1, c.total), completed=c.final, width=_BAR),
            f"{c.final}/{c.total}",
            str(c.completed), str(c.failed), str(c.running), str(c.waiting), str(c.errors),
        )  # fmt: skip
    parts: list[RenderableType] = [Text(header, style="bold"), Text(""), table]
    if snap.books:
        books = Table(box=None, pad_edge=False, show_header=False)
        books.add_column(no_wrap=True)
        books.add_column(width=_BAR)
        books.add_column(no_wrap=True)
        for b in sorted(snap.books, key=lambda b: b.job_id)[: 3 if compact else 6]:
            read = b.completed + b.failed
            note = "  resumed from its checkpoint" if b.resumed else ""
            books.add_row(f"job {b.job_id} {b.book}",
                          ProgressBar(total=max(1, b.pages), completed=read, width=_BAR),
                          f"page {read}/{b.pages}{note}")  # fmt: skip
        parts += [Text(""), Text("books being read", style="bold"), books]
    shown = 2 if compact else _ERRORS
    recent = sorted(snap.errors, key=lambda e: (e.at, e.job_id), reverse=True)[:shown]
    if recent:
        errors = Table(box=None, pad_edge=False, show_header=False)
        errors.add_column(no_wrap=True)
        errors.add_column(no_wrap=True, overflow="ellipsis", max_width=60)
        errors.add_column(no_wrap=True)
        for e in recent:
            then = _AFTER_ERROR[e.status]
            first_line = e.error.strip().splitlines()[0] if e.error.strip() else "?"
            errors.add_row(f"job {e.job_id} {e.queue}", Text(first_line, style="red"),
                           Text(f"→ {then}", style="dim"))  # fmt: skip
        parts += [Text(""), Text("latest errors", style="bold"), errors]
    parts += [Text(note, style="yellow") for note in notes]
    total = snap.total
    if not snap.done:
        state = f"{total.final}/{total.total} final"
    elif serving:
        state = "all final; the dashboard stays up"
    else:
        state = "all final; the workers wait for more"

    parts += [Text(""), Text(f"{state} · {elapsed:.0f}s · Ctrl-C to stop", style="dim")]
    return Group(*parts)


def line(snap: Snapshot) -> str:
    """The same news as one line, for logs and pipes."""
    t = snap.total
    return (
        f"{t.final}/{t.total} final ({t.completed} completed, {t.failed} failed), "
        f"{t.running} running, {t.waiting} waiting, {t.errors} errors"
    )
