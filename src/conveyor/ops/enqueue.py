"""Adding jobs: one, many, and the dedupe policy for keys."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from conveyor import validation as check
from conveyor.errors import DuplicateJob, InvalidArgument
from conveyor.job import ACTIVE_STATUSES, Job, Status
from conveyor.ops import Announce, Call, Once, Plan, Query, Row, Values
from conveyor.ops.defaults import Defaults, Duration
from conveyor.retry import seconds

OnActive = Literal["return", "raise"]
OnFailed = Literal["new", "return", "retry"]

ENQUEUE_FIELDS = frozenset(
    {"task", "payload", "key", "priority", "run_at", "max_attempts", "queue", "subscriber"}
)
_BULK_CHUNK = 1000
_RACE_ROUNDS = 10


@dataclass(frozen=True, slots=True)
class Dedupe:
    """What ``enqueue`` does when the key was used before.

    - ``on_active``: an active (pending or running) job has the key: ``"return"`` it
      (the default) or ``"raise"`` ``DuplicateJob``.
    - ``cache_ttl``: the key's latest job completed less than this long ago: return it
      (its result is the cached answer). ``None`` (the default) never reuses results.
    - ``on_failed``: the key's latest job failed: enqueue a ``"new"`` job (the default),
      ``"return"`` the failed one, or ``"retry"`` it (back to pending, attempts reset).
    """

    on_active: OnActive = "return"
    cache_ttl: float | None = None
    on_failed: OnFailed = "new"


def enqueue(
    d: Defaults,
    task: Any,
    payload: Any,
    *,
    queue: Any,
    key: Any,
    priority: Any,
    run_at: Any,
    max_attempts: Any,
    subscriber: Any,
    conn: Any,
    on_active: Any,
    cache_ttl: Any,
    on_failed: Any,
) -> Call[Job]:
    job = new_job(d, task, payload, queue, key, priority, run_at, max_attempts)
    who = None if subscriber is None else check.name(subscriber, "subscriber")
    policy = dedupe(on_active, cache_ttl, on_failed)
    args = {**job.wire(), "subscriber": who, "on_active": policy.on_active,
            "cache_ttl": policy.cache_ttl, "on_failed": policy.on_failed}  # fmt: skip

    def build(v: Values) -> Plan[Job] | Once[Job]:
        params = job.params(v)
        if conn is None and job.key is None and who is None:
            # Nothing to dedupe, nobody to subscribe: one INSERT, committed on its own.
            return Once(
                Query("insert_job", params),
                lambda rows: v.decode_job(rows[0]),
                queues=(job.queue,),
            )
        return _insert(v, params, policy, who)

    return Call("enqueue", args, build, conn=conn)


def enqueue_many(
    d: Defaults, items: Any, *, queue: Any = "default", conn: Any = None
) -> Call[list[Job]]:
    """Every item is checked before anything is written."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidArgument("items: expected a list of dicts")
    prepared: list[tuple[NewJob, str | None]] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidArgument(f"items[{index}]: expected a dict, got {type(item).__name__}")
        unknown = set(item) - ENQUEUE_FIELDS
        if unknown:
            raise InvalidArgument(f"items[{index}]: unknown field(s) {', '.join(sorted(unknown))}")
        if "task" not in item:
            raise InvalidArgument(f"items[{index}]: a task name is required")
        try:
            job = new_job(
                d,
                item["task"],
                item.get("payload"),
                item.get("queue", queue),
                item.get("key"),
                item.get("priority", 0),
                item.get("run_at"),
                item.get("max_attempts"),
            )
            who = item.get("subscriber")
            who = None if who is None else check.name(who, "subscriber")
        except InvalidArgument as exc:
            raise InvalidArgument(f"items[{index}]: {exc}") from None
        prepared.append((job, who))
    args = {"items": [{**job.wire(), "subscriber": who} for job, who in prepared],
            "queue": queue}  # fmt: skip

    def build(v: Values) -> Plan[list[Job]]:
        return _insert_many(v, prepared)

    return Call("enqueue_many", args, build, conn=conn)


def _insert_many(v: Values, prepared: list[tuple[NewJob, str | None]]) -> Plan[list[Job]]:
    if any(job.key is not None or who for job, who in prepared):
        jobs = []
        for job, who in prepared:
            jobs.append((yield from _insert(v, job.params(v), Dedupe(), who)))
        return jobs
    out: list[Job] = []
    for start in range(0, len(prepared), _BULK_CHUNK):
        chunk = [job.params(v) for job, _ in prepared[start : start + _BULK_CHUNK]]
        rows = yield Query("insert_jobs", {"items": v.json_param(chunk)})
        out.extend(sorted((v.decode_job(r) for r in rows), key=lambda j: j.id))
    yield Announce(queues={j.queue for j in out})
    return out


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to insert, its fields checked."""

    task: str
    queue: str
    payload: Any
    payload_json: str | None
    key: str | None
    priority: int
    run_at: datetime | None
    max_attempts: int

    def params(self, v: Values) -> dict[str, Any]:
        return {
            "task": self.task,
            "queue": self.queue,
            "payload": self.payload_json,
            "key": self.key,
            "priority": self.priority,
            "run_at": None if self.run_at is None else v.encode_time(self.run_at),
            "max_attempts": self.max_attempts,
        }

    def wire(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "queue": self.queue,
            "payload": self.payload,
            "key": self.key,
            "priority": self.priority,
            "run_at": self.run_at,
            "max_attempts": self.max_attempts,
        }


def new_job(
    d: Defaults,
    task: Any,
    payload: Any,
    queue: Any,
    key: Any,
    priority: Any,
    run_at: Any,
    max_attempts: Any,
) -> NewJob:
    attempts = d.max_attempts if max_attempts is None else max_attempts
    return NewJob(
        task=check.name(task, "task"),
        queue=check.name(queue, "queue"),
        payload=payload,
        payload_json=check.encode_json(payload, "payload", max_bytes=d.max_payload_bytes),
        key=check.key(key),
        priority=check.integer(priority, "priority"),
        run_at=check.timestamp(run_at, "run_at"),
        max_attempts=check.integer(attempts, "max_attempts", low=1, high=1_000_000),
    )


def dedupe(on_active: Any, cache_ttl: Any, on_failed: Any) -> Dedupe:
    if on_active not in ("return", "raise"):
        raise InvalidArgument(f"on_active: expected 'return' or 'raise', got {on_active!r}")
    if on_failed not in ("new", "return", "retry"):
        raise InvalidArgument(f"on_failed: expected 'new', 'return' or 'retry', got {on_failed!r}")
    ttl = None if cache_ttl is None else seconds(cache_ttl, "cache_ttl")
    return Dedupe(on_active, ttl, on_failed)


def _insert(v: Values, params: dict[str, Any], policy: Dedupe, subscriber: str | None) -> Plan[Job]:
    job = yield from _insert_or_find(v, params, policy)
    if subscriber is not None and job.status in ACTIVE_STATUSES:
        yield Query("add_subscriber", {"job_id": job.id, "subscriber": subscriber})
    return job


def _insert_or_find(v: Values, params: dict[str, Any], policy: Dedupe) -> Plan[Job]:
    queue, key = params["queue"], params["key"]
    if key is None:
        rows = yield Query("insert_job", params)
        yield Announce(queues=[queue])
        return v.decode_job(rows[0])
    where = {"queue": queue, "key": key}
    # The unique index decides races: a conflicting insert returns nothing and we look
    # again. The loop only repeats when the active job finished in between.
    for _ in range(_RACE_ROUNDS):
        active = yield Query("active_by_key", where)
        if active:
            found = active[0]
            if policy.on_active == "raise":
                raise DuplicateJob(
                    f"job {found['id']} is already {found['status']} with key {key!r} "
                    f"in queue {queue!r}",
                    job_id=found["id"],
                )
            return v.decode_job(found, deduplicated=True)
        latest = yield Query("latest_by_key", where)
        if latest:
            reused = yield from _reuse(v, latest[0], policy)
            if reused is not None:
                return reused
        rows = yield Query("insert_job", params)
        if rows:
            yield Announce(queues=[queue])
            return v.decode_job(rows[0])
    raise DuplicateJob(f"key {key!r} in queue {queue!r} is contended; try again")


def _reuse(v: Values, latest: Row, policy: Dedupe) -> Plan[Job | None]:
    status = latest["status"]
    if status == Status.COMPLETED and policy.cache_ttl is not None:
        finished = v.decode_time(latest["finished_at"])
        now = v.decode_time(latest["db_now"])
        if finished and now and (now - finished).total_seconds() < policy.cache_ttl:
            return v.decode_job(latest, deduplicated=True)
    if status == Status.FAILED and policy.on_failed == "return":
        return v.decode_job(latest, deduplicated=True)
    if status == Status.FAILED and policy.on_failed == "retry":
        rows = yield Query("reopen_job", {"id": latest["id"]})
        if rows:
            yield Announce(queues=[rows[0]["queue"]])
            return v.decode_job(rows[0], deduplicated=True)
    return None


__all__ = ["Dedupe", "Duration", "OnActive", "OnFailed", "enqueue", "enqueue_many"]
