"""Claims: taking jobs to run, and the admin's ways of handing them back."""

from __future__ import annotations

import uuid
from typing import Any

from conveyor import validation as check
from conveyor.job import Claim, Status
from conveyor.ops import Announce, Call, Once, Plan, Query, Row, Values
from conveyor.ops.defaults import MAX_CLAIM, Defaults, claim_id, queue_names
from conveyor.retry import seconds


def claim(
    d: Defaults,
    queue: Any,
    *,
    limit: Any,
    lease: Any,
    worker: Any,
    ack: Any,
    count_remaining: Any,
) -> Call[Claim]:
    """Up to ``limit`` claimable jobs, by priority then FIFO, under one new claim id."""
    name = check.name(queue, "queue")
    check.integer(limit, "limit", low=1, high=MAX_CLAIM)
    lease_s = seconds(lease, "lease", allow_zero=False)
    who = check.name(worker, "worker") if worker is not None else d.worker_name
    previous = None if ack is None else check.text(ack, "ack", max_length=200)
    counting = bool(count_remaining)
    args = {"queue": name, "limit": limit, "lease": lease_s, "worker": worker, "ack": previous,
            "count_remaining": counting}  # fmt: skip

    def build(v: Values) -> Plan[Claim] | Once[Claim]:
        params = {"queue": name, "limit": limit, "lease_s": lease_s,
                  "claim_id": uuid.uuid4().hex, "worker": who}  # fmt: skip
        if not previous and not counting:  # a worker's claim: one statement
            return Once(
                Query("claim_jobs", params),
                lambda rows: _claim(v, params, rows, remaining=None, acked=0),
            )
        return _claim_acking(v, params, previous, counting)

    return Call("claim", args, build)


def _claim_acking(
    v: Values, params: dict[str, Any], previous: str | None, counting: bool
) -> Plan[Claim]:
    acked: list[Row] = []
    if previous:
        acked = yield Query("ack_claim", {"claim_id": previous})
        yield Announce(finished=[r["id"] for r in acked])
    rows = yield Query("claim_jobs", params)
    remaining = None
    if counting:
        counted = yield Query("count_claimable", {"queue": params["queue"]})
        remaining = int(counted[0]["n"]) if counted else 0
    return _claim(v, params, rows, remaining=remaining, acked=len(acked))


def _claim(
    v: Values, params: dict[str, Any], rows: list[Row], *, remaining: int | None, acked: int
) -> Claim:
    jobs = sorted((v.decode_job(r) for r in rows), key=lambda j: (j.priority, j.id))
    return Claim(
        id=params["claim_id"], queue=params["queue"], jobs=jobs, remaining=remaining, acked=acked
    )


def ack(claim: Any) -> Call[int]:
    """Complete every running job of a claim."""
    held = claim_id(claim)

    def build(v: Values) -> Plan[int]:
        rows = yield Query("ack_claim", {"claim_id": held})
        yield Announce(finished=[r["id"] for r in rows])
        return len(rows)

    return Call("ack", {"claim_id": held}, build)


def release(claim: Any) -> Call[int]:
    """A claim's running jobs back to pending (an admin reset)."""
    held = claim_id(claim)

    def build(v: Values) -> Plan[int]:
        rows = yield Query("release_claim", {"claim_id": held})
        yield Announce(queues={r["queue"] for r in rows})
        return len(rows)

    return Call("release", {"claim_id": held}, build)


def reset_claims(older_than: Any) -> Call[int]:
    """Every running job claimed more than ``older_than`` ago back to pending."""
    older_than_s = seconds(older_than, "older_than")

    def build(v: Values) -> Plan[int]:
        rows = yield Query("reset_claims", {"older_than_s": older_than_s})
        yield Announce(queues={r["queue"] for r in rows})
        return len(rows)

    return Call("reset_claims", {"older_than": older_than_s}, build)


def recover() -> Call[int]:
    """Running jobs whose lease expired back to pending, or to failed when their
    attempts are spent."""

    def build(v: Values) -> Plan[int]:
        rows = yield Query("recover_expired")
        yield Announce(
            queues={r["queue"] for r in rows if r["status"] == Status.PENDING},
            finished=[r["id"] for r in rows if r["status"] == Status.FAILED],
        )
        return len(rows)

    return Call("recover", {}, build)


__all__ = ["ack", "claim", "queue_names", "recover", "release", "reset_claims"]
