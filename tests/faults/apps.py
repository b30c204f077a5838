"""The app that worker processes run in the fault tests: each run of a job appends
``<job id> <claim id>`` to the file named by ``$CONVEYOR_TEST_EFFECTS`` (see
``tests/worker/apps.py``), outside the database that is failing."""

from __future__ import annotations

import time

import conveyor
from tests.worker.apps import record

storage = conveyor.App()


@storage.task(name="storage.work")
def work(ctx: conveyor.Context, n: int, pad: str = "", sleep: float = 0.0) -> int:
    record(f"{ctx.job.id} {ctx.claim_id}")
    time.sleep(sleep)  # a run long enough to be under way when the database changes
    return n
