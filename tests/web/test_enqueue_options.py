"""Every enqueue option (``conveyor.options.EnqueueOptions``) works through every way of
adding a job: ``Queue``, ``AsyncQueue``, ``RemoteQueue``, ``AsyncRemoteQueue``,
``Task.enqueue``, ``Task.using``, the command line's flags, ``POST /api/jobs``, and,
for the options a batch item may set, ``enqueue_many``, ``POST /api/jobs/batch`` and
the lines of ``conveyor enqueue --file``."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import typing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer.main
from fastapi import FastAPI
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import conveyor
from conveyor.aio import AsyncQueue
from conveyor.aio.client import AsyncRemoteQueue
from conveyor.aio.contract import AsyncQueueAPI
from conveyor.cli import app as cli_app
from conveyor.cli.enqueue import LINE_FIELDS
from conveyor.client import RemoteQueue
from conveyor.contract import QueueAPI
from conveyor.errors import DuplicateJob
from conveyor.ops.enqueue import ENQUEUE_FIELDS
from conveyor.options import OPTIONS, EnqueueOptions
from conveyor.task.registered import Task
from conveyor.web.models import EnqueueItem, EnqueueRequest

LATER = datetime(2031, 5, 4, 3, 2, 1, tzinfo=UTC)
# What every option is set to below: never its default, so that a dropped option shows.
# (``conn`` is only a local queue's: a test of its own covers it.)
JOB_OPTIONS: dict[str, Any] = {
    "queue": "elsewhere",
    "key": None,  # set per test: the dedupe tests reuse keys
    "priority": 7,
    "run_at": LATER,
    "max_attempts": 9,
    "subscriber": "https://hooks.example/done",
    "group": "tenant-1",
    "after": None,  # set per test: the id of a cancelled job
    "on_dependency_failure": "run",
}
# The dedupe policy, each with what it does to a second enqueue of a key (see below).
POLICY_OPTIONS = ("on_active", "cache_ttl", "on_failed", "on_completed")


def test_every_option_is_covered_here() -> None:
    """A new option must be added to the tests above and below: they set each one."""
    assert set(OPTIONS) == {*JOB_OPTIONS, *POLICY_OPTIONS, "conn"}
    assert {n for n, o in OPTIONS.items() if o.item} == set(JOB_OPTIONS)


def test_every_entry_point_declares_every_option() -> None:
    """Each entry point takes its options from the one declaration, so none can miss
    one; this fails naming the entry point and option if one is declared apart."""
    unpacked = typing.Unpack[EnqueueOptions]
    for name, method in {
        "Queue.enqueue": QueueAPI.enqueue,
        "AsyncQueue.enqueue": AsyncQueueAPI.enqueue,
        "RemoteQueue.enqueue": RemoteQueue.enqueue,
        "AsyncRemoteQueue.enqueue": AsyncRemoteQueue.enqueue,
        "Task.using": Task.using,
    }.items():
        hints = typing.get_type_hints(method, include_extras=True)
        assert hints["options"] == unpacked, name
    command = typer.main.get_command(cli_app)
    assert isinstance(command, typer.core.TyperGroup)
    flags = {o for p in command.commands["enqueue"].params for o in p.opts}
    http_single = set(EnqueueRequest.model_fields)
    http_item = set(EnqueueItem.model_fields)
    for name, option in OPTIONS.items():
        if option.local:
            continue
        assert option.cli_flags[0] in flags, f"conveyor enqueue has no {option.cli_flags[0]}"
        assert option.field in http_single, f"POST /api/jobs has no {option.field}"
        if option.item:
            assert option.field in http_item, f"POST /api/jobs/batch items have no {option.field}"
            assert name in LINE_FIELDS, f"enqueue --file lines have no {name}"
            assert name in ENQUEUE_FIELDS, f"enqueue_many items have no {name}"


# -- the entry points -------------------------------------------------------------------
Enqueue = Callable[..., int]  # (task, payload, **options) -> the job's id


@pytest.fixture
def server(db_url: str) -> Iterator[tuple[FastAPI, TestClient, conveyor.Queue]]:
    from conveyor.web import create_app

    app = create_app(db_url, tokens={})
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield app, client, app.state.conveyor.queue


def _task(q: conveyor.Queue) -> Task[Any, Any]:
    app = conveyor.App(q)

    @app.task(name="t")
    def t(ctx: conveyor.Context, n: int = 0) -> None: ...

    return t


def _cli(url: str, tmp_path: Path, *, from_file: bool) -> Enqueue:
    def enqueue(task: str, payload: Any = None, **options: Any) -> int:
        args = ["enqueue", "--db", url, "--json"]
        if from_file:
            line = {"task": task, "payload": payload, **options}
            if line.get("run_at"):
                line["run_at"] = line["run_at"].isoformat()
            path = tmp_path / "jobs.jsonl"
            path.write_text(json.dumps(line) + "\n", encoding="utf-8")
            args += ["--file", str(path)]
        else:
            args += [task, "--payload", json.dumps(payload)]
            for name, value in options.items():
                if name == "after":
                    text = ",".join(map(str, value))
                elif isinstance(value, datetime):
                    text = value.isoformat()
                else:
                    text = str(value)
                args += [OPTIONS[name].cli_flags[0], text]
        result = CliRunner().invoke(cli_app, args)
        if isinstance(result.exception, DuplicateJob):  # the shell prints it, exit 1
            raise result.exception
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        return int(out["ids"][0] if from_file else out["id"])

    return enqueue


def _http(client: TestClient, *, batch: bool) -> Enqueue:
    def enqueue(task: str, payload: Any = None, **options: Any) -> int:
        body = {"task": task, "payload": payload}
        for name, value in options.items():
            body[OPTIONS[name].field] = value.isoformat() if isinstance(value, datetime) else value
        if batch:
            response = client.post("/api/jobs/batch", json={"jobs": [body]})
        else:
            response = client.post("/api/jobs", json=body)
        if response.status_code == 409:
            raise DuplicateJob(response.text)
        assert response.status_code in (200, 201), response.text
        data = response.json()
        return int(data["jobs"][0]["id"] if batch else data["id"])

    return enqueue


def _remote_async(client: TestClient, app: FastAPI) -> Enqueue:
    def enqueue(task: str, payload: Any = None, **options: Any) -> int:
        async def run() -> int:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as h:
                return (await AsyncRemoteQueue("http://127.0.0.1", http=h).enqueue(
                    task, payload, **options
                )).id  # fmt: skip

        return asyncio.run(run())

    return enqueue


ENTRY_POINTS = ("queue", "async_queue", "remote", "async_remote", "task_enqueue", "task_using",
                "cli", "http", "queue_batch", "http_batch", "cli_file")  # fmt: skip
BATCHES = ("queue_batch", "http_batch", "cli_file")


def entry_point(
    kind: str, server: tuple[FastAPI, TestClient, conveyor.Queue], url: str, tmp_path: Path
) -> Enqueue:
    app, client, q = server
    if kind == "queue":
        return lambda task, payload=None, **o: q.enqueue(task, payload, **o).id
    if kind == "async_queue":
        return lambda task, payload=None, **o: (
            asyncio.run(AsyncQueue(q).enqueue(task, payload, **o)).id
        )
    if kind == "remote":
        remote = RemoteQueue("http://127.0.0.1", http=client)
        return lambda task, payload=None, **o: remote.enqueue(task, payload, **o).id
    if kind == "async_remote":
        return _remote_async(client, app)
    if kind == "task_enqueue":
        t = _task(q)
        return lambda task, payload=None, **o: t.enqueue(**(payload or {}), **o).id
    if kind == "task_using":
        t = _task(q)
        return lambda task, payload=None, **o: t.using(**o).enqueue(**(payload or {})).id
    if kind == "queue_batch":
        return lambda task, payload=None, **o: (
            q.enqueue_many([{"task": task, "payload": payload, **o}])[0].id
        )
    if kind in ("cli", "cli_file"):
        return _cli(url, tmp_path, from_file=kind == "cli_file")
    return _http(client, batch=kind == "http_batch")


@pytest.mark.parametrize("kind", ENTRY_POINTS)
def test_each_option_reaches_the_job(
    kind: str,
    server: tuple[FastAPI, TestClient, conveyor.Queue],
    db_url: str,
    tmp_path: Path,
) -> None:
    q = server[2]
    enqueue = entry_point(kind, server, db_url, tmp_path)
    gone = q.enqueue("t")
    q.cancel(gone.id)
    options = {**JOB_OPTIONS, "key": f"k-{kind}", "after": [gone.id]}
    job = q.get(enqueue("t", {"n": 1}, **options))
    assert job is not None
    assert (job.task, job.payload) == ("t", {"n": 1})
    assert job.queue == "elsewhere"
    assert job.key == f"k-{kind}"
    assert job.priority == 7
    assert job.run_at == LATER
    assert job.max_attempts == 9
    assert q.subscribers(job.id) == ["https://hooks.example/done"]
    assert job.group == "tenant-1"
    assert job.depends_on == (gone.id,)
    # on_dependency_failure="run": the cancelled job it runs after does not cancel it
    # (with the default, "cancel", it would be cancelled at once).
    assert job.status == "pending"
    assert job.waiting_for == 0
    with_default = q.get(enqueue("t", {"n": 2}, after=[gone.id]))
    assert with_default is not None and with_default.status == "cancelled"


@pytest.mark.parametrize("kind", [k for k in ENTRY_POINTS if k not in BATCHES])
def test_each_dedupe_option_reaches_the_queue(
    kind: str,
    server: tuple[FastAPI, TestClient, conveyor.Queue],
    db_url: str,
    tmp_path: Path,
) -> None:
    q = server[2]
    enqueue = entry_point(kind, server, db_url, tmp_path)
    done = _finished(q, "done", failed=False)
    failed = _finished(q, "bad", failed=True)
    active = q.enqueue("t", key="active")
    # on_active: "return" (the default) gives the active job; "raise" refuses.
    assert enqueue("t", key="active") == active.id
    with pytest.raises(DuplicateJob):
        enqueue("t", key="active", on_active="raise")
    # on_completed: "new" (the default) enqueues again; "return" gives the completed job.
    assert enqueue("t", key="done", on_completed="return") == done.id
    # cache_ttl: a job completed less than this long ago is the answer.
    assert enqueue("t", key="done", cache_ttl=3600) == done.id
    # on_failed: "return" gives the failed job; "retry" runs it again.
    assert enqueue("t", key="bad", on_failed="return") == failed.id
    assert enqueue("t", key="bad", on_failed="retry") == failed.id
    again = q.get(failed.id)
    assert again is not None and again.status == "pending"
    assert enqueue("t", key="done") != done.id  # the defaults: a new job


def _finished(q: conveyor.Queue, key: str, *, failed: bool) -> conveyor.Job:
    job = q.enqueue("t", key=key, max_attempts=1)
    claim = q.claim()
    assert [j.id for j in claim.jobs] == [job.id]
    if failed:
        return q.fail(job.id, claim.id, "boom", retryable=False)
    return q.complete(job.id, claim.id)


def test_a_name_that_is_no_option_is_refused_everywhere(q: conveyor.Queue) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'quue'"):
        q.enqueue("t", quue="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'quue'"):
        _task(q).using(quue="x")  # type: ignore[call-arg]
    assert q.stats().pending == 0


def test_conn_joins_the_callers_transaction_through_task_using(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    q = conveyor.connect(f"sqlite:///{path}")
    t = _task(q)
    conn = sqlite3.connect(path)  # the application's own connection
    t.using(conn=conn, group="g").enqueue(n=1)
    conn.rollback()  # the job vanishes with the caller's work
    assert q.stats().pending == 0
    job = t.enqueue(n=2, conn=conn, group="g")
    conn.commit()
    found = q.get(job.id)
    assert found is not None and found.group == "g"
    conn.close()
    q.close()


def test_defaults_are_those_documented() -> None:
    assert {n: o.default for n, o in OPTIONS.items()} == {
        "queue": "default", "key": None, "priority": 0, "run_at": None, "max_attempts": None,
        "subscriber": None, "group": None, "after": None, "on_dependency_failure": "cancel",
        "on_active": "return", "cache_ttl": None, "on_failed": "new", "on_completed": "new",
        "conn": None,
    }  # fmt: skip
    assert LATER - timedelta(days=1) < LATER  # the sample time is a fixed aware datetime
