"""Reading: jobs, keys, lists, counts, throughput, subscribers, the database clock.

Reading a running job whose lease expired recovers it first (its worker is gone), in a
write transaction of its own, so what a reader sees is never a job nobody runs."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.errors import InvalidArgument
from conveyor.info import PayloadMatches, TaskTimings, Throughput, ThroughputHour
from conveyor.job import Job, Stats
from conveyor.ops import Call, Plan, Row, Upgrade, Values
from conveyor.ops.admin import deferred_filter, deferred_kind
from conveyor.ops.defaults import MAX_JOB_ID, MAX_LIST, job_id
from conveyor.ops.enqueue import lease_expired, recover_one
from conveyor.ops.retention import retired_job
from conveyor.retry import seconds

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
    """The newest job with this key (and task), whatever its state; when none is left
    and a retention policy retired the key, its job as it was when pruned."""
    where: dict[str, Any] = {
        "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH),
        "queue": check.name(queue, "queue"),
        "task": None if task is None else check.name(task, "task"),
    }

    def build(v: Values) -> Plan[Job | None]:
        rows = yield db.JobsByKey(**where)
        row = yield from _fresh(v, rows, db.JobsByKey(**where))
        if row is None:
            # A key retired by a retention policy: its job as it was when pruned.
            retired = yield db.RetiredKey(**where)
            return retired_job(v, retired[0], deduplicated=False) if retired else None
        return v.decode_job(row)

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
        page = {"before": cursor, "newest": 1} if descending else {"after": cursor or 0}
        rows = yield db.ListJobs(**where, **page)
        return [v.decode_job(r) for r in rows]

    wire = {**params, "after": cursor, "newest_first": descending, "created_after": since,
            "created_before": until}  # fmt: skip
    return Call("jobs", wire, build, write=False)


MAX_SCAN = 100_000  # jobs one payload search walks at most
_FIELD = re.compile(r"[A-Za-z0-9_-]{1,100}")


def search_payload(
    *,
    field: Any,
    value: Any,
    queue: Any,
    status: Any,
    task: Any,
    before: Any,
    limit: Any,
    scan: Any,
) -> Call[PayloadMatches]:
    """Jobs whose payload's top-level ``field`` reads ``value`` (compared as text: a
    string, or a number as JSON writes it), newest first, among the ``scan`` newest jobs
    below id ``before`` (of the queue, status and task given). A bounded walk: page on
    with the answer's ``next_before``."""
    if not isinstance(field, str) or not _FIELD.fullmatch(field):
        raise InvalidArgument(
            "field: expected a top-level payload field (letters, digits, _ or -), "
            f"got {field!r:.80}"
        )
    if not isinstance(value, str) or len(value) > check.MAX_KEY_LENGTH:
        raise InvalidArgument(f"value: expected text of at most {check.MAX_KEY_LENGTH} characters")
    params: dict[str, Any] = {
        "field": field,
        "value": value,
        "queue": None if queue is None else check.name(queue, "queue"),
        "status": None if status is None else str(check.status(status)),
        "task": None if task is None else check.name(task, "task"),
        "before": MAX_JOB_ID
        if before is None
        else check.integer(before, "before", low=1, high=MAX_JOB_ID),
        "limit": check.integer(limit, "limit", low=1, high=MAX_LIST),
        "scan": check.integer(scan, "scan", low=1, high=MAX_SCAN),
    }
    where = {k: params[k] for k in ("queue", "status", "task", "before", "scan")}

    def build(v: Values) -> Plan[PayloadMatches]:
        rows = yield db.SearchPayload(**params)
        jobs = tuple(v.decode_job(r) for r in rows)
        if len(jobs) == params["limit"]:
            return PayloadMatches(jobs, jobs[-1].id)
        walked = yield db.ScanFloor(**where)
        more = int(walked[0]["n"]) == params["scan"] and walked[0]["floor"] is not None
        return PayloadMatches(jobs, int(walked[0]["floor"]) if more else None)

    return Call("search_payload", params, build, write=False)


MAX_SAMPLE = 100_000  # finished jobs task timings read at most
MAX_TIMING_HOURS = 31 * 24


def task_timings(*, queue: Any, task: Any, hours: Any, sample: Any) -> Call[list[TaskTimings]]:
    """Per task, over the ``sample`` jobs that finished last within the last ``hours``:
    runs, failures, p50 and p95 run time. Computed by the database over an index range
    bounded by ``sample``, never over the whole table."""
    params: dict[str, Any] = {
        "queue": None if queue is None else check.name(queue, "queue"),
        "task": None if task is None else check.name(task, "task"),
        "hours": check.integer(hours, "hours", low=1, high=MAX_TIMING_HOURS),
        "sample": check.integer(sample, "sample", low=1, high=MAX_SAMPLE),
    }

    def build(v: Values) -> Plan[list[TaskTimings]]:
        clock = yield db.DbNow()
        current = v.decode_time(clock[0]["db_now"])
        assert current is not None
        since = v.encode_time(current - timedelta(hours=params["hours"]))
        rows = yield db.TaskTimings(
            since=since, queue=params["queue"], task=params["task"], sample=params["sample"]
        )
        return [
            TaskTimings(
                task=r["task"],
                runs=int(r["runs"]),
                failures=int(r["failures"] or 0),
                p50_seconds=None if r["p50"] is None else float(r["p50"]),
                p95_seconds=None if r["p95"] is None else float(r["p95"]),
            )
            for r in rows
        ]

    return Call("task_timings", params, build, write=False)


MAX_DEFERRED = 500


def deferred(*, queue: Any, task: Any, kind: Any, limit: Any) -> Call[list[Job]]:
    """Pending jobs not yet due, soonest first: ``kind`` "scheduled" (never tried),
    "retrying" (an attempt failed, waiting out its back-off) or None (both)."""
    params: dict[str, Any] = {
        "queue": None if queue is None else check.name(queue, "queue"),
        "task": None if task is None else check.name(task, "task"),
        "kind": deferred_kind(kind),
        "limit": check.integer(limit, "limit", low=1, high=MAX_DEFERRED),
    }

    def build(v: Values) -> Plan[list[Job]]:
        rows = yield db.ListDeferred(
            queue=params["queue"], task=params["task"], limit=params["limit"],
            **deferred_filter(params["kind"]),
        )  # fmt: skip
        return [v.decode_job(r) for r in rows]

    return Call("deferred", params, build, write=False)


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


def task_stats(queue: Any) -> Call[dict[str, Stats]]:
    """``{task: Stats}`` for every task with jobs (of ``queue``, when given): counts per
    status, from the counts kept per queue, status and task."""
    where: dict[str, Any] = {"queue": None if queue is None else check.name(queue, "queue")}

    def build(v: Values) -> Plan[dict[str, Stats]]:
        rows = yield db.CountByQueueStatus(**where, per_task=1)
        counts: dict[str, dict[str, Any]] = {}
        for row in rows:
            per_status = counts.setdefault(row["task"], {})
            per_status[row["status"]] = per_status.get(row["status"], 0) + int(row["n"])
        return {task: Stats(**values) for task, values in sorted(counts.items())}

    return Call("task_stats", where, build, write=False)


def fold_counts() -> Call[tuple[int, bool]]:
    """Move the counts' deltas into the counts (PostgreSQL and MySQL; nothing to do on
    SQLite). Returns how many deltas were folded, and whether a driver that folds a
    batch per transaction has more to fold (the caller runs it again)."""

    def build(v: Values) -> Plan[tuple[int, bool]]:
        rows = yield db.FoldCounts()
        return int(rows[0]["folded"]), bool(rows[0].get("more", False))

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


MAX_THROUGHPUT_HOURS = 31 * 24
# How long per-minute throughput is kept before it is rolled up by hour, and how long
# the hourly rows are kept.
KEEP_MINUTES = 24 * 3600.0
KEEP_HOURS = 31 * 24 * 3600.0


def throughput_hours(*, queue: Any, hours: Any) -> Call[list[ThroughputHour]]:
    """Jobs completed and failed per hour over the last ``hours`` (hours without any
    are left out): the hourly roll-ups and the last day's minutes, never the jobs."""
    name = None if queue is None else check.name(queue, "queue")
    span = check.integer(hours, "hours", low=1, high=MAX_THROUGHPUT_HOURS)

    def build(v: Values) -> Plan[list[ThroughputHour]]:
        clock = yield db.DbNow()
        current = v.decode_time(clock[0]["db_now"])
        assert current is not None
        start = current.replace(minute=0, second=0, microsecond=0) - timedelta(hours=span - 1)
        rows = yield db.ThroughputHours(queue=name, since=v.encode_time(start))
        points = []
        for row in rows:
            hour = v.decode_time(row["hour"])
            assert hour is not None
            points.append(ThroughputHour(hour, int(row["completed"]), int(row["failed"])))
        return points

    return Call("throughput_hours", {"queue": name, "hours": span}, build, write=False)


def roll_up_throughput(*, keep_minutes: Any, keep_hours: Any) -> Call[int]:
    """Per-minute throughput older than ``keep_minutes`` is added to its hour's row and
    deleted; hourly rows older than ``keep_hours`` are deleted. Returns how many hourly
    rows were written. Safe to run from several workers at once."""
    minutes_s = seconds(keep_minutes, "keep_minutes", allow_zero=False)
    hours_s = seconds(keep_hours, "keep_hours", allow_zero=False)
    if hours_s < minutes_s:
        raise InvalidArgument("keep_hours: expected at least keep_minutes")

    def build(v: Values) -> Plan[int]:
        clock = yield db.DbNow()
        current = v.decode_time(clock[0]["db_now"])
        assert current is not None
        # Whole hours only: a partly rolled hour would be counted from both tables.
        cut = (current - timedelta(seconds=minutes_s)).replace(minute=0, second=0, microsecond=0)
        before = v.encode_time(cut)
        pruned = v.encode_time(current - timedelta(seconds=hours_s))
        written: int = yield db.RollUpThroughput(before=before, prune_before=pruned)
        return written

    args = {"keep_minutes": minutes_s, "keep_hours": hours_s}
    return Call("roll_up_throughput", args, build)


def subscribers(job: Any) -> Call[list[str]]:
    jid = job_id(job)

    def build(v: Values) -> Plan[list[str]]:
        rows = yield db.Subscribers(job_id=jid)
        return [r["subscriber"] for r in rows]

    return Call("subscribers", {"job_id": jid}, build, write=False)
