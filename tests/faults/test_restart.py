"""The database restarted in the middle of a drain: worker processes and a
``conveyor serve`` process work through a backlog while the database (a server of the
test's own, never the shared one) is stopped for seconds and started again.

Afterwards: every job completed, and by a claim that ran exactly once (a run is recorded
outside the queue, in a file); the workers took up the work again and the server
enqueued again after the database returned; while it was gone the server answered 503
``database_unavailable`` with ``Retry-After``, and the logs hold one-line warnings, no
tracebacks. See ``restart.py``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import conveyor
from conveyor.aio import connect as aio_connect
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


def test_an_async_queue_hears_postgresql_is_gone_and_finds_it_back(
    own_postgres: ThrowawayPostgres,
) -> None:
    """The asyncio driver: while the server is stopped every call raises
    DatabaseUnavailable (none waits out the pool's timeout, ten seconds here), and
    once it is started again calls go through, with the jobs from before still there."""

    async def scenario() -> None:
        q = await aio_connect(f"{own_postgres.url}?connect_timeout=10")
        try:
            before = await q.enqueue("t")
            own_postgres.stop("fast")
            for _ in range(3):
                with pytest.raises(conveyor.DatabaseUnavailable):
                    await asyncio.wait_for(q.enqueue("t"), 9)
            own_postgres.start()
            deadline = time.monotonic() + 30
            while True:
                try:
                    await q.enqueue("t")
                    break
                except conveyor.DatabaseUnavailable:
                    assert time.monotonic() < deadline, "not back 30 s after the restart"
                    await asyncio.sleep(0.05)
            assert await q.get(before.id) is not None
            assert (await q.stats()).pending == 2
        finally:
            await q.close()

    asyncio.run(scenario())
