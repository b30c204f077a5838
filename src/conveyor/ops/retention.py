"""Retention policies: how long final jobs are kept, per status, queue and task; and
the pruning they lead to, a small batch per transaction.

A job's policy is the most specific one that covers it: queue and task, then task, then
queue, then the status's default (``RetentionPolicy.rank``). A job no policy covers, or
whose policy keeps it for ever, is never pruned by them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.errors import InvalidArgument
from conveyor.info import ExpiredJob, RetentionPolicy
from conveyor.job import Job, Status
from conveyor.ops import Announce, Call, Plan, Row, Values
from conveyor.ops.defaults import MAX_JOB_ID, Defaults, job_id
from conveyor.retry import seconds

FINAL = ("completed", "failed", "cancelled")
MAX_POLICIES = 1000
MAX_BATCH = 1000
ARCHIVE_CHUNK = 100  # records per archive job
MAX_ARCHIVE_LENGTH = 1000
TEN_YEARS = 10 * 366 * 86400.0


def _status(value: Any) -> str:
    if value not in FINAL:
        raise InvalidArgument(
            f"status: expected one of completed, failed, cancelled, got {value!r}"
        )
    return str(value)


def _scope(value: Any, what: str) -> str:
    """A queue or task name, or '' for any."""
    return "" if value is None else check.name(value, what)


def archive_target(value: Any, what: str = "archive") -> str | None:
    """``"task:NAME"`` or ``"file:PATH"`` (checked), or None."""
    if value is None:
        return None
    text = check.text(value, what, max_length=MAX_ARCHIVE_LENGTH + 1)
    if len(text) > MAX_ARCHIVE_LENGTH:
        raise InvalidArgument(f"{what}: expected at most {MAX_ARCHIVE_LENGTH} characters")
    kind, _, target = text.partition(":")
    if kind == "task":
        check.name(target, f"{what}: the task")
        return text
    if kind == "file" and target.strip() and "\n" not in target:
        return text
    raise InvalidArgument(f"{what}: expected 'task:NAME' or 'file:PATH', got {text!r}")


def _keep(keep: Any) -> float | None:
    if keep is None:
        return None
    value = seconds(keep, "keep")
    if value > TEN_YEARS:
        raise InvalidArgument("keep: expected at most ten years (None keeps jobs for ever)")
    return value


def _policy(v: Values, row: Row) -> RetentionPolicy:
    keep = row["keep_seconds"]
    return RetentionPolicy(
        status=row["status"],
        queue=row["queue"] or None,
        task=row["task"] or None,
        keep_seconds=None if keep is None else float(keep),
        archive=row["archive"],
        retire_keys=bool(row["retire_keys"]),
        updated_at=v.decode_time(row["updated_at"]),
    )


def set_retention(
    status: Any, keep: Any, *, queue: Any, task: Any, archive: Any, retire_keys: Any
) -> Call[RetentionPolicy]:
    """Write the policy for (status, queue, task), replacing the one there was."""
    if not isinstance(retire_keys, bool):
        raise InvalidArgument(f"retire_keys: expected true or false, got {retire_keys!r}")
    params: dict[str, Any] = {
        "status": _status(status),
        "queue": _scope(queue, "queue"),
        "task": _scope(task, "task"),
        "keep_seconds": _keep(keep),
        "archive": archive_target(archive),
        "retire_keys": retire_keys,
    }

    def build(v: Values) -> Plan[RetentionPolicy]:
        # The write's guard enforces the cap, so writers at once cannot pass it: a new
        # policy past it writes nothing, and the transaction changes nothing.
        yield db.ListRetention(lock=1)
        yield db.SaveRetention(**params, cap=MAX_POLICIES)
        rows = yield db.ListRetention()
        mine = (params["queue"], params["task"], params["status"])
        found = [r for r in rows if (r["queue"], r["task"], r["status"]) == mine]
        if not found:
            raise InvalidArgument(f"retention: at most {MAX_POLICIES} policies")
        return _policy(v, found[0])

    wire = {**params, "queue": queue, "task": task, "keep": params["keep_seconds"]}
    del wire["keep_seconds"]
    return Call("set_retention", wire, build)


def retention_policies() -> Call[list[RetentionPolicy]]:
    def build(v: Values) -> Plan[list[RetentionPolicy]]:
        rows = yield db.ListRetention()
        return [_policy(v, r) for r in rows]

    return Call("retention_policies", {}, build, write=False)


def clear_retention(*, status: Any, queue: Any, task: Any) -> Call[int]:
    """Delete the policy for (status, queue, task), or for every status of (queue,
    task) when ``status`` is None; returns how many were deleted."""
    params: dict[str, Any] = {
        "status": None if status is None else _status(status),
        "queue": _scope(queue, "queue"),
        "task": _scope(task, "task"),
    }

    def build(v: Values) -> Plan[int]:
        rows = yield db.DeleteRetention(**params)
        return len(rows)

    return Call("clear_retention", {**params, "queue": queue, "task": task}, build)


def _rules(v: Values, rows: list[Row]) -> list[tuple[RetentionPolicy, str]]:
    """The policies that prune (a finite keep), most specific first, each with the
    JSON array of the more specific policies of its status that take jobs from it."""
    policies = [_policy(v, r) for r in rows]
    out = []
    for p in sorted(policies, key=lambda p: (-p.rank, p.status, p.queue or "", p.task or "")):
        if p.keep_seconds is None:
            continue
        above = [
            [q.queue or "", q.task or ""]
            for q in policies
            if q.status == p.status and q.rank > p.rank
        ]
        out.append((p, v.json_param(above)))
    return out


def _expired(p: RetentionPolicy, exclude: str, limit: int, after: int) -> db.ExpiredJobs:
    assert p.keep_seconds is not None
    return db.ExpiredJobs(
        status=p.status, queue=p.queue, task=p.task, keep_seconds=p.keep_seconds,
        exclude=exclude, limit=limit, after=after,
    )  # fmt: skip


def _limit(limit: Any) -> int:
    return check.integer(limit, "limit", low=1, high=MAX_BATCH)


def expired_jobs(*, limit: Any, archive: Any, after: Any) -> Call[list[ExpiredJob]]:
    """At most ``limit`` final jobs that their policy lets go now, by id (above
    ``after``, when given: a pass goes on from its last batch, past the rows it deleted);
    each with the archive its record goes to (the policy's, else ``archive``)."""
    params: dict[str, Any] = {
        "limit": _limit(limit),
        "archive": archive_target(archive),
        "after": None if after is None else check.integer(after, "after", low=0, high=MAX_JOB_ID),
    }

    def build(v: Values) -> Plan[list[ExpiredJob]]:
        rows = yield db.ListRetention()
        found: list[ExpiredJob] = []
        for p, exclude in _rules(v, rows):
            # Each policy's first ``limit`` ids: the first ``limit`` of them all is
            # among them, so the batch is the oldest ids whatever the policy.
            jobs = yield _expired(p, exclude, params["limit"], params["after"] or 0)
            target = p.archive or params["archive"]
            found.extend(ExpiredJob(v.decode_job(j), p, target) for j in jobs)
        found.sort(key=lambda e: e.job.id)
        return found[: params["limit"]]

    return Call("expired_jobs", params, build, write=False)


def _ids(values: Any) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgument(f"ids: expected a list of job ids, got {values!r}")
    ids = list(dict.fromkeys(job_id(i) for i in values))
    if len(ids) > MAX_BATCH:
        raise InvalidArgument(f"ids: expected at most {MAX_BATCH} job ids, got {len(ids)}")
    return ids


def record(job: Job) -> dict[str, Any]:
    """A pruned job's record, as archives receive it: the job's JSON form, without the
    claim id (a secret of its last worker)."""
    out = job.to_dict()
    out.pop("claim_id", None)
    return out


def prune_expired(d: Defaults, ids: Any, *, archive: Any) -> Call[int]:
    """Delete the jobs among ``ids`` that their policy still lets go, in one
    transaction: their keys retired first when the policy says so, and, when their
    archive is a task, the archive jobs holding their records enqueued in the same
    transaction. Jobs whose archive is a file are expected archived by the caller
    (``expired_jobs`` then this: at least once into the file). Returns how many were
    deleted."""
    params: dict[str, Any] = {"ids": _ids(ids), "archive": archive_target(archive)}

    def build(v: Values) -> Plan[int]:
        if not params["ids"]:
            return 0
        wanted = v.json_param(params["ids"])
        rows = yield db.ListRetention()
        removed = 0
        queues: set[str] = set()
        for p, exclude in _rules(v, rows):
            assert p.keep_seconds is not None
            jobs = yield db.LockExpired(
                ids=wanted, status=p.status, queue=p.queue, task=p.task,
                keep_seconds=p.keep_seconds, exclude=exclude,
            )  # fmt: skip
            if not jobs:
                continue
            got = [int(j["id"]) for j in jobs]
            if p.retire_keys:
                keyed = [int(j["id"]) for j in jobs if j["key"] is not None]
                if keyed:
                    yield db.RetireKeys(ids=v.json_param(keyed))
            target = p.archive or params["archive"]
            if target is not None and target.startswith("task:"):
                queues.update((yield from _archive_jobs(d, v, target[5:], jobs)))
            removed += yield db.DeleteJobs(ids=v.json_param(got))
        if queues:
            yield Announce(queues=sorted(queues))
        return removed

    return Call("prune_expired", params, build)


def _archive_jobs(d: Defaults, v: Values, task: str, rows: list[Row]) -> Plan[set[str]]:
    """Enqueue the archive task's jobs for these rows: per queue, ``ARCHIVE_CHUNK``
    records each, as ``{"jobs": [record, ...]}``."""
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_queue.setdefault(row["queue"], []).append(record(v.decode_job(row)))
    for queue, records in by_queue.items():
        for start in range(0, len(records), ARCHIVE_CHUNK):
            payload = {"jobs": records[start : start + ARCHIVE_CHUNK]}
            yield db.InsertJob(
                queue=queue, task=task, payload=json.dumps(payload), key=None, priority=0,
                run_at=None, max_attempts=d.max_attempts, job_group=None, depends_on=None,
                waiting_for=0,
            )  # fmt: skip
    return set(by_queue)


def retired_job(v: Values, row: Row, *, deduplicated: bool = True) -> Job:
    """A retired key's job as it was when it was pruned: its payload and result are
    gone (None)."""
    created = v.decode_time(row["created_at"])
    finished = v.decode_time(row["finished_at"])
    assert created is not None
    return Job(
        id=int(row["job_id"]),
        queue=row["queue"],
        task=row["task"],
        payload=None,
        key=row["key"],
        status=Status(row["status"]),
        run_at=created,
        attempts=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        created_at=created,
        finished_at=finished,
        updated_at=finished or created,
        deduplicated=deduplicated,
    )


def keep_text(keep_seconds: float | None) -> str:
    """A policy's keep for people: "for ever", or a duration such as 7d or 1h30m."""
    if keep_seconds is None:
        return "for ever"
    left = round(keep_seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"
