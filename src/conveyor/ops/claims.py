"""Claims: taking jobs to run, and the ways of handing them back."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.job import Claim, Job, Status
from conveyor.ops import Announce, Call, Later, LazyArgs, Once, Plan, Row, Values
from conveyor.ops.admin import refuse_status
from conveyor.ops.defaults import (
    MAX_CLAIM,
    Defaults,
    claim_id,
    job_id,
    queue_names,
    task_names,
)
from conveyor.ops.flow import claim_controlled
from conveyor.ops.leases import recover_leases
from conveyor.ops.reports import CheckedReport, check_report, write_report
from conveyor.retry import seconds

# Claims that count what remains fold the count deltas once this many pile up.
FOLD_AFTER = 1000


def new_claim_id() -> str:
    """A random UUID's 32 hex digits: 122 random bits, the claim's secret. Applications
    carry claim ids as UUIDs (the metadata_sync example's processing id is one). Ids led
    by the claim's time would keep each claim's entry in the index of claim ids, which
    every finished job stays in, at the index's end: tried, with a million finished jobs
    claims of one job each held SQLite's write lock 12% less, but a UUIDv7 keeps 74
    random bits and says when the claim was made (docs/benchmarks.md)."""
    return uuid.uuid4().hex


def claim(
    d: Defaults,
    queue: Any,
    *,
    limit: Any,
    lease: Any,
    worker: Any,
    ack: Any,
    count_remaining: Any,
    report: Any = None,
) -> Call[Claim]:
    """Up to ``limit`` claimable jobs, by priority then FIFO, under one new claim id."""
    name = check.name(queue, "queue")
    check.integer(limit, "limit", low=1, high=MAX_CLAIM)
    lease_s = seconds(lease, "lease", allow_zero=False)
    who = check.name(worker, "worker") if worker is not None else d.worker_name
    previous = None if ack is None else check.text(ack, "ack", max_length=200)
    counting = bool(count_remaining)
    endings = None if report is None or not report else check_report(d, report)
    args = {"queue": name, "limit": limit, "lease": lease_s, "worker": worker, "ack": previous,
            "count_remaining": counting}  # fmt: skip

    def build(v: Values) -> Plan[Later[Claim]] | Once[Claim]:
        params: dict[str, Any] = {"queue": name, "limit": limit, "lease_s": lease_s,
                  "claim_id": new_claim_id(), "worker": who}  # fmt: skip
        if previous or counting or endings:
            return _claim(v, d, params, previous, counting, endings)
        # A worker's claim: one statement, unless it found nothing (see _claim).
        return Once(
            db.ClaimJobs(**params),
            lambda rows: _made(v, params, rows, remaining=None, acked=0),
            if_empty=lambda: _claim(v, d, params, None, False, None),
        )

    if endings is None:
        return Call("claim", {**args, "report": None}, build)
    return Call("claim", LazyArgs(lambda: {**args, "report": endings.wire()}), build)


def _claim(
    v: Values,
    d: Defaults,
    params: dict[str, Any],
    previous: str | None,
    counting: bool,
    endings: CheckedReport | None,
) -> Plan[Later[Claim]]:
    reported: dict[int, Status] = {}
    if endings is not None:
        reported = yield from write_report(v, d, endings)
    acked: list[Row] = []
    if previous:
        acked = yield db.AckClaim(claim_id=previous)
        yield Announce(finished=[r["id"] for r in acked])
    # This statement takes nothing at all from a queue under flow control (pause,
    # limits), so only a claim that found nothing needs to look whether that is why.
    rows = yield db.ClaimJobs(**params)
    if not rows:
        settings = yield db.QueueSettings(queue=params["queue"], lock=1)
        if settings and settings[0]["controlled"]:
            rows = yield from claim_controlled(v, settings[0], params)
    remaining = None
    if counting:
        counted = yield db.CountClaimable(queue=params["queue"], deltas_limit=FOLD_AFTER)
        remaining = max(0, int(counted[0]["n"]))
        if int(counted[0]["deltas"]) >= FOLD_AFTER:
            # Counting reads the count deltas: fold them once they pile up (a second
            # folder at the same moment finds the lock taken and folds nothing).
            yield db.FoldCounts()

    def made() -> Claim:  # the jobs decoded once the transaction is over
        claim = _made(v, params, rows, remaining=remaining, acked=len(acked))
        return replace(claim, reported=reported) if reported else claim

    return Later(made)


def _made(
    v: Values, params: dict[str, Any], rows: list[Row], *, remaining: int | None, acked: int
) -> Claim:
    jobs = sorted((v.decode_job(r) for r in rows), key=lambda j: (j.priority, j.id))
    return Claim(
        id=params["claim_id"], queue=params["queue"], jobs=jobs, remaining=remaining, acked=acked
    )


def claim_job(d: Defaults, job: Any, *, lease: Any, worker: Any) -> Call[Claim]:
    """One job, chosen by id, if it is pending with its dependencies met: the caller
    picked it, so pause and limits of its queue do not apply."""
    jid = job_id(job)
    lease_s = seconds(lease, "lease", allow_zero=False)
    who = check.name(worker, "worker") if worker is not None else d.worker_name

    def build(v: Values) -> Plan[Claim]:
        new_claim = new_claim_id()
        rows = yield db.ClaimIds(id=jid, lease_s=lease_s, claim_id=new_claim, worker=who)
        if not rows:
            yield from refuse_status(jid, "claim_job")
        found = v.decode_job(rows[0])
        return Claim(id=new_claim, queue=found.queue, jobs=[found])

    return Call("claim_job", {"job_id": jid, "lease": lease_s, "worker": worker}, build)


def ack(claim: Any) -> Call[int]:
    """Complete every running job of a claim."""
    held = claim_id(claim)

    def build(v: Values) -> Plan[int]:
        rows = yield db.AckClaim(claim_id=held)
        yield Announce(finished=[r["id"] for r in rows])
        return len(rows)

    return Call("ack", {"claim_id": held}, build)


def release(claim: Any, *, queue: Any = None) -> Call[int]:
    """A claim's running jobs (of ``queue``, when given) back to pending."""
    held = claim_id(claim)
    queues = queue_names(queue)

    def build(v: Values) -> Plan[int]:
        params: dict[str, Any] = {"claim_id": held, "queues": _json_or_none(v, queues)}
        rows = yield db.ReleaseJobs(**params)
        yield Announce(queues={r["queue"] for r in rows})
        return len(rows)

    return Call("release", {"claim_id": held, "queue": queues}, build)


def release_job(job: Any) -> Call[Job]:
    """One running job back to pending, whoever holds it (an admin's reset)."""
    jid = job_id(job)

    def build(v: Values) -> Plan[Job]:
        rows = yield db.ReleaseJobs(id=jid)
        if not rows:
            yield from refuse_status(jid, "release_job")
        yield Announce(queues=[rows[0]["queue"]])
        return v.decode_job(rows[0])

    return Call("release_job", {"job_id": jid}, build)


def reset_claims(older_than: Any, *, queue: Any = None, task: Any = None) -> Call[int]:
    """Every running job (of ``queue`` and ``task``, when given) claimed more than
    ``older_than`` ago back to pending."""
    older_than_s = seconds(older_than, "older_than")
    queues = queue_names(queue)
    tasks = task_names(task)

    def build(v: Values) -> Plan[int]:
        params: dict[str, Any] = {"older_than_s": older_than_s,
                                  "queues": _json_or_none(v, queues),
                                  "tasks": _json_or_none(v, tasks)}  # fmt: skip
        rows = yield db.ReleaseJobs(**params)
        yield Announce(queues={r["queue"] for r in rows})
        return len(rows)

    wire = {"older_than": older_than_s, "queue": queues, "task": tasks}
    return Call("reset_claims", wire, build)


def recover(*, queue: Any = None, task: Any = None) -> Call[int]:
    """Running jobs (of ``queue`` and ``task``, when given) whose lease expired back to
    pending, or to failed when their attempts are spent."""
    queues = queue_names(queue)
    tasks = task_names(task)

    def build(v: Values) -> Plan[int]:
        recovered = yield from recover_leases(
            v, queues=_json_or_none(v, queues), tasks=_json_or_none(v, tasks)
        )
        return recovered

    return Call("recover", {"queue": queues, "task": tasks}, build)


def _json_or_none(v: Values, names: tuple[str, ...] | None) -> str | None:
    return None if names is None else v.json_param(list(names))
