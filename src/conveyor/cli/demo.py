"""``conveyor demo``: see a queue at work in one command, on a SQLite file of its own."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.live import Live
from rich.table import Table

from conveyor.cli.base import PANEL_RUN, JsonOption, app
from conveyor.cli.connection import open_queue
from conveyor.cli.output import console, print_json, say

if TYPE_CHECKING:
    from conveyor.demo.progress import Snapshot
    from conveyor.demo.runner import Outcome

DEMO_URL = "sqlite:///conveyor-demo.db"
# Without a terminal, a progress line when something changed, at most this often.
LINE_EVERY_S = 2.0
# Terminals shorter than this get the live view without the systems' descriptions.
COMPACT_BELOW_LINES = 34


@app.command(rich_help_panel=PANEL_RUN)
def demo(
    jobs: Annotated[
        int, typer.Option("--jobs", "-n", help="About this many jobs.", min=5, max=10_000)
    ] = 60,
    workers: Annotated[int, typer.Option(help="Worker threads.", min=1, max=32)] = 2,
    concurrency: Annotated[int, typer.Option(help="Tasks per worker.", min=1, max=64)] = 4,
    serve: Annotated[bool, typer.Option("--serve/--no-serve", help="Serve the dashboard.")] = True,
    port: Annotated[int, typer.Option(help="Dashboard port (another if taken).")] = 8000,
    exit_when_done: Annotated[
        bool, typer.Option("--exit-when-done", help="Stop once every demo job is final.")
    ] = False,
    pace: Annotated[
        float,
        typer.Option(help="Scale every pause and retry delay; 0 runs flat out.", min=0, max=10),
    ] = 1.0,
    seed: Annotated[int, typer.Option(help="Another seed, another mix of jobs.")] = 7,
    db: Annotated[
        str,
        typer.Option(
            "--db",
            help="Database URL. The demo ignores $CONVEYOR_DATABASE_URL on purpose.",
            metavar="URL",
        ),
    ] = DEMO_URL,
    as_json: JsonOption = False,
) -> None:
    """Watch conveyor work: demo jobs for five kinds of system (retries, progress, shared
    keys), workers, the dashboard and a live view. Ctrl-C stops it cleanly."""
    from conveyor.demo import runner

    options = runner.Options(
        url=db, jobs=jobs, workers=workers, concurrency=concurrency, serve=serve, port=port,
        exit_when_done=exit_when_done, pace=pace, seed=seed,
    )  # fmt: skip
    view = _View(db, quiet=as_json)
    with open_queue(db, create=True) as q, _stop_on_signals(), view:
        outcome = runner.run(q, options, show=view.show, announce=view.announce)
    if as_json:
        print_json(_summary_json(outcome, db))
    else:
        _print_summary(outcome, db)
    if outcome.worker_errors:
        raise typer.Exit(1)


class _View:
    """A live view on a terminal; otherwise a line now and then; nothing with --json."""

    def __init__(self, db: str, *, quiet: bool) -> None:
        self.db = db
        self.quiet = quiet
        out = console()
        self.live = Live(console=out, auto_refresh=False) if out.is_terminal and not quiet else None
        self._last_at = float("-inf")
        self._last_text = ""

    def __enter__(self) -> _View:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def announce(self, message: str) -> None:
        if not self.quiet:
            console().print(message, markup=False, highlight=False)

    def show(self, snap: Snapshot, elapsed: float, url: str | None, notes: list[str]) -> None:
        from conveyor.demo import progress

        if self.live is not None:
            where = f" · dashboard {url}" if url else ""
            header = f"conveyor demo · {self.db}{where}"
            compact = self.live.console.height < COMPACT_BELOW_LINES
            view = progress.render(
                snap,
                header=header,
                elapsed=elapsed,
                notes=notes,
                compact=compact,
                serving=url is not None,
            )
            self.live.update(view, refresh=True)
        elif not self.quiet:
            text = progress.line(snap)
            if text != self._last_text and elapsed - self._last_at >= LINE_EVERY_S:
                self._last_at, self._last_text = elapsed, text
                say(f"[{elapsed:5.1f}s] {text}")


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM both end the demo cleanly (a shell may start a background
    job with SIGINT ignored; the demo wants it anyway)."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)


def _summary_json(outcome: Outcome, db: str) -> dict[str, Any]:
    snap = outcome.snapshot
    return {
        "database": db,
        "jobs": len(outcome.job_ids),
        "job_ids": outcome.job_ids,
        "all_final": snap.done,
        "interrupted": outcome.interrupted,
        "elapsed_seconds": round(outcome.elapsed, 3),
        "dashboard": outcome.dashboard_url,
        "systems": {name: vars(counts) for name, counts in snap.families.items()},
        "worker_errors": outcome.worker_errors,
    }


def _print_summary(outcome: Outcome, db: str) -> None:
    snap = outcome.snapshot
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("queue", "jobs", "completed", "failed", "unfinished", "errors"):
        table.add_column(name, justify="left" if name == "queue" else "right")
    for name, c in snap.families.items():
        table.add_row(name, str(c.total), str(c.completed), str(c.failed),
                      str(c.total - c.final), str(c.errors))  # fmt: skip
    out = console()
    out.print()
    out.print(table)
    total = snap.total
    state = "all final" if snap.done else f"{total.total - total.final} pending or running"
    say(f"\n{total.total} jobs in {outcome.elapsed:.1f}s: {state}.")
    for error in outcome.worker_errors:
        say(f"worker error: {error}", style="red")
    flag = f" --db {db}"
    first = outcome.job_ids[0] if outcome.job_ids else 1
    say("\nlook around:")
    for hint in (f"conveyor info{flag}", f"conveyor jobs{flag} --status failed",
                 f"conveyor show {first}{flag}", f"conveyor stats{flag} --watch"):  # fmt: skip
        say(f"  {hint}")
