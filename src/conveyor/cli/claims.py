"""Who is working on what: running jobs grouped by worker and by claim, for ``info``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from conveyor.cli.output import when
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.name,
            "jobs": self.jobs,
            "claims": len(self.claims),
            "queues": sorted(self.queues),
            "last_heartbeat_at": _iso(self.last_heartbeat_at),
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


def workers_table(workers: list[WorkerSummary], now: datetime) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name, justify in (("worker", "left"), ("jobs", "right"), ("claims", "right"),
                          ("queues", "left"), ("last heartbeat", "left")):  # fmt: skip
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for w in workers:
        table.add_row(w.name, str(w.jobs), str(len(w.claims)), ", ".join(sorted(w.queues)),
                      when(now, w.last_heartbeat_at))  # fmt: skip
    return table


def claims_table(claims: list[ClaimSummary], now: datetime, *, limit: int = 20) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("claim", "worker", "queue", "jobs", "claimed", "lease"):
        table.add_column(name, no_wrap=True, justify="right" if name == "jobs" else "left")
    for c in claims[:limit]:
        lease = Text(when(now, c.lease_expires_at), style="bold red" if c.expired else "")
        if c.expired:
            lease.append("  expired", style="bold red")
        table.add_row(c.claim_id, c.worker or "?", c.queue, str(c.jobs),
                      when(now, c.claimed_at), lease)  # fmt: skip
    if len(claims) > limit:
        table.add_row(f"… and {len(claims) - limit} more", "", "", "", "", "")
    return table


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
