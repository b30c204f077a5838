"""Apps that worker *processes* run in the process tests (``--app tests.worker.apps:…``).

Their tasks record what they did by appending one line per event to the file named by
``$CONVEYOR_TEST_EFFECTS``: one ``write`` on an ``O_APPEND`` file, so lines from
concurrent processes never interleave, and a line is there even if the process is
SIGKILLed right after."""

from __future__ import annotations

import os
import random
import signal
import time

import conveyor

EFFECTS_ENV = "CONVEYOR_TEST_EFFECTS"


def record(line: str) -> None:
    fd = os.open(os.environ[EFFECTS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


# -- chaos: many short jobs, each leaving one effect per run -------------------------
chaos = conveyor.App()


@chaos.task(name="chaos.work")
def work(ctx: conveyor.Context, n: int) -> int:
    time.sleep(random.uniform(0, 0.004))
    record(f"{ctx.job.id} {ctx.claim_id}")
    return n


# -- poison: a job that kills the worker running it ----------------------------------
poison = conveyor.App()


@poison.task(name="poison.die")
def die(ctx: conveyor.Context) -> None:
    record(f"die {ctx.job.id} {ctx.attempt}")
    os.kill(os.getpid(), signal.SIGKILL)


@poison.task(name="poison.ok")
def ok(ctx: conveyor.Context) -> str:
    record(f"ok {ctx.job.id} {ctx.attempt}")
    return "fine"


# -- shutdown: tasks that take a while the first time ---------------------------------
shutdown = conveyor.App()


@shutdown.task(name="shutdown.nap")
def nap(ctx: conveyor.Context, seconds: float, only_first: bool = True) -> str:
    record(f"start {ctx.job.id} {ctx.attempt}")
    if ctx.attempt == 1 or not only_first:
        time.sleep(seconds)
    record(f"done {ctx.job.id} {ctx.attempt}")
    return "rested"


# -- latency: jobs that note when they started, by the database clock ----------------
latency = conveyor.App()


@latency.task(name="latency.ping")
def ping(ctx: conveyor.Context) -> float:
    return ctx.queue.now().timestamp()


# -- failing: attempts that fail, for the worker's failure logs ----------------------
failing = conveyor.App()


@failing.task(name="failing.boom", backoff=conveyor.Fixed(0))
def boom(ctx: conveyor.Context, n: int) -> None:
    record(f"claim {ctx.claim_id}")
    raise ValueError(f"bad input {n}")


@failing.task(name="failing.later")
def later(ctx: conveyor.Context) -> None:
    record(f"claim {ctx.claim_id}")
    raise conveyor.Snooze(60)
