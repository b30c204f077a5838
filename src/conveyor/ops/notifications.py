"""Subscribers of finished jobs, taken under a lease by whoever tells them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conveyor import machine
from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.job import Job
from conveyor.ops import Call, Plan, Values
from conveyor.ops.defaults import MAX_LIST, job_id
from conveyor.retry import seconds


def take_notifications(*, limit: Any, lease: Any) -> Call[list[tuple[Job, list[str]]]]:
    """Up to ``limit`` subscribers of final jobs not yet told of the job's latest
    finish, with their jobs, this caller's for ``lease``. Two takers never take the
    same one; if ``mark_notified`` never comes (a crash), they are offered again."""
    params: dict[str, Any] = {
        "limit": check.integer(limit, "limit", low=1, high=MAX_LIST),
        "lease_s": seconds(lease, "lease", allow_zero=False),
    }

    def build(v: Values) -> Plan[list[tuple[Job, list[str]]]]:
        taken = yield db.TakeNotifications(**params)
        if not taken:
            return []
        ids = sorted({r["job_id"] for r in taken})
        rows = yield db.GetJob(ids=v.json_param(ids))
        jobs = {r["id"]: v.decode_job(r) for r in rows}
        found: dict[int, list[str]] = {}
        for row in sorted(taken, key=lambda r: (r["job_id"], r["subscriber"])):
            found.setdefault(row["job_id"], []).append(row["subscriber"])
        return [(jobs[jid], who) for jid, who in found.items() if jid in jobs]

    wire = {"limit": params["limit"], "lease": params["lease_s"]}
    return Call("take_notifications", wire, build)


def mark_notified(items: Sequence[tuple[int, str]]) -> Call[int]:
    """Record that subscribers were told: ``(job_id, subscriber)`` pairs."""
    batch = [{"job_id": job_id(j), "subscriber": check.name(who, "subscriber")}
             for j, who in check.tuples(items, "items", ("job_id", "subscriber"))]  # fmt: skip

    def build(v: Values) -> Plan[int]:
        if not batch:
            return 0
        marked: int = yield db.MarkNotified(items=v.json_param(batch))
        return marked

    return Call("mark_notified", {"items": batch}, build)


def retry_notifications(
    items: Sequence[tuple[int, str]],
    error: Any,
    *,
    base: Any = 5.0,
    cap: Any = 3600.0,
    max_attempts: Any = 10,
) -> Call[int]:
    """Deliveries that failed: offer them again after a back-off that doubles per
    attempt (``base`` seconds, capped at ``cap``); after ``max_attempts`` they count as
    told, with the error kept."""
    batch = [{"job_id": job_id(j), "subscriber": check.name(who, "subscriber")}
             for j, who in check.tuples(items, "items", ("job_id", "subscriber"))]  # fmt: skip
    params: dict[str, Any] = {
        "error": check.text(error, "error", max_length=4000),
        "base_s": seconds(base, "base"),
        "cap_s": seconds(cap, "cap"),
        "max_attempts": check.integer(max_attempts, "max_attempts", low=1, high=1000),
    }

    def build(v: Values) -> Plan[int]:
        if not batch:
            return 0
        rows = yield db.DeliveryAttempts(items=v.json_param(batch))
        decided = []
        for row in rows:
            attempts = int(row["attempts"])
            then = machine.after_failed_delivery(
                attempts=attempts,
                base_s=params["base_s"],
                cap_s=params["cap_s"],
                max_attempts=params["max_attempts"],
            )
            decided.append({
                "job_id": row["job_id"],
                "subscriber": row["subscriber"],
                "attempts": attempts,
                "delay_s": then.delay_s,
                "give_up": then.give_up,
            })  # fmt: skip
        if not decided:
            return 0
        changed: int = yield db.RetryNotifications(
            error=params["error"], items=v.json_param(decided)
        )
        return changed

    return Call("retry_notifications", {**params, "items": batch}, build)
