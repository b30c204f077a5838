"""The database restarted in the middle of a drain: worker processes and a
``conveyor serve`` process work through a backlog while the database (a server of the
test's own, never the shared one) is stopped for seconds and started again.

Afterwards: every job completed, and by a claim that ran exactly once (a run is recorded
outside the queue, in a file); the workers took up the work again and the server
enqueued again after the database returned; while it was gone the server answered 503
``database_unavailable`` with ``Retry-After``, and the logs hold one-line warnings, no
tracebacks. See ``restart.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.restart import Restart
from tests.faults.servers import ThrowawayMariaDB, ThrowawayPostgres


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgresql_restarted_under_load_loses_nothing(
    own_postgres: ThrowawayPostgres, tmp_path: Path, mode: str
) -> None:
    report = Restart(own_postgres, tmp_path, jobs=3000, down=4.0, mode=mode).run()
    print(report.summary())
    assert report.problems == []
    assert report.answers_while_down.get("database_unavailable", 0) >= 1
    assert report.runs_recorded >= report.jobs


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_mariadb_restarted_under_load_loses_nothing(
    own_mariadb: ThrowawayMariaDB, tmp_path: Path, mode: str
) -> None:
    report = Restart(own_mariadb, tmp_path, jobs=3000, down=4.0, mode=mode).run()
    print(report.summary())
    assert report.problems == []
    assert report.answers_while_down.get("database_unavailable", 0) >= 1
    assert report.runs_recorded >= report.jobs
