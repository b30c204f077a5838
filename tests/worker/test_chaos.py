"""Chaos: worker processes killed, stopped and disconnected while they work through
5,000 jobs; afterwards every job is completed exactly once (see ``chaos.py``)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import psycopg
import pytest

import conveyor
from conveyor import App, Context
from conveyor.job import Status
from tests.conftest import PG_URL
from tests.worker.chaos import MIN_KILLS, Chaos
from tests.worker.conftest import running
from tests.worker.procs import wait_for


@pytest.mark.slow
def test_chaos_every_job_completes_exactly_once(
    db_url: str, backend_name: str, tmp_path: Path
) -> None:
    cut = 1.5 if backend_name == "postgresql" else None  # also pg_terminate_backend
    report = Chaos(db_url, tmp_path, backend=backend_name, terminate_every=cut).run()
    print(report.summary())
    assert report.problems == []
    assert report.kills >= MIN_KILLS and report.stops >= 1 and report.stale_refused >= 1
    if cut:
        assert report.connections_terminated >= 1


@pytest.mark.parametrize("backend_name", ["postgresql"], indirect=True)
def test_a_worker_survives_its_connections_being_terminated(db_url: str, q: conveyor.Queue) -> None:
    name = f"conveyor_cut_{uuid.uuid4().hex[:8]}"
    app = App(f"{db_url}&application_name={name}")  # only the worker's connections are cut

    @app.task
    def step(ctx: Context, n: int) -> int:
        time.sleep(0.01)
        return n

    step.enqueue_many([{"n": n} for n in range(300)])
    cuts = 0
    with running(app, concurrency=4, lease=2) as worker:
        while q.stats().completed < 300 and cuts < 10:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (name,),
                )
            cuts += 1
            time.sleep(0.3)
        assert wait_for(lambda: q.stats().completed == 300, 60)
    assert worker.stats.db_errors > 0
    stats = q.stats()
    assert stats.completed == 300 and stats.running == stats.pending == 0
    assert {j.status for j in q.jobs(limit=1000)} == {Status.COMPLETED}
    app.close()


def test_the_chaos_audit_catches_a_job_left_undone(
    db_url: str, backend_name: str, tmp_path: Path
) -> None:
    """The audit must be able to fail: a job nobody ran is reported."""
    q = conveyor.connect(db_url)
    q.enqueue("chaos.work", {"n": 0})
    chaos = Chaos(db_url, tmp_path, backend=backend_name, jobs=1)
    chaos._audit(q)
    q.close()
    assert any("expected 1 completed" in p for p in chaos.report.problems)
    assert "no stale write was refused" in chaos.report.problems
