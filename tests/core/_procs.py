"""Child processes for the concurrency tests: ``python -m tests.core._procs MODE URL ...``.

Each writes what it did as JSON lines on stdout so the parent can check the totals."""

from __future__ import annotations

import json
import sys
import time

import conveyor


def claim_until_empty(url: str, batch: int) -> None:
    """Claim and complete until the queue is empty; print every claimed id."""
    with conveyor.connect(url, migrate=False) as q:
        empty_rounds = 0
        while empty_rounds < 3:
            claim = q.claim(limit=batch, lease=300, count_remaining=False)
            if not claim.jobs:
                empty_rounds += 1
                time.sleep(0.05)
                continue
            empty_rounds = 0
            done = q.complete_many([(j.id, claim.id, None) for j in claim.jobs])
            print(json.dumps({"claimed": [j.id for j in claim.jobs], "completed": len(done)}))
            sys.stdout.flush()


def enqueue_keys(url: str, start_at: float, keys: int) -> None:
    """Wait for the common start time, then enqueue every key once."""
    with conveyor.connect(url, migrate=False) as q:
        time.sleep(max(0.0, start_at - time.time()))
        ids = {f"k{i}": q.enqueue("t", key=f"k{i}").id for i in range(keys)}
        print(json.dumps(ids))


def first_claims(url: str, start_at: float, rounds: int, batch: int) -> None:
    """At the common start time, and each second after it for ``rounds`` in all, take
    one claim of ``batch`` from queue "race" (every process started at once does the
    same); print how many jobs each claim got."""
    with conveyor.connect(url, migrate=False) as q:
        got = []
        for n in range(rounds):
            time.sleep(max(0.0, start_at + n - time.time()))
            got.append(len(q.claim("race", limit=batch, lease=300).jobs))
        print(json.dumps(got))


def claim_forever(url: str, batch: int) -> None:
    """Claim big batches in a loop until killed."""
    with conveyor.connect(url, migrate=False) as q:
        print("ready", flush=True)
        while True:
            q.claim(limit=batch, lease=3600, count_remaining=False)


def claim_capped(url: str, hold: float) -> None:
    """Claim from queue "capped" one or two at a time, hold each job a moment, complete
    it; stop after a second of finding nothing."""
    import random

    with conveyor.connect(url, migrate=False) as q:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 1.0:
            claim = q.claim("capped", limit=2, lease=60, count_remaining=False)
            if not claim.jobs:
                time.sleep(0.005)
                continue
            idle_since = time.monotonic()
            time.sleep(random.uniform(0, hold))
            q.complete_many([(j.id, claim.id, None) for j in claim.jobs])
            print(json.dumps({"claimed": [j.id for j in claim.jobs]}), flush=True)


def take_slots(url: str, start_at: float, slots: int) -> None:
    """From the common start time, try to run every slot of schedule "race"."""
    from datetime import datetime, timedelta, timezone

    base = datetime(2030, 1, 1, tzinfo=timezone.utc)
    with conveyor.connect(url, migrate=False) as q:
        time.sleep(max(0.0, start_at - time.time()))
        won = []
        for n in range(slots):
            slot = base + timedelta(minutes=n)
            job = q.run_schedule_slot(
                "race", slot=slot, next_slot=slot + timedelta(minutes=1), task="tick",
                payload={"slot": n}, queue="ticks",
            )  # fmt: skip
            if job is not None:
                won.append(n)
        print(json.dumps(won))


def prune_slowly(url: str, path: str) -> None:
    """Apply the retention policies with a file archive, 20 jobs a batch, a pause
    between, until killed."""
    from conveyor.maintenance import RetentionPruner

    with conveyor.connect(url, migrate=False) as q:
        pruner = RetentionPruner(q, batch=20, pause=0.05, archive=f"file:{path}")
        print("ready", flush=True)
        while True:
            pruner.run_once()
            time.sleep(0.05)


if __name__ == "__main__":
    mode, url, *rest = sys.argv[1:]
    if mode == "claim":
        claim_until_empty(url, int(rest[0]))
    elif mode == "enqueue":
        enqueue_keys(url, float(rest[0]), int(rest[1]))
    elif mode == "first-claims":
        first_claims(url, float(rest[0]), int(rest[1]), int(rest[2]))
    elif mode == "claim-forever":
        claim_forever(url, int(rest[0]))
    elif mode == "claim-capped":
        claim_capped(url, float(rest[0]))
    elif mode == "slots":
        take_slots(url, float(rest[0]), int(rest[1]))
    elif mode == "prune":
        prune_slowly(url, rest[0])
    else:
        raise SystemExit(f"unknown mode {mode}")
