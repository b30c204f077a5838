"""Pause, resume and limits from the shell; the registered workers and schedules."""

from __future__ import annotations

from datetime import timedelta

import conveyor
from tests.cli.conftest import Cli, assert_one_line_error


def test_pause_resume_and_limits(cli: Cli, db_url: str) -> None:
    assert cli("migrate", "--db", db_url).code == 0
    assert "no queue has flow control" in cli("limits", "--db", db_url).stdout
    set_ = cli("limits", "mail", "--max-running", "3", "--rate", "10/1s", "--json", "--db", db_url)
    assert set_.json()["max_running"] == 3 and set_.json()["rate"] == {"limit": 10, "per": 1.0}
    paused = cli("pause", "mail", "--db", db_url)
    assert "paused" in paused.stdout
    with conveyor.connect(db_url) as q:
        q.enqueue("t", queue="mail")
        assert q.claim("mail").jobs == []  # the CLI's pause holds for every worker
    listing = cli("limits", "--db", db_url).stdout
    assert "mail" in listing and "yes" in listing and "at most 3 running" in listing
    assert "running again" in cli("resume", "mail", "--db", db_url).stdout
    cleared = cli("limits", "mail", "--clear", "--json", "--db", db_url).json()
    assert cleared["max_running"] is None and cleared["rate"] is None
    with conveyor.connect(db_url) as q:
        assert len(q.claim("mail").jobs) == 1


def test_limits_refuse_bad_values(cli: Cli, sqlite_url: str) -> None:
    cli("migrate", "--db", sqlite_url)
    assert_one_line_error(cli("limits", "q", "--rate", "fast", "--db", sqlite_url), code=2,
                          contains="--rate")  # fmt: skip
    assert_one_line_error(cli("limits", "--max-running", "3", "--db", sqlite_url), code=2,
                          contains="QUEUE")  # fmt: skip
    assert_one_line_error(cli("limits", "q", "--max-running", "0", "--db", sqlite_url), code=2,
                          contains="max_running")  # fmt: skip
    assert_one_line_error(cli("limits", "q", "--clear", "--rate", "1/s", "--db", sqlite_url),
                          code=2)  # fmt: skip


def test_workers_and_schedules_are_listed(cli: Cli, db_url: str) -> None:
    with conveyor.connect(db_url) as q:
        q.worker_seen("box:41", host="box", pid=41, queues=["mail"], concurrency=4,
                      version="1.0", running=2, ttl=60)  # fmt: skip
        now = q.now()
        q.save_schedule("nightly", task="report", queue="cron", spec="0 3 * * *",
                        first_slot=now, next_slot=now + timedelta(hours=3))  # fmt: skip
    out = cli("workers", "--db", db_url).stdout
    assert "box:41" in out and "mail" in out and "2/4" in out
    [worker] = cli("workers", "--json", "--db", db_url).json()["workers"]
    assert worker["pid"] == 41 and worker["queues"] == ["mail"]
    out = cli("schedules", "--db", db_url).stdout
    assert "nightly" in out and "report" in out and "0 3 * * *" in out
    [schedule] = cli("schedules", "--json", "--db", db_url).json()["schedules"]
    assert schedule["task"] == "report" and schedule["next_slot"] is not None


def test_a_schedule_that_never_ran_shows_no_last_run(cli: Cli, db_url: str) -> None:
    app = conveyor.App(immediate=True)

    @app.periodic(every=3600, name="hourly")
    def hourly(ctx: conveyor.Context) -> None: ...

    spec = app.schedules["hourly"].spec
    with conveyor.connect(db_url) as q:
        now = q.now()
        slot = now.replace(minute=0, second=0, microsecond=0)
        for name in ("fresh", "ran"):  # declared now: no slot before it is owed
            q.save_schedule(name, task="report", queue="cron", spec=spec, first_slot=now,
                            next_slot=slot + timedelta(hours=1))  # fmt: skip
        q.run_schedule_slot(
            "ran", slot=slot + timedelta(hours=1), next_slot=slot + timedelta(hours=2),
            task="report", queue="cron",
        )  # fmt: skip
    listed = {s["name"]: s for s in cli("schedules", "--json", "--db", db_url).json()["schedules"]}
    assert listed["fresh"]["last_run"] is None
    assert listed["ran"]["last_run"] is not None
    rows = {line.split()[0]: line for line in cli("schedules", "--db", db_url).stdout.splitlines()}
    assert "-" in rows["fresh"].split() and "ago" not in rows["fresh"], rows["fresh"]
