"""Reading: jobs, keys, lists, counts, throughput, subscribers, the database clock.

Reading a running job whose lease expired recovers it first (its worker is gone), in a
write transaction of its own, so what a reader sees is never a job nobody runs."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.info import Throughput
from conveyor.job import Job, Stats
from conveyor.ops import Call, Plan, Row, Upgrade, Values
from conveyor.ops.defaults import MAX_JOB_ID, MAX_LIST, job_id
from conveyor.ops.enqueue import lease_expired, recover_one

# Readers fold the counts' deltas themselves once this many pile up (PostgreSQL).
FOLD_AFTER = 2000
MAX_THROUGHPUT_MINUTES = 7 * 24 * 60


def now() -> Call[datetime]:
    def build(v: Values) -> Plan[datetime]:
        rows = yield db.DbNow()
        clock = v.decode_time(rows[0]["db_now"])
        assert clock is not None
        return clock

    return Call("now", {}, build, write=False)


def get(job: Any) -> Call[Job | None]:
    jid = job_id(job)

    def build(v: Values) -> Plan[Job | None]:
        rows = yield db.GetJob(id=jid)
        row = yield from _fresh(v, rows, db.GetJob(id=jid))
        return None if row is None else v.decode_job(row)

    return Call("get", {"job_id": jid}, build, write=False)


def latest(key: Any, *, queue: Any, task: Any) -> Call[Job | None]:
    """The newest job with this key (and task), whatever its state."""
    where: dict[str, Any] = {
        "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH),
        "queue": check.name(queue, "queue"),
        "task": None if task is None else check.name(task, "task"),
    }

    def build(v: Values) -> Plan[Job | None]:
        rows = yield db.LatestByKey(**where)
        row = yield from _fresh(v, rows, db.LatestByKey(**where))
        return None if row is None else v.decode_job(row)

    return Call("latest", where, build, write=False)


def _fresh(v: Values, rows: list[Row], again: db.RowsOp) -> Plan[Row | None]:
    """The row read, or, when it is a running job whose lease expired, the row after
    recovering that job."""
    if not rows or not lease_expired(v, rows[0]):
        return rows[0] if rows else None
    yield Upgrade()
    yield from recover_one(v, rows[0]["id"])
    rows = yield again
    return rows[0] if rows else None


def jobs(
    *,
    queue: Any,
    status: Any,
    key: Any,
    task: Any,
    limit: Any,
    after: Any,
    newest_first: Any,
    created_after: Any,
    created_before: Any,
) -> Call[list[Job]]:
    """Jobs in id order, ``limit`` at a time; page with ``after`` = the last id seen.
    ``newest_first``: descending order, where ``after`` means ids below it."""
    params: dict[str, Any] = {
        "queue": None if queue is None else check.name(queue, "queue"),
        "status": None if status is None else str(check.status(status)),
        "key": check.key(key),
        "task": None if task is None else check.name(task, "task"),
        "limit": check.integer(limit, "limit", low=1, high=MAX_LIST),
    }
    cursor = None if after is None else check.integer(after, "after", low=0, high=MAX_JOB_ID)
    since = check.timestamp(created_after, "created_after")
    until = check.timestamp(created_before, "created_before")
    descending = bool(newest_first)

    def build(v: Values) -> Plan[list[Job]]:
        where: dict[str, Any] = {
            **params,
            "created_after": None if since is None else v.encode_time(since),
            "created_before": None if until is None else v.encode_time(until),
        }
        if descending:
            rows = yield db.ListJobsNewest(**where, before=cursor)
        else:
            rows = yield db.ListJobs(**where, after=cursor or 0)
        return [v.decode_job(r) for r in rows]

    wire = {**params, "after": cursor, "newest_first": descending, "created_after": since,
            "created_before": until}  # fmt: skip
    return Call("jobs", wire, build, write=False)


def dependents(job: Any) -> Call[list[int]]:
    """The ids of the jobs that run after this one."""
    jid = job_id(job)

    def build(v: Values) -> Plan[list[int]]:
        rows = yield db.Dependents(id=jid)
        return [r["job_id"] for r in rows]

    return Call("dependents", {"job_id": jid}, build, write=False)


def queue_stats(queue: Any) -> Call[tuple[dict[str, Stats], bool]]:
    """``{queue: Stats}`` for every queue with jobs (or just ``queue``), and whether the
    counts' deltas should be folded (so the next read stays cheap)."""
    where: dict[str, Any] = {"queue": None if queue is None else check.name(queue, "queue")}

    def build(v: Values) -> Plan[tuple[dict[str, Stats], bool]]:
        counts = yield db.CountByQueueStatus(**where)
        pending = yield db.PendingSummary(**where)
        expired = yield db.ExpiredSummary(**where)
        deltas = yield db.CountDeltas(limit=FOLD_AFTER)
        fields: dict[str, dict[str, Any]] = {}
        for row in counts:
            fields.setdefault(row["queue"], {})[row["status"]] = int(row["n"])
        for row in pending:
            entry = fields.setdefault(row["queue"], {})
            entry["oldest_pending_at"] = v.decode_time(row["oldest_pending_at"])
            entry["scheduled"] = int(row["scheduled"] or 0)
        for row in expired:
            fields.setdefault(row["queue"], {})["expired"] = int(row["n"])
        stats = {name: Stats(**values) for name, values in sorted(fields.items())}
        return stats, int(deltas[0]["n"]) >= FOLD_AFTER

    return Call("queue_stats", where, build, write=False)


def fold_counts() -> Call[int]:
    """Move the counts' deltas into the counts (PostgreSQL; nothing to do on SQLite).
    Returns how many deltas were folded."""

    def build(v: Values) -> Plan[int]:
        rows = yield db.FoldCounts()
        return int(rows[0]["folded"])

    return Call("fold_counts", {}, build)


def throughput(*, queue: Any, minutes: Any) -> Call[list[Throughput]]:
    """Jobs completed and failed per minute over the last ``minutes`` (minutes without
    any are left out)."""
    name = None if queue is None else check.name(queue, "queue")
    span = check.integer(minutes, "minutes", low=1, high=MAX_THROUGHPUT_MINUTES)

    def build(v: Values) -> Plan[list[Throughput]]:
        clock = yield db.DbNow()
        current = v.decode_time(clock[0]["db_now"])
        assert current is not None
        start = current.replace(second=0, microsecond=0) - timedelta(minutes=span - 1)
        rows = yield db.Throughput(queue=name, since=v.encode_time(start))
        points = []
        for row in rows:
            minute = v.decode_time(row["minute"])
            assert minute is not None
            points.append(Throughput(minute, int(row["completed"]), int(row["failed"])))
        return points

    return Call("throughput", {"queue": name, "minutes": span}, build, write=False)


def subscribers(job: Any) -> Call[list[str]]:
    jid = job_id(job)

    def build(v: Values) -> Plan[list[str]]:
        rows = yield db.Subscribers(job_id=jid)
        return [r["subscriber"] for r in rows]

    return Call("subscribers", {"job_id": jid}, build, write=False)
