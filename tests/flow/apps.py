"""Apps that the worker *processes* of the flow tests run (``--app tests.flow.apps:…``).

Tasks note what they did as lines in the file named by ``$CONVEYOR_TEST_EFFECTS`` (one
``O_APPEND`` write each, so lines of concurrent processes never interleave); times are
``time.time()``, one clock for every process of this machine."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import conveyor
from tests.worker.apps import EFFECTS_ENV, record

# -- periodic jobs: three schedules of one task, every second ------------------------
ticker = conveyor.App()


@ticker.task(name="flow.tick", queue="ticks")
def tick(ctx: conveyor.Context, schedule: str) -> str:
    return schedule


for _name in ("a", "b", "c"):
    ticker.periodic(every=timedelta(seconds=1), name=f"tick-{_name}", payload={"schedule": _name})(
        tick
    )


# -- flow control: tasks that hold their slot a while, and quick ones ---------------------
flow = conveyor.App()


@flow.task(name="flow.hold")
def hold(ctx: conveyor.Context, seconds: float) -> None:
    record(f"start {ctx.job.id} {time.time():.6f} {ctx.job.group or '-'}")
    time.sleep(seconds)
    record(f"end {ctx.job.id} {time.time():.6f} {ctx.job.group or '-'}")


@flow.task(name="flow.quick")
def quick(ctx: conveyor.Context) -> None:
    return None


@flow.task(name="flow.snoozy", max_attempts=1)
def snoozy(ctx: conveyor.Context, snoozes: int) -> int:
    record(f"run {ctx.job.id} {ctx.attempt} {os.getpid()}")
    path = os.environ[EFFECTS_ENV]
    with open(path) as f:
        runs = sum(line.startswith(f"run {ctx.job.id} ") for line in f)
    if runs <= snoozes:
        raise conveyor.Snooze(0.2)
    return runs


@flow.task(name="book.step")
def step(ctx: conveyor.Context, name: str, fail: bool = False) -> str:
    record(f"start {name} {time.time():.6f}")
    time.sleep(0.05)
    if fail:
        raise conveyor.Terminal(f"{name} cannot be read")
    record(f"end {name} {time.time():.6f}")
    return name
