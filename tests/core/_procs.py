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


def claim_forever(url: str, batch: int) -> None:
    """Claim big batches in a loop until killed."""
    with conveyor.connect(url, migrate=False) as q:
        print("ready", flush=True)
        while True:
            q.claim(limit=batch, lease=3600, count_remaining=False)


if __name__ == "__main__":
    mode, url, *rest = sys.argv[1:]
    if mode == "claim":
        claim_until_empty(url, int(rest[0]))
    elif mode == "enqueue":
        enqueue_keys(url, float(rest[0]), int(rest[1]))
    elif mode == "claim-forever":
        claim_forever(url, int(rest[0]))
    else:
        raise SystemExit(f"unknown mode {mode}")
