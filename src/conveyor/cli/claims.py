"""Who is working on what: running jobs grouped by worker and by claim, for ``info``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from conveyor.cli.output import when
from conveyor.cli.tables import Cell, Column, fitted
from conveyor.info import WorkerInfo
from conveyor.job import Job


@dataclass
class ClaimSummary:
    claim_id: str
    worker: str | None
    queue: str
    jobs: int = 0
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    expired: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "worker": self.worker,
            "queue": self.queue,
            "jobs": self.jobs,
            "claimed_at": _iso(self.claimed_at),
            "lease_expires_at": _iso(self.lease_expires_at),
            "expired": self.expired,
        }


@dataclass
class WorkerSummary:
    name: str
    jobs: int = 0
    claims: set[str] = field(default_factory=set)
    queues: set[str] = field(default_factory=set)
    last_heartbeat_at: datetime | None = None
    registered: bool = False  # in the worker registry (else known only by its claims)
    concurrency: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.name,
            "jobs": self.jobs,
            "claims": len(self.claims),
            "queues": sorted(self.queues),
            "last_heartbeat_at": _iso(self.last_heartbeat_at),
            "registered": self.registered,
            "concurrency": self.concurrency,
        }


def summarize(
    running: Iterable[Job], now: datetime
) -> tuple[list[WorkerSummary], list[ClaimSummary]]:
    """Workers (busiest first) and claims (expired first, then oldest)."""
    workers: dict[str, WorkerSummary] = {}
    claims: dict[str, ClaimSummary] = {}
    for job in running:
        if job.claim_id is None:
            continue
        claim = claims.setdefault(job.claim_id, ClaimSummary(job.claim_id, job.worker, job.queue))
        claim.jobs += 1
        claim.claimed_at = _earliest(claim.claimed_at, job.claimed_at)
        claim.lease_expires_at = _latest(claim.lease_expires_at, job.lease_expires_at)
        worker = workers.setdefault(job.worker or "?", WorkerSummary(job.worker or "?"))
        worker.jobs += 1
        worker.claims.add(job.claim_id)
        worker.queues.add(job.queue)
        seen = job.heartbeat_at or job.claimed_at
        worker.last_heartbeat_at = _latest(worker.last_heartbeat_at, seen)
    for claim in claims.values():
        claim.expired = claim.lease_expires_at is not None and claim.lease_expires_at < now
    by_load = sorted(workers.values(), key=lambda w: (-w.jobs, w.name))
    by_urgency = sorted(
        claims.values(),
        key=lambda c: (not c.expired, c.claimed_at or now, c.claim_id),
    )
    return by_load, by_urgency


def with_registered(
    busy: list[WorkerSummary], registered: Iterable[WorkerInfo]
) -> list[WorkerSummary]:
    """The workers at work joined with the registry, so idle workers are listed too
    (busiest first)."""
    by_name = {w.name: w for w in busy}
    for info in registered:
        worker = by_name.setdefault(info.name, WorkerSummary(info.name))
        worker.registered = True
        worker.concurrency = info.concurrency
        worker.queues.update(info.queues)
        worker.last_heartbeat_at = _latest(worker.last_heartbeat_at, info.last_seen_at)
    return sorted(by_name.values(), key=lambda w: (-w.jobs, w.name))


def workers_table(workers: list[WorkerSummary], now: datetime, *, width: int) -> Table:
    rows: list[dict[str, Cell]] = [
        {"worker": w.name,
         "jobs": f"{w.jobs}/{w.concurrency}" if w.concurrency is not None else str(w.jobs),
         "claims": str(len(w.claims)),
         "queues": ", ".join(sorted(w.queues)), "last heartbeat": when(now, w.last_heartbeat_at)}
        for w in workers
    ]  # fmt: skip
    return fitted(_WORKER_COLUMNS, rows, width)


_WORKER_COLUMNS = (
    Column("worker", free=True),
    Column("jobs", right=True),
    Column("claims", right=True),
    Column("queues", free=True),
    Column("last heartbeat", short="heartbeat"),
)


def claims_table(
    claims: list[ClaimSummary], now: datetime, *, width: int, limit: int = 20
) -> Table:
    """Claim ids show whole: they are what ``conveyor release`` takes."""
    rows: list[dict[str, Cell]] = []
    for c in claims[:limit]:
        lease = Text(when(now, c.lease_expires_at), style="bold red" if c.expired else "")
        if c.expired:
            lease.append("  expired", style="bold red")
        claimed = when(now, c.claimed_at)
        rows.append({"claim": c.claim_id, "worker": c.worker or "?", "queue": c.queue,
                     "jobs": str(c.jobs), "claimed": claimed, "lease": lease})  # fmt: skip
    if len(claims) > limit:
        rows.append({"claim": f"… and {len(claims) - limit} more"})
    return fitted(_CLAIM_COLUMNS, rows, width)


_CLAIM_COLUMNS = (
    Column("claim"),
    Column("worker", free=True),
    Column("queue", free=True),
    Column("jobs", right=True),
    Column("claimed"),
    Column("lease"),
)


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
