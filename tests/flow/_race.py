"""A child process for the scheduler race: ``python -m tests.flow._race URL START SLOTS``.

It runs the scheduler of the ticker app (three schedules, every second) one pass per
slot, at moments chosen so that every process passes over the same slots at the same
time, starting together at wall-clock ``START``; then prints how many jobs it enqueued."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta, timezone

import conveyor
from conveyor.maintenance import Scheduler
from tests.flow.apps import ticker

BASE = datetime(2030, 1, 1, tzinfo=timezone.utc)


def race(url: str, start_at: float, slots: int) -> None:
    with conveyor.connect(url, migrate=False) as q:
        scheduler = Scheduler(q, ticker.schedules.values())
        scheduler.run_once(BASE)  # declares the schedules; owes nothing yet
        print("ready", flush=True)
        time.sleep(max(0.0, start_at - time.time()))
        won = 0
        for n in range(1, slots + 1):
            won += scheduler.run_once(BASE + timedelta(seconds=n, milliseconds=500))
        print(won, flush=True)


if __name__ == "__main__":
    race(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
