"""An operator's changes to jobs: retry, cancel, run now, delete, complete, cancel or fail
by key, prune."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NoReturn

from conveyor import machine
from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.errors import DuplicateJob, InvalidArgument, InvalidTransition, JobNotFound
from conveyor.job import ACTIVE_STATUSES, Job
from conveyor.ops import Announce, Call, Plan, Row, Values
from conveyor.ops.defaults import Defaults, job_id
from conveyor.retry import seconds


def retry(job: Any, *, reset_attempts: Any = True) -> Call[Job]:
    """A final job (failed, cancelled or completed) back to pending, attempts reset; or,
    with ``reset_attempts=False``, a failed or cancelled one that has attempts left,
    keeping the count (retries within a budget)."""
    jid = job_id(job)
    if not isinstance(reset_attempts, bool):
        raise InvalidArgument(f"reset_attempts: expected true or false, got {reset_attempts!r}")
    keep = None if reset_attempts else 1

    def build(v: Values) -> Plan[Job]:
        try:
            rows = yield db.ReopenJob(id=jid, keep_attempts=keep)
        except DuplicateJob:
            raise InvalidTransition(
                f"cannot retry job {jid}: another active job has its key"
            ) from None
        if not rows:
            if reset_attempts:
                yield from refuse_status(jid, "retry")
            yield from refuse_spent(jid)
        row = rows[0]
        if row["depends_on"] is not None:
            # A job cancelled because a dependency failed kept the count it had then:
            # count its unmet dependencies again, as they stand now.
            row = yield from recount_waiting(jid)
        yield Announce(queues=[row["queue"]])
        return v.decode_job(row)

    return Call("retry", {"job_id": jid, "reset_attempts": reset_attempts}, build)


def recount_waiting(job: int) -> Plan[Row]:
    """A reopened job's unmet dependencies, counted under lock of the dependencies (so
    none finishes unseen); answers the job's row as it now is."""
    ids = json.dumps([job])
    yield db.LockParents(ids=ids)
    yield db.RecountWaiting(ids=ids)
    rows = yield db.GetJob(id=job)
    row: Row = rows[0]
    return row


def refuse_spent(job: int) -> Plan[NoReturn]:
    rows = yield db.GetJob(id=job)
    if not rows:
        raise JobNotFound(f"cannot retry job {job}: it does not exist")
    row = rows[0]
    if row["status"] not in machine.transition("retry_within_attempts").sources:
        raise InvalidTransition(machine.refusal(job, "retry_within_attempts", row["status"]))
    raise InvalidTransition(
        f"cannot retry job {job}: its attempts are spent "
        f"({row['attempts']} of {row['max_attempts']})"
    )


def cancel(job: Any) -> Call[Job]:
    """A pending or running job to cancelled. A running task's later reports are refused."""
    jid = job_id(job)

    def build(v: Values) -> Plan[Job]:
        rows = yield db.CancelJobs(id=jid)
        if not rows:
            yield from refuse_status(jid, "cancel")
        yield Announce(finished=[jid])
        return v.decode_job(rows[0])

    return Call("cancel", {"job_id": jid}, build)


def complete_by_key(
    d: Defaults, key: Any, *, queue: Any, result: Any, include_failed: Any, conn: Any = None
) -> Call[int]:
    """The work was done elsewhere: complete the active job(s) with this key, and with
    ``include_failed`` the failed ones too (reconciliation)."""
    if not isinstance(include_failed, bool):
        raise InvalidArgument(f"include_failed: expected true or false, got {include_failed!r}")
    transitions = ("complete_by_key", "complete_failed_by_key")
    statuses = [str(s) for s in machine.sources(*transitions[: 2 if include_failed else 1])]
    params: dict[str, Any] = {
        "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH),
        "queue": check.name(queue, "queue"),
        "result": check.encode_json(result, "result", max_bytes=d.max_payload_bytes),
    }

    def build(v: Values) -> Plan[int]:
        rows = yield db.CompleteByKey(**params, statuses=v.json_param(statuses))
        yield Announce(finished=[r["id"] for r in rows])
        return len(rows)

    wire = {"key": params["key"], "queue": params["queue"], "result": result,
            "include_failed": include_failed}  # fmt: skip
    return Call("complete_by_key", wire, build, conn=conn)


def cancel_by_key(key: Any, *, queue: Any) -> Call[int]:
    """Cancel every active job with this key; a running one's worker is fenced out."""
    params: dict[str, Any] = {
        "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH, remember=False),
        "queue": check.name(queue, "queue"),
    }

    def build(v: Values) -> Plan[int]:
        rows = yield db.CancelJobs(**params)
        yield Announce(finished=[r["id"] for r in rows])
        return len(rows)

    return Call("cancel_by_key", params, build)


def fail_by_key(key: Any, error: Any, *, queue: Any) -> Call[int]:
    """Fail every active job with this key for good (``error_kind`` terminal, no retry);
    a running one's worker is fenced out."""
    params: dict[str, Any] = {
        "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH, remember=False),
        "queue": check.name(queue, "queue"),
        "error": check.text(error, "error"),
    }
    if not params["error"].strip():
        raise InvalidArgument("error: expected a description of the failure, got an empty text")

    def build(v: Values) -> Plan[int]:
        rows = yield db.FailByKey(**params)
        yield Announce(finished=[r["id"] for r in rows])
        return len(rows)

    return Call("fail_by_key", params, build)


PRUNE_BATCH = 1000  # jobs of one status deleted in one transaction by prune()


def prune(*, older_than: Any, statuses: Iterable[str]) -> Call[tuple[int, bool]]:
    """One batch of ``prune``: at most ``PRUNE_BATCH`` jobs of each status that
    finished more than ``older_than`` ago, oldest ids first, deleted in one short
    transaction (rows another transaction holds are skipped, never waited on). Returns
    how many were deleted, and whether a status had a full batch (the caller runs it
    again). The statements are the retention pruner's."""
    older_than_s = seconds(older_than, "older_than")
    wanted = check.statuses(statuses)
    if not wanted or any(s in ACTIVE_STATUSES for s in wanted):
        raise InvalidArgument(
            "statuses: expected final statuses (completed, failed, cancelled), "
            f"got {', '.join(str(s) for s in wanted) or 'none'}"
        )
    names = [str(s) for s in wanted]

    def build(v: Values) -> Plan[tuple[int, bool]]:
        removed, more = 0, False
        for status in names:
            where: dict[str, Any] = {
                "status": status, "queue": None, "task": None, "keep_seconds": older_than_s,
                "exclude": "[]",
            }  # fmt: skip
            found = yield db.ExpiredJobs(**where, limit=PRUNE_BATCH)
            if not found:
                continue
            more = more or len(found) == PRUNE_BATCH
            ids = v.json_param([int(r["id"]) for r in found])
            locked = yield db.LockExpired(ids=ids, **where)  # still final, and still old
            if locked:
                gone = v.json_param([int(r["id"]) for r in locked])
                removed += yield db.DeleteJobs(ids=gone)
        return removed, more

    return Call("prune", {"older_than": older_than_s, "statuses": names}, build)


def run_now(job: Any) -> Call[Job]:
    """A pending job due now: a scheduled job, or one waiting to retry, stops waiting
    (its dependencies, if any, still hold it)."""
    jid = job_id(job)

    def build(v: Values) -> Plan[Job]:
        rows = yield db.RunNow(id=jid)
        if not rows:
            yield from refuse_status(jid, "run_now")
        yield Announce(queues=[rows[0]["queue"]])
        return v.decode_job(rows[0])

    return Call("run_now", {"job_id": jid}, build)


MAX_RUN_NOW = 1000


def run_now_all(*, queue: Any, task: Any, kind: Any, limit: Any) -> Call[list[int]]:
    """At most ``limit`` pending jobs not yet due (``kind``: "scheduled", never tried;
    "retrying", an attempt failed; None, both), soonest first, due now. Returns their
    ids; fewer than ``limit`` means none is left."""
    params: dict[str, Any] = {
        "queue": None if queue is None else check.name(queue, "queue"),
        "task": None if task is None else check.name(task, "task"),
        "kind": deferred_kind(kind),
        "limit": check.integer(limit, "limit", low=1, high=MAX_RUN_NOW),
    }

    def build(v: Values) -> Plan[list[int]]:
        rows = yield db.RunNowJobs(
            queue=params["queue"], task=params["task"], limit=params["limit"],
            **deferred_filter(params["kind"]),
        )  # fmt: skip
        yield Announce(queues=sorted({r["queue"] for r in rows}))
        return sorted(int(r["id"]) for r in rows)

    return Call("run_now_all", params, build)


def deferred_kind(kind: Any) -> str | None:
    if kind is None or kind in ("scheduled", "retrying"):
        return kind  # type: ignore[no-any-return]
    raise InvalidArgument(f"kind: expected scheduled, retrying or none, got {kind!r}")


def deferred_filter(kind: str | None) -> dict[str, int | None]:
    return {
        "first_only": 1 if kind == "scheduled" else None,
        "retries_only": 1 if kind == "retrying" else None,
    }


def delete_job(job: Any) -> Call[None]:
    """A final job (completed, failed, cancelled) is deleted, with its subscribers and
    its dependency edges. An active job is refused: cancel it first."""
    jid = job_id(job)

    def build(v: Values) -> Plan[None]:
        deleted = yield db.DeleteJobs(id=jid)
        if not deleted:
            yield from refuse_status(jid, "delete")

    return Call("delete_job", {"job_id": jid}, build)


def refuse_status(job: int, transition: str) -> Plan[NoReturn]:
    """A guarded write of ``transition`` changed nothing: say why, in the table's words."""
    rows = yield db.GetJob(id=job)
    if not rows:
        t = machine.transition(transition)
        raise JobNotFound(f"cannot {t.verb or t.name} job {job}: it does not exist")
    raise InvalidTransition(machine.refusal(job, transition, rows[0]["status"]))
