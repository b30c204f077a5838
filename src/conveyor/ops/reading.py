"""Reading: jobs, keys, lists, counts, subscribers, the database clock."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from conveyor import validation as check
from conveyor.job import Job, Stats
from conveyor.ops import Call, Plan, Query, Values
from conveyor.ops.defaults import MAX_JOB_ID, MAX_LIST, job_id


def now() -> Call[datetime]:
    def build(v: Values) -> Plan[datetime]:
        rows = yield Query("db_now")
        clock = v.decode_time(rows[0]["db_now"])
        assert clock is not None
        return clock

    return Call("now", {}, build, write=False)


def get(job: Any) -> Call[Job | None]:
    jid = job_id(job)

    def build(v: Values) -> Plan[Job | None]:
        rows = yield Query("get_job", {"id": jid})
        return v.decode_job(rows[0]) if rows else None

    return Call("get", {"job_id": jid}, build, write=False)


def latest(key: Any, *, queue: Any) -> Call[Job | None]:
    """The newest job with this key, whatever its state."""
    where = {
        "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH),
        "queue": check.name(queue, "queue"),
    }

    def build(v: Values) -> Plan[Job | None]:
        rows = yield Query("latest_by_key", where)
        return v.decode_job(rows[0]) if rows else None

    return Call("latest", where, build, write=False)


def jobs(
    *, queue: Any, status: Any, key: Any, limit: Any, after: Any, newest_first: Any
) -> Call[list[Job]]:
    """Jobs in id order, ``limit`` at a time; page with ``after`` = the last id seen.
    ``newest_first``: descending order, where ``after`` means ids below it."""
    params = {
        "queue": None if queue is None else check.name(queue, "queue"),
        "status": None if status is None else str(check.status(status)),
        "key": check.key(key),
        "limit": check.integer(limit, "limit", low=1, high=MAX_LIST),
    }
    cursor = None if after is None else check.integer(after, "after", low=0, high=MAX_JOB_ID)
    descending = bool(newest_first)

    def build(v: Values) -> Plan[list[Job]]:
        if descending:
            rows = yield Query("list_jobs_newest", {**params, "before": cursor})
        else:
            rows = yield Query("list_jobs", {**params, "after": cursor or 0})
        return [v.decode_job(r) for r in rows]

    wire = {**params, "after": cursor, "newest_first": descending}
    return Call("jobs", wire, build, write=False)


def queue_stats(queue: Any) -> Call[dict[str, Stats]]:
    """``{queue: Stats}`` for every queue with jobs (or just ``queue``)."""
    where = {"queue": None if queue is None else check.name(queue, "queue")}

    def build(v: Values) -> Plan[dict[str, Stats]]:
        counts = yield Query("count_by_queue_status", where)
        pending = yield Query("pending_summary", where)
        expired = yield Query("expired_summary", where)
        fields: dict[str, dict[str, Any]] = {}
        for row in counts:
            fields.setdefault(row["queue"], {})[row["status"]] = int(row["n"])
        for row in pending:
            entry = fields.setdefault(row["queue"], {})
            entry["oldest_pending_at"] = v.decode_time(row["oldest_pending_at"])
            entry["scheduled"] = int(row["scheduled"] or 0)
        for row in expired:
            fields.setdefault(row["queue"], {})["expired"] = int(row["n"])
        return {name: Stats(**values) for name, values in sorted(fields.items())}

    return Call("queue_stats", where, build, write=False)


def subscribers(job: Any) -> Call[list[str]]:
    jid = job_id(job)

    def build(v: Values) -> Plan[list[str]]:
        rows = yield Query("subscribers", {"job_id": jid})
        return [r["subscriber"] for r in rows]

    return Call("subscribers", {"job_id": jid}, build, write=False)
