"""The worker registry and periodic schedules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from conveyor import validation as check
from conveyor.codec import parse_time
from conveyor.drivers import operations as db
from conveyor.errors import InvalidArgument
from conveyor.info import BusyJob, ScheduleInfo, WorkerInfo
from conveyor.job import Job
from conveyor.ops import Announce, Call, Plan, Row, Values
from conveyor.ops.defaults import MAX_JOB_ID, Defaults
from conveyor.ops.enqueue import NewJob, new_job
from conveyor.retry import seconds


def worker_seen(
    *,
    name: Any,
    host: Any,
    pid: Any,
    queues: Sequence[str],
    concurrency: Any,
    version: Any,
    running: Any,
    ttl: Any,
    busy: Any = None,
) -> Call[None]:
    """Register a worker, or refresh its entry: it counts as alive for ``ttl`` more.
    ``busy``: the ``(job id, started at)`` its tasks run now (None: left as it was)."""
    params: dict[str, Any] = {
        "name": check.name(name, "worker"),
        "host": check.name(host, "host"),
        "pid": check.integer(pid, "pid", low=0),
        "queues": [check.name(q, "queue") for q in queues],
        "concurrency": check.integer(concurrency, "concurrency", low=0),
        "version": check.name(version, "version"),
        "running": check.integer(running, "running", low=0),
        "ttl_s": seconds(ttl, "ttl", allow_zero=False),
    }
    running_now = None if busy is None else _busy(busy)

    def build(v: Values) -> Plan[None]:
        busy = None
        if running_now is not None:
            listed = [{"id": i, "started_at": t.isoformat()} for i, t in running_now]
            busy = v.json_param(listed)
        yield db.WorkerSeen(**{**params, "queues": v.json_param(params["queues"])}, busy=busy)

    if running_now is not None:
        return Call("worker_seen", {**params, "busy": running_now}, build)

    return Call("worker_seen", params, build)


MAX_BUSY = 1000  # jobs a worker lists as running in its entry


def _busy(items: Any) -> list[tuple[int, datetime]]:
    """``[(job id, started at)]``, checked; at most ``MAX_BUSY``."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise InvalidArgument(f"busy: expected a list of (job id, started at), got {items!r:.80}")
    out = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidArgument(f"busy: expected (job id, started at), got {item!r:.80}")
        started = check.timestamp(item[1], "busy started at")
        if started is None:
            raise InvalidArgument("busy: a job's start time is missing")
        out.append((check.integer(item[0], "busy job id", low=1, high=MAX_JOB_ID), started))
    if len(out) > MAX_BUSY:
        raise InvalidArgument(f"busy: expected at most {MAX_BUSY} jobs, got {len(out)}")
    return out


def worker_stopped(name: Any) -> Call[None]:
    worker = check.name(name, "worker")

    def build(v: Values) -> Plan[None]:
        yield db.ForgetWorkers(name=worker)

    return Call("worker_stopped", {"name": worker}, build)


def workers() -> Call[list[WorkerInfo]]:
    """Every worker whose entry has not expired, idle ones too."""

    def build(v: Values) -> Plan[list[WorkerInfo]]:
        rows = yield db.ListWorkers()
        return [_worker(v, r) for r in rows]

    return Call("workers", {}, build, write=False)


def forget_workers(older_than: Any) -> Call[int]:
    """Delete the entries of workers presumed dead for longer than ``older_than``."""
    older_than_s = seconds(older_than, "older_than")

    def build(v: Values) -> Plan[int]:
        removed: int = yield db.ForgetWorkers(older_than_s=older_than_s)
        return removed

    return Call("forget_workers", {"older_than": older_than_s}, build)


def _worker(v: Values, row: Row) -> WorkerInfo:
    return WorkerInfo(
        name=row["name"],
        host=row["host"],
        pid=row["pid"],
        queues=tuple(v.decode_json(row["queues"])),
        concurrency=row["concurrency"],
        version=row["version"],
        started_at=_time(v, row["started_at"]),
        last_seen_at=_time(v, row["last_seen_at"]),
        expires_at=_time(v, row["expires_at"]),
        running=row["running"],
        busy=tuple(
            BusyJob(int(b["id"]), parse_time(b["started_at"]))
            for b in v.decode_json(row["busy"]) or ()
        ),
    )


def save_schedule(
    *, name: Any, task: Any, queue: Any, spec: Any, first_slot: Any, next_slot: Any
) -> Call[ScheduleInfo]:
    """Declare a schedule; a new one is owed no slot before ``first_slot``."""
    params: dict[str, Any] = {
        "name": check.name(name, "schedule"),
        "task": check.name(task, "task"),
        "queue": check.name(queue, "queue"),
        "spec": check.name(spec, "spec"),
        "first_slot": check.timestamp(first_slot, "first_slot"),
        "next_slot": check.timestamp(next_slot, "next_slot"),
    }

    def build(v: Values) -> Plan[ScheduleInfo]:
        rows = yield db.SaveSchedule(**_encoded(v, params))
        return _schedule(v, rows[0])

    return Call("save_schedule", params, build)


def run_schedule_slot(
    d: Defaults,
    *,
    name: Any,
    slot: Any,
    next_slot: Any,
    task: Any,
    payload: Any,
    queue: Any,
    priority: Any = 0,
    max_attempts: Any = None,
) -> Call[Job | None]:
    """Enqueue the schedule's job for ``slot``, unless that slot (or a later one) was
    already taken: one guarded update decides, in the same transaction as the insert,
    so any number of workers enqueue each slot exactly once. The job's ``run_at`` is
    the slot, so each job says which slot it stands for."""
    params: dict[str, Any] = {
        "name": check.name(name, "schedule"),
        "slot": check.timestamp(slot, "slot"),
        "next_slot": check.timestamp(next_slot, "next_slot"),
    }
    if params["slot"] is None:
        raise InvalidArgument("slot: expected a datetime")
    job: NewJob = new_job(d, task, payload, queue, None, priority, params["slot"], max_attempts)

    def build(v: Values) -> Plan[Job | None]:
        taken = yield db.TakeScheduleSlot(**_encoded(v, params))
        if not taken:
            return None
        rows = yield job.insert(v)
        yield Announce(queues=[job.queue])
        return job.inserted(v, rows[0])

    return Call("run_schedule_slot", {**params, **job.wire()}, build)


def schedules() -> Call[list[ScheduleInfo]]:
    def build(v: Values) -> Plan[list[ScheduleInfo]]:
        rows = yield db.ListSchedules()
        return [_schedule(v, r) for r in rows]

    return Call("schedules", {}, build, write=False)


def _schedule(v: Values, row: Row) -> ScheduleInfo:
    return ScheduleInfo(
        name=row["name"],
        task=row["task"],
        queue=row["queue"],
        spec=row["spec"],
        last_slot=v.decode_time(row["last_slot"]),
        next_slot=v.decode_time(row["next_slot"]),
        updated_at=_time(v, row["updated_at"]),
    )


def _encoded(v: Values, params: dict[str, Any]) -> dict[str, Any]:
    return {k: v.encode_time(x) if isinstance(x, datetime) else x for k, x in params.items()}


def _time(v: Values, value: Any) -> datetime:
    decoded = v.decode_time(value)
    assert decoded is not None
    return decoded
