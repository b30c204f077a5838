"""An app that worker processes run against a server (``--server``), recording what they
do in the file named by ``$CONVEYOR_TEST_EFFECTS``."""

from __future__ import annotations

import conveyor
from conveyor.notify import CallbackNotifier
from tests.worker.apps import record

remote = conveyor.App(
    notifier=CallbackNotifier(lambda job, who: record(f"told {who} {job.id} {job.status}"))
)


@remote.task(name="remote.square", queue="remote")
def square(ctx: conveyor.Context, n: int) -> int:
    ctx.progress(total=1, completed=1, checkpoint=n)
    record(f"ran {ctx.job.id}")
    return n * n


@remote.task(name="remote.refuse", queue="remote")
def refuse(ctx: conveyor.Context) -> None:
    raise conveyor.Terminal("not this one")
