"""``conveyor enqueue``: one job from flags, or many from a JSON-lines file."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Iterator
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
from conveyor.options import ITEM_FIELDS, OPTIONS, Option

# Lines per transaction when enqueueing from a file: big enough to batch the commits,
# small enough that the progress bar moves.
FILE_CHUNK = 500
# The options the command line carries (a connection is only a library's to give).
CLI_OPTIONS = {name: o for name, o in OPTIONS.items() if not o.local}
# A line of --file: the fields of an item of a batch.
LINE_FIELDS = ITEM_FIELDS


def _flag(option: Option) -> inspect.Parameter:
    """The command-line parameter of an enqueue option: a flag named after it, its
    value as text (parsed by ``_option_value``) or a number, its default the option's."""
    kind: Any = str if option.default is not None else str | None
    extra: dict[str, Any] = {}
    if option.kind in ("int32", "attempts"):
        kind = int if option.default is not None else int | None
        extra["metavar"] = option.metavar or "N"
    elif option.choices:
        extra["metavar"] = "/".join(option.choices)
    else:
        extra["metavar"] = option.metavar or option.kind.upper()
    text = option.help
    if option.kind == "job_ids":
        text += " Comma-separated: 12,13."
    info = typer.Option(*option.cli_flags, help=text, **extra)
    return inspect.Parameter(
        option.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option.default,
        annotation=Annotated[kind, info],
    )  # fmt: skip


def with_option_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (which takes the options as ``**options``) with one flag per enqueue
    option, after its ``payload``: the flags are read from ``conveyor.options``."""
    signature = inspect.signature(command, eval_str=True)
    before: list[inspect.Parameter] = []
    after: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        (after if (before and before[-1].name == "payload") or after else before).append(parameter)
    flags = [_flag(o) for o in CLI_OPTIONS.values()]
    params = [*before, *flags, *after]
    command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return command


def _option_value(name: str, value: Any) -> Any:
    """A flag's text as the option's value."""
    option = CLI_OPTIONS[name]
    flag = option.cli_flags[0]
    if value is None or not isinstance(value, str) or option.choices:
        return value
    if option.kind == "time":
        return parse_time(value, flag)
    if option.kind == "seconds":
        return parse_duration(value, flag)
    if option.kind == "job_ids":
        try:
            return [int(part) for part in value.split(",") if part.strip()]
        except ValueError:
            raise invalid(f"{flag}: expected job ids separated by commas, got {value!r}") from None
    return value


@app.command(rich_help_panel=PANEL_JOBS)
@with_option_flags
def enqueue(
    task: Annotated[str | None, typer.Argument(help="Task name, e.g. emails.send.")] = None,
    payload: Annotated[
        str | None,
        typer.Option(
            "--payload", "-p", help="JSON payload, or @file.json to read it.", metavar="JSON"
        ),
    ] = None,
    delay: Annotated[
        str | None,
        typer.Option(
            "--delay", help="Not before this long from now (30s, 10m, 2h).", metavar="DURATION"
        ),
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
    **options: Any,
) -> None:
    """Add a job to a queue (or many, with --file).

    Each line of a --file is an object with the fields of one job: task (required),
    payload, queue, key, priority, run_at (ISO 8601), max_attempts, subscriber, group,
    after (a list of job ids), on_dependency_failure: the options an item of a batch may
    set. --queue is the default for lines that name none. Every line is checked first:
    if any is bad, each bad line is reported (file:line:column) and nothing is enqueued."""
    queue = options["queue"]
    if file is not None:
        given = [CLI_OPTIONS[n].cli_flags[0] for n, v in options.items()
                 if n != "queue" and v != CLI_OPTIONS[n].default]  # fmt: skip
        if task is not None or payload is not None or delay is not None or given:
            raise usage("give either a TASK (with its options) or --file, not both")
        _enqueue_file(file, queue=queue, db=db, as_json=as_json)
        return
    if task is None:
        raise usage("a TASK name is required (or --file)")
    if options["run_at"] is not None and delay is not None:
        raise usage("give --run-at or --delay, not both")
    data = _parse_payload(payload)
    chosen = {name: _option_value(name, value) for name, value in options.items()}
    wait = parse_duration(delay, "--delay") if delay is not None else None
    with open_queue(db, create=True) as q:
        if wait is not None:
            try:
                chosen["run_at"] = q.now() + wait  # the database clock, which workers agree on
            except OverflowError:
                raise invalid(f"--delay: {delay!r} reaches past the year 9999") from None
        job = q.enqueue(task, data, **chosen)
    if as_json:
        print_json(job.to_dict())
    elif job.deduplicated:
        say(f"job {job.id} with key {job.key!r} is already {job.status}; nothing added")
    else:
        when = chosen["run_at"]
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
    limit = parse_url(database_url(command_line=db)).queue_options["max_payload_bytes"]
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
    unknown = sorted(set(item) - LINE_FIELDS)
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
