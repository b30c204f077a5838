"""``@app.periodic``: declarations checked when they are made, and the scheduler's
passes driven by hand on both databases (each pass at a chosen moment)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import conveyor
from conveyor import ConfigurationError
from conveyor.maintenance import Scheduler
from conveyor.schedule import Every


def test_periodic_on_a_task_or_a_plain_function() -> None:
    app = conveyor.App()

    @app.periodic(every=timedelta(seconds=30), payload={"region": "eu"}, priority=-1)
    @app.task(queue="reports", max_attempts=2)
    def report(ctx: conveyor.Context, region: str, full: bool = False) -> None: ...

    @app.periodic(cron="*/5 * * * *", tz="Europe/Paris", name="sweep", on_missed="skip")
    def sweep(ctx: conveyor.Context) -> None: ...

    assert isinstance(report, conveyor.Task) and isinstance(sweep, conveyor.Task)
    assert set(app.tasks) == {report.name, sweep.name}
    first = app.schedules[report.name]
    assert (first.task, first.queue, first.priority, first.max_attempts) == (
        report.name, "reports", -1, 2
    )  # fmt: skip
    assert first.payload == {"region": "eu"} and first.timing == Every(timedelta(seconds=30))
    assert first.on_missed == "run_once" and first.spec == "every 30s"
    second = app.schedules["sweep"]
    assert second.spec == "*/5 * * * * (Europe/Paris)" and second.on_missed == "skip"
    # A second schedule on the same task, with other arguments and its own name.
    app.periodic(cron="@hourly", name="report-us", payload={"region": "us"}, queue="slow")(report)
    assert app.schedules["report-us"].queue == "slow"


def _declare(app: conveyor.App, **options: Any) -> None:
    def task(ctx: conveyor.Context, size: int = 1) -> None: ...

    app.periodic(**options)(app.task(name="t")(task))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "either cron= or every="),
        ({"cron": "* * * * *", "every": 60}, "either cron= or every="),
        ({"cron": "99 * * * *"}, "bad minute"),
        ({"cron": "*/5 * * *"}, "five fields"),
        ({"every": 0}, "from 1 second"),
        ({"every": timedelta(seconds=-1)}, "from 1 second"),
        ({"cron": "0 3 * * *", "tz": "Europe/Atlantis"}, "time zone"),
        ({"every": 60, "tz": "UTC"}, "tz= applies to cron="),
        ({"every": 60, "on_missed": "catch_up"}, "on_missed"),
        ({"every": 60, "payload": {"colour": "red"}}, "unexpected keyword"),
        ({"every": 60, "payload": {"size": {1, 2}}}, "JSON"),
        ({"every": 60, "payload": [1]}, "payload"),
        ({"every": 60, "queue": ""}, "queue"),
        ({"every": 60, "priority": "high"}, "priority"),
        ({"every": 60, "max_attempts": 0}, "max_attempts"),
        ({"every": 60, "name": "x\n"}, "control characters"),
    ],
)
def test_bad_declarations_fail_when_they_are_made(options: dict[str, Any], message: str) -> None:
    app = conveyor.App()
    with pytest.raises(ConfigurationError, match=message):
        _declare(app, **options)
    assert app.schedules == {}


def test_schedule_names_are_unique_and_tasks_belong_to_the_app() -> None:
    app, other = conveyor.App(), conveyor.App()
    _declare(app, every=60)
    with pytest.raises(ConfigurationError, match="already declared"):
        app.periodic(every=120)(app.tasks["t"])
    with pytest.raises(ConfigurationError, match="another app"):
        other.periodic(every=60)(app.tasks["t"])
    with pytest.raises(ConfigurationError, match="a task or a function"):
        app.periodic(every=60, name="n")(42)  # type: ignore[arg-type]
    assert list(app.schedules) == ["t"] and other.schedules == {}


# -- the scheduler, one pass at a time ---------------------------------------------------
BASE = datetime(2030, 1, 1, 12, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


@pytest.fixture
def app() -> conveyor.App:
    app = conveyor.App()

    @app.periodic(every=timedelta(seconds=10), payload={"n": 7}, queue="ticks", priority=3)
    @app.task(name="tick", max_attempts=4)
    def tick(ctx: conveyor.Context, n: int) -> int:
        return n

    @app.periodic(cron="0 3 * * *", tz="Europe/Paris", name="nightly", on_missed="skip")
    @app.task(name="nightly.report")
    def report(ctx: conveyor.Context) -> None: ...

    return app


@pytest.fixture
def other(db_url: str) -> Iterator[conveyor.Queue]:
    """A second connection: another worker's."""
    queue = conveyor.connect(db_url)
    yield queue
    queue.close()


def ticks(q: conveyor.Queue) -> list[datetime]:
    return [j.run_at for j in q.jobs(task="tick")]


def test_the_first_pass_declares_the_schedules_and_owes_nothing_yet(
    q: conveyor.Queue, app: conveyor.App
) -> None:
    scheduler = Scheduler(q, app.schedules.values())
    assert scheduler.run_once(at(5)) == 0
    info = {s.name: s for s in q.schedules()}
    assert info["tick"].spec == "every 10s" and info["tick"].queue == "ticks"
    assert info["tick"].last_slot == at(5) and info["tick"].next_slot == at(10)
    assert info["nightly"].task == "nightly.report"
    assert info["nightly"].spec == "0 3 * * * (Europe/Paris)"
    assert info["nightly"].next_slot == datetime(2030, 1, 2, 2, tzinfo=timezone.utc)
    assert q.jobs() == []


def test_each_slot_is_enqueued_once_with_its_options(
    q: conveyor.Queue, other: conveyor.Queue, app: conveyor.App
) -> None:
    one, two = Scheduler(q, app.schedules.values()), Scheduler(other, app.schedules.values())
    assert one.run_once(at(1)) == 0 and two.run_once(at(2)) == 0
    assert one.run_once(at(10.5)) == 1
    assert two.run_once(at(10.6)) == 0  # the other worker took it
    assert two.run_once(at(20.1)) == 1 and one.run_once(at(20.2)) == 0
    assert one.run_once(at(20.3)) == 0
    [first, second] = q.jobs(task="tick")
    assert (first.run_at, second.run_at) == (at(10), at(20))  # run_at: the slot it stands for
    assert first.payload == {"n": 7} and first.queue == "ticks"
    assert first.priority == 3 and first.max_attempts == 4
    info = {s.name: s for s in q.schedules()}["tick"]
    assert (info.last_slot, info.next_slot) == (at(20), at(30))
    # A restarted worker declares again and keeps the slot reached.
    assert Scheduler(q, app.schedules.values()).run_once(at(25)) == 0
    assert ticks(q) == [at(10), at(20)]


def test_a_late_pass_enqueues_every_slot_of_the_grace(q: conveyor.Queue) -> None:
    app = conveyor.App()
    app.periodic(every=2, name="fast")(app.task(name="t")(lambda ctx: None))
    scheduler = Scheduler(q, app.schedules.values())
    scheduler.run_once(at(0))
    assert scheduler.run_once(at(4.5)) == 2  # 2 and 4: both within 5 s of their time
    assert [j.run_at for j in q.jobs()] == [at(2), at(4)]


def test_missed_slots_run_once_on_start_up(q: conveyor.Queue, app: conveyor.App) -> None:
    Scheduler(q, app.schedules.values()).run_once(at(1))
    # No worker for ten minutes: sixty slots went by; the latest of them runs, once.
    restarted = Scheduler(q, app.schedules.values())
    assert restarted.run_once(at(600 + 9)) == 1
    assert ticks(q) == [at(600)]
    assert restarted.run_once(at(600 + 9.5)) == 0
    assert restarted.run_once(at(610.2)) == 1
    assert ticks(q) == [at(600), at(610)]


def test_missed_slots_are_skipped_when_asked(q: conveyor.Queue, app: conveyor.App) -> None:
    first = Scheduler(q, app.schedules.values())
    first.run_once(at(1))
    # Workers were down over 03:00 in Paris (02:00 UTC) and start again at 09:00 UTC.
    morning = datetime(2030, 1, 2, 9, tzinfo=timezone.utc)
    restarted = Scheduler(q, app.schedules.values())
    restarted.run_once(morning)
    assert q.jobs(task="nightly.report") == []
    nightly = {s.name: s for s in q.schedules()}["nightly"]
    assert nightly.next_slot == datetime(2030, 1, 3, 2, tzinfo=timezone.utc)  # not a past one
    assert restarted.run_once(morning + timedelta(minutes=1)) == 1  # only the tick's
    assert restarted.run_once(datetime(2030, 1, 3, 2, 0, 0, 500000, tzinfo=timezone.utc)) >= 1
    [job] = q.jobs(task="nightly.report")
    assert job.run_at == datetime(2030, 1, 3, 2, tzinfo=timezone.utc)


def test_the_scheduler_refuses_a_naive_moment_and_an_empty_app(q: conveyor.Queue) -> None:
    with pytest.raises(ConfigurationError, match="no periodic schedule"):
        Scheduler(q, [])
    app = conveyor.App()
    app.periodic(every=60)(app.task(name="t")(lambda ctx: None))
    with pytest.raises(conveyor.InvalidArgument, match="timezone-aware"):
        Scheduler(q, app.schedules.values()).run_once(datetime(2030, 1, 1))
    assert q.schedules() == []


def test_a_worker_over_http_schedules_with_the_others(q: conveyor.Queue, app: conveyor.App) -> None:
    from fastapi.testclient import TestClient

    from conveyor.client import RemoteQueue
    from conveyor.web import create_app

    # The server takes slots only near its database's clock (a slot far ahead would stop
    # a schedule): this run's moments lie half an hour from now, not in 2030.
    base = datetime.now(timezone.utc).replace(second=0, microsecond=0) + timedelta(minutes=30)

    def near(seconds: float) -> datetime:
        return base + timedelta(seconds=seconds)

    with TestClient(create_app(q, tokens={}), base_url="http://localhost") as http:
        remote = RemoteQueue(str(http.base_url), http=http)
        over_http = Scheduler(remote, app.schedules.values())
        direct = Scheduler(q, app.schedules.values())
        assert over_http.run_once(near(0.5)) == 0 and direct.run_once(near(1)) == 0
        assert over_http.run_once(near(10.2)) == 1 and direct.run_once(near(10.3)) == 0
        assert direct.run_once(near(20.2)) == 1 and over_http.run_once(near(20.3)) == 0
        assert ticks(q) == [near(10), near(20)]
        assert over_http.run_once() == 0  # now by the server's clock: before those slots
        listed = http.get("/api/schedules").json()["schedules"]
        assert {s["name"] for s in listed} == {"tick", "nightly"}
