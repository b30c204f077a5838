"""``conveyor enqueue``: one job from flags, or many from a JSON-lines file."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from conveyor.cli.base import PANEL_JOBS, DbOption, JsonOption, app, fail, usage
from conveyor.cli.connection import open_queue
from conveyor.cli.durations import parse_duration, parse_time
from conveyor.cli.output import print_json, progress_bar, say
from conveyor.errors import InvalidArgument
from conveyor.job import Job
from conveyor.queue import Queue

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
    payload, queue, key, priority, run_at (ISO 8601), max_attempts. --queue is the
    default for lines that name none."""
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
            when = q.now() + wait  # the database clock, which every worker agrees on
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
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise fail(f"cannot read payload file {source!r}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(
            f"{source}: malformed JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None


def _enqueue_file(path: str, *, queue: str, db: str | None, as_json: bool) -> None:
    lines = list(_read_lines(path))
    name = "stdin" if path == "-" else path
    items = [(number, _parse_line(name, number, text)) for number, text in lines]
    created = deduplicated = 0
    ids: list[int] = []
    with open_queue(db, create=True) as q, progress_bar() as bar:
        task = bar.add_task(f"enqueue {name}", total=len(items))
        for start in range(0, len(items), FILE_CHUNK):
            chunk = items[start : start + FILE_CHUNK]
            jobs = _enqueue_chunk(q, name, chunk, queue=queue, done=len(ids))
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


def _read_lines(path: str) -> Iterator[tuple[int, str]]:
    try:
        stream: IO[str] = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise fail(f"cannot read {path!r}: {exc.strerror}") from None
    with stream:
        try:
            for number, text in enumerate(stream, start=1):
                if text.strip():
                    yield number, text
        except UnicodeDecodeError:
            raise fail(f"{path}: expected UTF-8 text") from None


def _parse_line(name: str, number: int, text: str) -> dict[str, Any]:
    where = f"{name}:{number}"
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{where}: malformed JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(item, dict):
        raise fail(f"{where}: expected a JSON object with a task, got {type(item).__name__}")
    unknown = set(item) - _LINE_FIELDS
    if unknown:
        raise fail(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    if "task" not in item:
        raise fail(f"{where}: a task name is required")
    if isinstance(item.get("run_at"), str):
        try:
            item["run_at"] = parse_time(item["run_at"])
        except typer.BadParameter as exc:
            raise fail(f"{where}: run_at: {exc.message}") from None
    return item


def _enqueue_chunk(
    q: Queue, name: str, chunk: list[tuple[int, dict[str, Any]]], *, queue: str, done: int
) -> list[Job]:
    try:
        return q.enqueue_many([item for _, item in chunk], queue=queue)
    except InvalidArgument as exc:
        # "items[3]: priority: ..." -> the file's line number.
        message = str(exc)
        number = chunk[0][0]
        if message.startswith("items[") and "]: " in message:
            index_text, _, rest = message[len("items[") :].partition("]: ")
            if index_text.isdigit() and int(index_text) < len(chunk):
                number, message = chunk[int(index_text)][0], rest
        kept = f"; the {done} job(s) before it were enqueued" if done else ""
        raise fail(f"{name}:{number}: {message}{kept}") from None
