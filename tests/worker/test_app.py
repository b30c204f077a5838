"""The task API: registering, naming, enqueueing, and running inline (both databases)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import conveyor
from conveyor import App, Context
from conveyor.errors import ConfigurationError, InvalidArgument
from conveyor.job import ErrorKind, Status


def add(ctx: Context, a: int, b: int = 1) -> int:
    return a + b


def test_a_task_is_named_after_its_module_and_function(app: App) -> None:
    task = app.task(add)
    assert task.name == "tests.worker.test_app.add"
    assert app.get_task(task.name) is task
    assert app.task(name="maths.add")(add).name == "maths.add"


def test_two_functions_cannot_share_a_task_name(app: App) -> None:
    app.task(name="same")(add)

    def other(ctx: Context) -> None: ...

    with pytest.raises(ConfigurationError, match="already registered"):
        app.task(name="same")(other)


def test_enqueue_stores_the_arguments_as_a_json_object_with_the_task_defaults(app: App) -> None:
    task = app.task(queue="maths", max_attempts=7, priority=3)(add)
    job = task.enqueue(2, b=5)
    assert (job.task, job.queue, job.payload) == (task.name, "maths", {"a": 2, "b": 5})
    assert (job.max_attempts, job.priority, job.status) == (7, 3, Status.PENDING)


def test_enqueue_options_are_keywords_beside_the_arguments(app: App) -> None:
    task = app.task(add)
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    job = task.enqueue(a=1, key="k1", priority=-2, run_at=later, queue="q2", max_attempts=2)
    assert job.payload == {"a": 1}
    assert (job.key, job.priority, job.queue, job.max_attempts) == ("k1", -2, "q2", 2)
    assert abs((job.run_at - later).total_seconds()) < 0.01
    assert task.enqueue(a=99, key="k1", queue="q2").id == job.id  # deduplicated by key


def test_a_parameter_named_like_an_option_is_an_argument_and_using_sets_the_option(
    app: App,
) -> None:
    @app.task
    def fetch(ctx: Context, key: str) -> str:
        return key

    job = fetch.enqueue(key="payload-key")
    assert job.payload == {"key": "payload-key"} and job.key is None
    job = fetch.using(key="dedupe-key").enqueue(key="payload-key")
    assert job.payload == {"key": "payload-key"} and job.key == "dedupe-key"


def test_using_on_completed_return_never_runs_a_key_again(app: App, q: conveyor.Queue) -> None:
    task = app.task(add)
    first = task.using(key="once", on_completed="return").enqueue(a=1)
    claim = q.claim()
    q.complete(first.id, claim.id, result=1)
    again = task.using(key="once", on_completed="return").enqueue(a=1)
    assert again.id == first.id and again.deduplicated and again.result == 1
    assert task.using(key="once").enqueue(a=1).id != first.id  # the default: a new run


def test_arguments_that_are_not_json_are_refused_and_nothing_is_written(
    app: App, q: conveyor.Queue
) -> None:
    task = app.task(add)
    with pytest.raises(InvalidArgument, match="payload"):
        task.enqueue(a={1, 2})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="arguments for task"):
        task.enqueue(c=1)  # type: ignore[call-arg]
    assert q.stats().total == 0


def test_enqueue_many_writes_one_job_per_call(app: App) -> None:
    task = app.task(add)
    jobs = task.enqueue_many([{"a": 1}, {"a": 2, "b": 3}])
    assert [j.payload for j in jobs] == [{"a": 1}, {"a": 2, "b": 3}]


def test_a_task_can_be_called_directly_with_a_context(app: App, q: conveyor.Queue) -> None:
    task = app.task(add)
    job = task.enqueue(1)
    claim = q.claim(limit=1)
    assert task(Context(claim.jobs[0], q), 1, b=2) == 3
    assert job.id == claim.jobs[0].id


def test_an_app_connects_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    app = App(f"sqlite:///{path}")
    assert not path.exists()
    app.task(add).enqueue(1)
    assert path.exists()
    app.close()


# -- immediate mode ------------------------------------------------------------------
def test_immediate_mode_runs_the_job_before_enqueue_returns() -> None:
    app = App(immediate=True)
    task = app.task(add)
    job = task.enqueue(2, b=3)
    assert (job.status, job.result, job.attempts) == (Status.COMPLETED, 5, 1)
    app.close()


def test_immediate_mode_records_errors_like_a_worker(db_url: str) -> None:
    app = App(db_url, immediate=True)

    @app.task(max_attempts=3, backoff=conveyor.Fixed(0))
    def flaky(ctx: Context) -> str:
        if ctx.attempt < 3:
            raise ValueError(f"attempt {ctx.attempt}")
        return "third time lucky"

    @app.task
    def refuse(ctx: Context) -> None:
        raise conveyor.Terminal("bad input")

    done = flaky.enqueue()
    assert (done.status, done.result, done.attempts) == (Status.COMPLETED, "third time lucky", 3)
    failed = refuse.enqueue()
    assert (failed.status, failed.error_kind) == (Status.FAILED, ErrorKind.TERMINAL)
    assert failed.error == "Terminal: bad input"
    app.close()


def test_immediate_mode_runs_jobs_that_tasks_enqueue_and_async_tasks() -> None:
    app = App(immediate=True)
    seen: list[str] = []

    @app.task
    async def child(ctx: Context, word: str) -> str:
        await asyncio.sleep(0)
        seen.append(word)
        return word.upper()

    @app.task
    def parent(ctx: Context) -> int:
        return child.enqueue(word="hi").id

    job = parent.enqueue()
    assert job.status == Status.COMPLETED and seen == ["hi"]
    assert app.queue.get(job.result).result == "HI"  # type: ignore[union-attr]
    app.close()


async def _inside_a_loop(task: Any) -> Any:
    return task.enqueue(a=1)


def test_immediate_mode_works_from_inside_a_running_event_loop() -> None:
    app = App(immediate=True)

    @app.task
    async def double(ctx: Context, a: int) -> int:
        return a * 2

    job = asyncio.run(_inside_a_loop(double))
    assert job.result == 2
    app.close()


def test_drain_leaves_jobs_scheduled_for_later(app: App) -> None:
    task = app.task(add)
    task.enqueue(1, run_at=datetime.now(timezone.utc) + timedelta(hours=1))
    now = task.enqueue(2)
    assert app.drain() == 1
    assert app.queue.get(now.id).status == Status.COMPLETED  # type: ignore[union-attr]
    assert app.queue.stats().pending == 1
