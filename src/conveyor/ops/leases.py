"""Expired leases: a job whose worker stopped renewing its claim runs again, or fails
for good once its attempts are spent (``conveyor.machine`` decides)."""

from __future__ import annotations

from conveyor import machine
from conveyor.drivers import operations as db
from conveyor.job import Status
from conveyor.ops import Announce, Plan, Values

# Expired leases ended per statement; a recovery goes on until none is left.
BATCH = 500
# A bound on the rounds of one recovery, whatever happens beside it.
MAX_ROUNDS = 10_000


def recover_leases(v: Values, *, queues: str | None = None, job: int | None = None) -> Plan[int]:
    """End every expired lease (of ``queues``, or of job ``job``), each as the state
    machine decides; returns how many jobs were recovered."""
    recovered = 0
    for _ in range(MAX_ROUNDS):
        expired = yield db.ExpiredLeases(queues=queues, id=job, limit=BATCH)
        if not expired:
            break
        items = []
        for row in expired:
            attempts, most = int(row["attempts"]), int(row["max_attempts"])
            ending = machine.after_lease_expired(attempts=attempts, max_attempts=most)
            items.append({
                "id": row["id"],
                "claim_id": row["claim_id"],
                "again": ending.target == Status.PENDING,
                "error": machine.lease_expired_error(row["worker"], attempts, most),
                "cause": machine.lease_expired_cause(row["worker"]),
            })  # fmt: skip
        ended = yield db.EndLeases(items=v.json_param(items))
        yield Announce(
            queues={r["queue"] for r in ended if r["status"] == Status.PENDING},
            finished=[r["id"] for r in ended if r["status"] == Status.FAILED],
        )
        recovered += len(ended)
        if len(expired) < BATCH or not ended:
            break
    return recovered
