"""What the holder of a claim reports: completion, failure, heartbeats and progress.
Every write names the claim, and changes nothing once that claim no longer holds the
job (fencing)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from conveyor import machine
from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.errors import InvalidArgument, InvalidTransition, JobNotFound, StaleClaim
from conveyor.job import ErrorKind, Job, Status
from conveyor.ops import Announce, Call, LazyArgs, Once, Plan, Values
from conveyor.ops.defaults import Defaults, claim_id, job_id
from conveyor.retry import BackoffPolicy, seconds

# What each item of the calls on many jobs holds (in the errors of a wrong one).
_COMPLETED = ("job_id", "claim_id", "result")
_FAILED = ("job_id", "claim_id", "error", "retryable", "delay")
_SNOOZED = ("job_id", "claim_id", "delay")
_HELD = ("job_id", "claim_id")


def complete(d: Defaults, job: Any, claim: Any, result: Any) -> Call[Job]:
    item = _complete_item(d, job, claim, result)

    def build(v: Values) -> Plan[Job]:
        rows = yield db.CompleteJobs(items=v.json_param([item]))
        if not rows:
            yield from refuse(item["id"], item["claim_id"], "complete")
        yield Announce(finished=[item["id"]])
        return v.decode_job(rows[0])

    return Call("complete", _wire(item, result=result), build)


def complete_many(d: Defaults, items: Sequence[tuple[int, str, Any]]) -> Call[list[Job]]:
    """Jobs whose claim no longer holds them are left out of the result."""
    items = check.tuples(items, "items", _COMPLETED)
    batch = [_complete_item(d, *item) for item in items]
    wire = [_wire(i, result=r) for i, (_, _, r) in zip(batch, items, strict=True)]

    def build(v: Values) -> Once[list[Job]]:
        return Once(
            db.CompleteJobs(items=v.json_param(batch)),
            lambda rows: [v.decode_job(r) for r in rows],
            finished=tuple(i["id"] for i in batch),
        )

    return Call("complete_many", {"items": wire}, build)


def _complete_item(d: Defaults, job: Any, claim: Any, result: Any) -> dict[str, Any]:
    return {
        "id": job_id(job),
        "claim_id": claim_id(claim),
        "result": check.encode_json(result, "result", max_bytes=d.max_payload_bytes),
    }


def fail(d: Defaults, job: Any, claim: Any, error: Any, *, retryable: Any, delay: Any) -> Call[Job]:
    """Retryable with attempts left: back to pending after ``delay`` (default: the
    backoff policy). Otherwise failed for good."""
    item = _fail_item(job, claim, error, retryable, delay)

    def build(v: Values) -> Plan[Job]:
        failed = yield from _fail_all(v, d.backoff, [item])
        if not failed:
            yield from refuse(item["id"], item["claim_id"], "fail")
        return failed[0]

    return Call("fail", _fail_wire(item), build)


def fail_many(d: Defaults, items: Sequence[tuple[int, str, str, bool, Any]]) -> Call[list[Job]]:
    """A ``None`` delay uses the backoff policy for the job's attempt count. Jobs whose
    claim no longer holds them are left out of the result."""
    batch = [
        _fail_item(j, c, e, bool(r), delay)
        for j, c, e, r, delay in check.tuples(items, "items", _FAILED)
    ]

    def build(v: Values) -> Plan[list[Job]]:
        jobs = yield from _fail_all(v, d.backoff, batch)
        return jobs

    return Call("fail_many", {"items": [_fail_wire(i) for i in batch]}, build)


def _fail_all(v: Values, backoff: BackoffPolicy, batch: list[dict[str, Any]]) -> Plan[list[Job]]:
    """Each failure's ending decided by the state machine from the attempts made (read
    first), then written under a guard that those attempts still hold."""
    rows = yield db.GetJob(ids=v.json_param([i["id"] for i in batch]))
    current = {r["id"]: r for r in rows}
    ready = []
    for item in batch:
        row = current.get(item["id"])
        if row is None or row["claim_id"] != item["claim_id"]:
            continue  # refused: gone, or held under another claim
        attempts = int(row["attempts"])
        ending = machine.after_failure(
            retryable=item["retry"], attempts=attempts, max_attempts=int(row["max_attempts"])
        )
        delay = item["delay_s"]
        ready.append({
            "id": item["id"],
            "claim_id": item["claim_id"],
            "attempts": attempts,
            "again": ending.target == Status.PENDING,
            "error": item["error"],
            "error_kind": item["error_kind"],
            "delay_s": backoff.delay(attempts) if delay is None else delay,
        })  # fmt: skip
    if not ready:
        return []
    written = yield db.FailJobs(items=v.json_param(ready))
    jobs = [v.decode_job(r) for r in written]
    yield from _announce_outcome(jobs)
    return jobs


def snooze(job: Any, claim: Any, delay: Any) -> Call[Job]:
    """Back to pending after ``delay``, without spending an attempt."""
    item = _snooze_item(job, claim, delay)

    def build(v: Values) -> Plan[Job]:
        rows = yield db.SnoozeJobs(items=v.json_param([item]))
        if not rows:
            yield from refuse(item["id"], item["claim_id"], "snooze")
        yield Announce(queues=[rows[0]["queue"]])
        return v.decode_job(rows[0])

    return Call("snooze", _wire(item, delay=item["delay_s"]), build)


def _snooze_item(job: Any, claim: Any, delay: Any) -> dict[str, Any]:
    return {"id": job_id(job), "claim_id": claim_id(claim), "delay_s": seconds(delay, "delay")}


@dataclass(frozen=True, slots=True)
class Report:
    """The endings of many runs, written together: ``completed`` as ``(job_id,
    claim_id, result)``, ``failed`` as ``(job_id, claim_id, error, retryable, delay)``
    (a ``None`` delay: the backoff policy), ``snoozed`` as ``(job_id, claim_id, delay)``.
    ``Queue.report`` writes one; ``Queue.claim(report=…)`` writes one in the transaction
    that claims the next jobs (a worker's batch: one commit instead of two)."""

    completed: Sequence[tuple[int, str, Any]] = ()
    failed: Sequence[tuple[int, str, str, bool, Any]] = ()
    snoozed: Sequence[tuple[int, str, Any]] = ()

    def __bool__(self) -> bool:
        return bool(self.completed or self.failed or self.snoozed)


@dataclass(frozen=True, slots=True)
class CheckedReport:
    """A ``Report`` with its items checked: what plans write, and (``wire``) how it goes
    over HTTP."""

    done: list[dict[str, Any]]
    bad: list[dict[str, Any]]
    later: list[dict[str, Any]]
    results: list[Any]  # each completion's result, as given (``done`` holds it encoded)

    def wire(self) -> dict[str, Any]:
        """The report as a remote queue sends it; made only when one asks (a worker's
        every claim carries a report, and a database queue never sends it)."""
        return {
            "completed": [_wire(i, result=r) for i, r in zip(self.done, self.results, strict=True)],
            "failed": [_fail_wire(i) for i in self.bad],
            "snoozed": [_wire(i, delay=i["delay_s"]) for i in self.later],
        }


def check_report(d: Defaults, endings: Report) -> CheckedReport:
    if not isinstance(endings, Report):
        raise InvalidArgument(f"report: expected a conveyor.Report, got {type(endings).__name__}")
    completed = check.tuples(endings.completed, "report.completed", _COMPLETED)
    done = [_complete_item(d, *item) for item in completed]
    failed = check.tuples(endings.failed, "report.failed", _FAILED)
    bad = [_fail_item(j, c, e, r, delay) for j, c, e, r, delay in failed]
    snoozed = check.tuples(endings.snoozed, "report.snoozed", _SNOOZED)
    later = [_snooze_item(j, c, delay) for j, c, delay in snoozed]
    return CheckedReport(done, bad, later, [r for _, _, r in completed])


def report(d: Defaults, endings: Report) -> Call[dict[int, Status]]:
    """The endings of many runs in one transaction: results, failures and snoozes.
    Returns the new status of each job written; a job left out was refused (its claim
    no longer holds it). Builds no ``Job`` for completions: runtimes need only this."""
    checked = check_report(d, endings)

    def build(v: Values) -> Plan[dict[int, Status]]:
        written = yield from write_report(v, d, checked)
        return written

    return Call("report", LazyArgs(checked.wire), build)


def write_report(v: Values, d: Defaults, checked: CheckedReport) -> Plan[dict[int, Status]]:
    written: dict[int, Status] = {}
    if checked.done:
        rows = yield db.CompleteJobs(items=v.json_param(checked.done), brief=1)
        written.update((r["id"], Status.COMPLETED) for r in rows)
        yield Announce(finished=[r["id"] for r in rows])
    if checked.bad:
        jobs = yield from _fail_all(v, d.backoff, checked.bad)
        written.update((j.id, j.status) for j in jobs)
    if checked.later:
        rows = yield db.SnoozeJobs(items=v.json_param(checked.later))
        written.update((r["id"], Status.PENDING) for r in rows)
        yield Announce(queues={r["queue"] for r in rows})
    return written


def _fail_item(job: Any, claim: Any, error: Any, retryable: Any, delay: Any) -> dict[str, Any]:
    if not isinstance(retryable, bool):
        raise InvalidArgument(f"retryable: expected true or false, got {retryable!r}")
    kind = ErrorKind.RETRYABLE if retryable else ErrorKind.TERMINAL
    return {
        "id": job_id(job),
        "claim_id": claim_id(claim),
        "error": check.text(error, "error"),
        "error_kind": str(kind),
        "retry": retryable,
        "delay_s": None if delay is None else seconds(delay, "delay"),
    }


def _announce_outcome(jobs: Iterable[Job]) -> Plan[None]:
    retried = [j.queue for j in jobs if j.status == Status.PENDING]
    finished = [j.id for j in jobs if j.status != Status.PENDING]
    yield Announce(queues=retried, finished=finished)


def heartbeat(job: Any, claim: Any, *, extend: Any) -> Call[Job]:
    """The lease now ends ``extend`` from now (default: the claim's lease length)."""
    item: dict[str, Any] = {"id": job_id(job), "claim_id": claim_id(claim)}
    extend_s = _extend(extend)

    def build(v: Values) -> Plan[Job]:
        params: dict[str, Any] = {"items": v.json_param([item]), "extend_s": extend_s}
        rows = yield db.HeartbeatJobs(**params)
        if not rows:
            yield from refuse(item["id"], item["claim_id"], "heartbeat")
        return v.decode_job(rows[0])

    return Call("heartbeat", {**_wire(item), "extend": extend_s}, build)


def renew(items: Sequence[tuple[int, str]], *, extend: Any) -> Call[set[int]]:
    """Renew many leases in one statement; returns the ids of the jobs still held
    (a runtime's background renewal, which needs nothing more)."""
    batch = [
        {"id": job_id(j), "claim_id": claim_id(c)} for j, c in check.tuples(items, "items", _HELD)
    ]
    extend_s = _extend(extend)

    def build(v: Values) -> Plan[set[int]]:
        params: dict[str, Any] = {"items": v.json_param(batch), "extend_s": extend_s}
        rows = yield db.HeartbeatJobs(**params, brief=1)
        return {r["id"] for r in rows}

    wire = {"items": [_wire(i) for i in batch], "extend": extend_s}
    return Call("renew", wire, build)


def heartbeat_many(items: Sequence[tuple[int, str]], *, extend: Any) -> Call[list[Job]]:
    """Renew many leases in one statement; returns the jobs still held."""
    batch = [
        {"id": job_id(j), "claim_id": claim_id(c)} for j, c in check.tuples(items, "items", _HELD)
    ]
    extend_s = _extend(extend)

    def build(v: Values) -> Plan[list[Job]]:
        params: dict[str, Any] = {"items": v.json_param(batch), "extend_s": extend_s}
        rows = yield db.HeartbeatJobs(**params)
        return [v.decode_job(r) for r in rows]

    wire = {"items": [_wire(i) for i in batch], "extend": extend_s}
    return Call("heartbeat_many", wire, build)


def _extend(extend: Any) -> float | None:
    return None if extend is None else seconds(extend, "extend", allow_zero=False)


def progress(
    d: Defaults,
    job: Any,
    claim: Any,
    *,
    total: Any,
    completed: Any,
    failed: Any,
    current: Any,
    checkpoint: Any,
    detail: Any,
) -> Call[Job]:
    """Absolute values (a replay changes nothing); ``None`` leaves a field as it was.
    Also renews the lease."""
    limit = d.max_payload_bytes
    params: dict[str, Any] = {
        "id": job_id(job),
        "claim_id": claim_id(claim),
        "total": check.optional_integer(total, "total"),
        "completed": check.optional_integer(completed, "completed"),
        "failed": check.optional_integer(failed, "failed"),
        "current": check.encode_json(current, "current", max_bytes=limit),
        "checkpoint": check.encode_json(checkpoint, "checkpoint", max_bytes=limit),
        "detail": check.encode_json(detail, "detail", max_bytes=limit),
    }
    wire = {"job_id": params["id"], "claim_id": params["claim_id"], "total": total,
            "completed": completed, "failed": failed, "current": current,
            "checkpoint": checkpoint, "detail": detail}  # fmt: skip

    def build(v: Values) -> Plan[Job]:
        rows = yield db.ProgressJob(**params)
        if not rows:
            yield from refuse(params["id"], params["claim_id"], "report progress on")
        return v.decode_job(rows[0])

    return Call("progress", wire, build)


def refuse(job: int, claim: str, verb: str) -> Plan[NoReturn]:
    """A guarded write changed nothing: say why, precisely."""
    rows = yield db.GetJob(id=job)
    if not rows:
        raise JobNotFound(f"cannot {verb} job {job}: it does not exist")
    row = rows[0]
    if row["claim_id"] != claim:
        # Claim ids are secrets of their holders: the message names neither.
        holder = " under another claim" if row["claim_id"] else ""
        raise StaleClaim(
            f"cannot {verb} job {job}: the claim given no longer holds it "
            f"(the job is {row['status']}{holder})"
        )
    raise InvalidTransition(machine.refusal(job, "heartbeat", row["status"], verb=verb))


def _wire(item: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"job_id": item["id"], "claim_id": item["claim_id"], **extra}


def _fail_wire(item: dict[str, Any]) -> dict[str, Any]:
    return _wire(item, error=item["error"], retryable=item["retry"], delay=item["delay_s"])
