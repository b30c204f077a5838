"""The sync client that runs on other machines: claim 100, look each book up in the
external catalogue, report the ids, and acknowledge the batch with the next request."""

from __future__ import annotations

from collections import Counter

import httpx

from conveyor.client import RemoteQueue
from examples.metadata_sync.app import QUEUE


def catalogue_lookup(title: str) -> str:
    """The stand-in for the external catalogue's search API."""
    return f"hc-{abs(hash(title)) % 10**9}"


def run_client(
    server: str, token: str, name: str, lookups: Counter[int], *, stop_after: int | None = None
) -> str | None:
    """Sync until nothing is left. ``stop_after``: give up after that many batches without
    acknowledging the last one (a client that crashed); returns its claim id then."""
    with (
        RemoteQueue(f"{server}/queue", token, worker_name=name) as q,
        httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"}) as app,
    ):
        previous: str | None = None
        batches = 0
        while True:
            claim = q.claim(QUEUE, limit=100, lease=600, ack=previous)
            if not claim.jobs:
                return None
            batches += 1
            for job in claim.jobs:
                book = job.payload["book_id"]
                if stop_after is not None and batches > stop_after:
                    return claim.id  # crashed before working on this batch
                lookups[book] += 1
                external = catalogue_lookup(job.payload["title"])
                app.put(f"/books/{book}/external-id", json={"external_id": external})
            previous = claim.id
