"""The metadata-sync protocol over HTTP: clients on several machines claim batches of
100, acknowledge the previous batch with the next request and watch the remaining
count. Three concurrent RemoteQueues against a real server, 1,000 jobs, no duplicates."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from fastapi import FastAPI

from conveyor.client import RemoteQueue
from conveyor.job import Status
from tests.web.conftest import TOKEN_OF

JOBS = 1000
BATCH = 100
CLIENTS = 3


@pytest.mark.slow
def test_three_remote_clients_drain_1000_jobs_in_acknowledged_batches(
    app: FastAPI, server_url: str
) -> None:
    with RemoteQueue(server_url, TOKEN_OF["admin"]) as admin:
        admin.enqueue_many(
            [
                {"task": "books.sync", "payload": {"book": n}, "key": f"book-{n}"}
                for n in range(JOBS)
            ],
            queue="sync",
        )
    seen: list[list[int]] = [[] for _ in range(CLIENTS)]
    remaining: list[list[int]] = [[] for _ in range(CLIENTS)]
    errors: list[BaseException] = []
    start = threading.Barrier(CLIENTS)

    def sync_client(index: int) -> None:
        try:
            with RemoteQueue(server_url, TOKEN_OF["worker"], worker_name=f"m{index}") as q:
                start.wait(timeout=30)
                previous = None
                while True:
                    claim = q.claim("sync", limit=BATCH, lease=300, ack=previous)
                    assert claim.remaining is not None
                    remaining[index].append(claim.remaining)
                    previous = claim.id
                    if not claim.jobs:
                        if claim.remaining == 0:
                            return
                        # Jobs another client is claiming at this very moment still
                        # count as claimable (PostgreSQL skips rows it has locked).
                        time.sleep(0.01)
                        continue
                    assert len(claim.jobs) <= BATCH
                    assert {j.claim_id for j in claim.jobs} == {claim.id}
                    seen[index].extend(j.payload["book"] for j in claim.jobs)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=sync_client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a client did not finish"
    assert errors == []

    everything = [book for books in seen for book in books]
    duplicates = [book for book, n in Counter(everything).items() if n > 1]
    assert duplicates == []
    assert sorted(everything) == list(range(JOBS))
    for counts in remaining:
        assert counts[-1] == 0
        # A claim that found every row locked by the others' claims in flight counts them
        # all as claimable still: JOBS at most.
        assert all(0 <= n <= JOBS for n in counts), counts
    with RemoteQueue(server_url, TOKEN_OF["reader"]) as reader:
        stats = reader.stats("sync")
        assert (stats.completed, stats.pending, stats.running) == (JOBS, 0, 0)
        assert all(j.status == Status.COMPLETED for j in reader.jobs(queue="sync", limit=JOBS))
