"""``conveyor enqueue``: one job from flags, or many from a JSON-lines file."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any, NoReturn

import typer

from conveyor.cli.base import (
    EXIT_USAGE,
    PANEL_JOBS,
    DbOption,
    JsonOption,
    app,
    fail,
    invalid,
    usage,
)
from conveyor.cli.connection import open_queue
from conveyor.cli.durations import parse_duration, parse_time
from conveyor.cli.output import print_json, progress_bar, say
from conveyor.config import database_url, parse_url
from conveyor.errors import InvalidArgument
from conveyor.ops.defaults import Defaults
from conveyor.ops.enqueue import enqueue_many as checked_enqueue_many

# Lines per transaction when enqueueing from a file: big enough to batch the commits,
# small enough that the progress bar moves.
FILE_CHUNK = 500
_LINE_FIELDS = {"task", "payload", "queue", "key", "priority", "run_at", "max_attempts",
                "subscriber"}  # fmt: skip


@app.command(rich_help_panel=PANEL_JOBS)
def enqueue(
    task: Annotated[str | None, typer.Argument(help="Task name, e.g. emails.send.")] = None,
    payload: Annotated[
        str | None,
        typer.Option(
            "--payload", "-p", help="JSON payload, or @file.json to read it.", metavar="JSON"
        ),
    ] = None,
    queue: Annotated[str, typer.Option("--queue", "-q", help="Queue name.")] = "default",
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Dedupe key: one active job per key.")
    ] = None,
    priority: Annotated[int, typer.Option(help="Lower runs first.")] = 0,
    run_at: Annotated[
        str | None,
        typer.Option(
            "--run-at", help="Not before this time (ISO 8601, with zone).", metavar="TIME"
        ),
    ] = None,
    delay: Annotated[
        str | None,
        typer.Option(
            "--delay", help="Not before this long from now (30s, 10m, 2h).", metavar="DURATION"
        ),
    ] = None,
    max_attempts: Annotated[
        int | None,
        typer.Option("--max-attempts", help="Attempts before it fails for good.", metavar="N"),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file",
            "-f",
            help="Enqueue one job per line of this JSON-lines file (- = stdin).",
            metavar="PATH",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a job to a queue (or many, with --file).

    Each line of a --file is an object with the fields of one job: task (required),
    payload, queue, key, priority, run_at (ISO 8601), max_attempts, subscriber. --queue
    is the default for lines that name none. Every line is checked first: if any is
    bad, each bad line is reported (file:line:column) and nothing is enqueued."""
    if file is not None:
        if task is not None or payload is not None or key is not None:
            raise usage("give either a TASK (with its options) or --file, not both")
        _enqueue_file(file, queue=queue, db=db, as_json=as_json)
        return
    if task is None:
        raise usage("a TASK name is required (or --file)")
    if run_at is not None and delay is not None:
        raise usage("give --run-at or --delay, not both")
    data = _parse_payload(payload)
    when = parse_time(run_at) if run_at is not None else None
    wait = parse_duration(delay, "--delay") if delay is not None else None
    with open_queue(db, create=True) as q:
        if wait is not None:
            try:
                when = q.now() + wait  # the database clock, which every worker agrees on
            except OverflowError:
                raise invalid(f"--delay: {delay!r} reaches past the year 9999") from None
        job = q.enqueue(task, data, queue=queue, key=key, priority=priority, run_at=when,
                        max_attempts=max_attempts)  # fmt: skip
    if as_json:
        print_json(job.to_dict())
    elif job.deduplicated:
        say(f"job {job.id} with key {job.key!r} is already {job.status}; nothing added")
    else:
        later = f", not before {job.run_at.isoformat(timespec='seconds')}" if when else ""
        say(f"enqueued job {job.id} ({job.task} on queue {job.queue}{later})")


def _parse_payload(text: str | None) -> Any:
    if text is None:
        return None
    source = "--payload"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = Path(source).read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise fail(f"cannot read payload file {source!r}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise invalid(
            f"{source}: malformed JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None


def _enqueue_file(path: str, *, queue: str, db: str | None, as_json: bool) -> None:
    """Every line is read and checked before anything is enqueued: a file with bad lines
    adds nothing, and each bad line is reported (``file:line:column: what``)."""
    name = "stdin" if path == "-" else path
    items: list[dict[str, Any]] = []
    problems: list[str] = []
    # The queue's own checks, with the database's payload limit, before it is opened:
    # a file with bad lines creates nothing, not even a database.
    limit = parse_url(database_url(db)).queue_options["max_payload_bytes"]
    defaults = Defaults(max_payload_bytes=limit)
    for number, text in _read_lines(path):
        try:
            items.append(_parse_line(defaults, text, queue))
        except _BadLine as bad:
            problems.append(f"{name}:{number}:{bad.column}: {bad.message}")
    if problems:
        _report(problems)
    with open_queue(db, create=True) as q:
        created = deduplicated = 0
        ids: list[int] = []
        with progress_bar() as bar:
            task = bar.add_task(f"enqueue {name}", total=len(items))
            for start in range(0, len(items), FILE_CHUNK):
                chunk = items[start : start + FILE_CHUNK]
                jobs = q.enqueue_many(chunk, queue=queue)
                ids.extend(job.id for job in jobs)
                deduplicated += sum(1 for job in jobs if job.deduplicated)
                created += sum(1 for job in jobs if not job.deduplicated)
                bar.advance(task, len(chunk))
    if as_json:
        print_json({"count": len(ids), "created": created, "deduplicated": deduplicated,
                    "ids": ids})  # fmt: skip
    else:
        extra = f" ({deduplicated} already active with their key)" if deduplicated else ""
        say(f"enqueued {created} job(s) from {name}{extra}")


# Bad lines listed one by one, up to this many; the rest are counted.
MAX_LISTED = 20


def _report(problems: list[str]) -> NoReturn:
    for problem in problems[:MAX_LISTED]:
        typer.echo(f"error: {problem}", err=True)
    if len(problems) > MAX_LISTED:
        typer.echo(f"error: … and {len(problems) - MAX_LISTED} more bad line(s)", err=True)
    typer.echo(f"error: {len(problems)} bad line(s): nothing was enqueued", err=True)
    raise typer.Exit(EXIT_USAGE)


class _BadLine(Exception):
    def __init__(self, column: int, message: str) -> None:
        super().__init__(message)
        self.column = column
        self.message = message


def _read_lines(path: str) -> Iterator[tuple[int, str]]:
    try:
        stream: IO[str] = (
            sys.stdin if path == "-" else open(path, encoding="utf-8-sig")  # noqa: SIM115
        )
    except OSError as exc:
        raise fail(f"cannot read {path!r}: {exc.strerror}") from None
    with stream:
        try:
            for number, text in enumerate(stream, start=1):
                text = text.removeprefix("\ufeff").rstrip("\r\n")  # a BOM on stdin too
                if text.strip():
                    yield number, text
        except UnicodeDecodeError:
            raise invalid(f"{path}: expected UTF-8 text") from None


def _parse_line(defaults: Defaults, text: str, queue: str) -> dict[str, Any]:
    """One line as an item of ``enqueue_many``, checked as the queue will check it."""
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadLine(exc.colno, f"malformed JSON ({exc.msg})") from None
    start = len(text) - len(text.lstrip()) + 1
    if not isinstance(item, dict):
        raise _BadLine(start, f"expected a JSON object with a task, got {type(item).__name__}")
    unknown = sorted(set(item) - _LINE_FIELDS)
    if unknown:
        raise _BadLine(_column(text, unknown[0], start), f"unknown field(s) {', '.join(unknown)}")
    if "task" not in item:
        raise _BadLine(start, "a task name is required")
    if isinstance(item.get("run_at"), str):
        try:
            item["run_at"] = parse_time(item["run_at"])
        except typer.BadParameter as exc:
            raise _BadLine(_column(text, "run_at", start), f"run_at: {exc.message}") from None
    try:
        checked_enqueue_many(defaults, [item], queue=queue)  # checks, writes nothing
    except InvalidArgument as exc:
        message = str(exc).removeprefix("items[0]: ")
        field = message.partition(":")[0]
        raise _BadLine(_column(text, field, start), message) from None
    return item


def _column(text: str, field: str, default: int) -> int:
    """Where ``"field"`` is on the line (1-based), or ``default``."""
    found = text.find(json.dumps(field))
    return found + 1 if found >= 0 else default
