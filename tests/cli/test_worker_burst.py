"""``conveyor worker --burst`` ends once nothing is claimable; its last line says what is
still waiting for its time: retries backing off, jobs scheduled for later."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import conveyor
from tests.cli.conftest import Cli, cli_env

APP = """
import conveyor

app = conveyor.App({url!r})


@app.task(name="flaky", max_attempts=3, backoff=conveyor.Backoff(base=600, jitter=0))
def flaky(ctx):
    raise RuntimeError("boom")


@app.task(name="ok")
def ok(ctx):
    return 1
"""


def test_a_burst_worker_says_what_still_waits(cli: Cli, db_url: str, tmp_path: Path) -> None:
    (tmp_path / "burst_tasks.py").write_text(APP.format(url=db_url))
    with conveyor.connect(db_url) as q:
        q.enqueue("flaky")
        q.enqueue("ok")
        q.enqueue("ok", run_at=q.now() + timedelta(hours=1))
    env = cli_env(PYTHONPATH=str(tmp_path))
    result = cli("worker", "--app", "burst_tasks:app", "--burst", "--log-level", "warning",
                 env=env)  # fmt: skip
    assert result.code == 0, result.describe()
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("1 retryable job(s) wait for their back-off; 1 job(s) are scheduled")
    assert "(the next is due in 9m" in last or "(the next is due in 10m" in last
    nothing = cli("worker", "--app", "burst_tasks:app", "--burst", "--queues", "other",
                  "--log-level", "warning", env=env)  # fmt: skip
    assert nothing.stderr.strip().splitlines()[-1] == "nothing to do"
