"""Adding jobs: one, many, the dedupe policy for keys, and dependencies."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Unpack

from conveyor import tracing
from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.errors import DuplicateJob, InvalidArgument, TooManySubscribers
from conveyor.frozen import builder
from conveyor.job import ACTIVE_STATUSES, FINAL_STATUSES, Job, Status
from conveyor.ops import Announce, Call, LazyArgs, Once, Plan, Row, Values
from conveyor.ops.defaults import MAX_SUBSCRIBERS, Defaults, Duration, job_id
from conveyor.ops.leases import recover_leases
from conveyor.ops.retention import retired_job
from conveyor.options import (
    ITEM_FIELDS,
    EnqueueOptions,
    OnActive,
    OnCompleted,
    OnDependencyFailure,
    OnFailed,
    resolved,
)
from conveyor.retry import seconds

ENQUEUE_FIELDS = ITEM_FIELDS
MAX_DEPENDENCIES = 1000
_BULK_CHUNK = 1000
_RACE_ROUNDS = 10
# ``Job(...)``, ``InsertJob(...)``, ``Once(...)`` and ``Call(...)``, built faster
# (``conveyor.frozen``): every enqueue builds one of each.
_new_job = builder(Job)
_insert_job = builder(db.InsertJob)
_once = builder(Once)
_call = builder(Call)


@dataclass(frozen=True, slots=True)
class Dedupe:
    """What ``enqueue`` does when the key was used before.

    - ``on_active``: an active (pending or running) job has the key: ``"return"`` it
      (the default) or ``"raise"`` ``DuplicateJob``. An active job whose lease expired
      (its worker is gone) is recovered first, in the same transaction.
    - ``cache_ttl``: the key's latest job completed less than this long ago: return it
      (its result is the cached answer). ``None`` (the default) never reuses results.
    - ``on_failed``: the key's latest job failed: enqueue a ``"new"`` job (the default),
      ``"return"`` the failed one, or ``"retry"`` it (back to pending, attempts reset).
    - ``on_completed``: the key's latest job completed: enqueue a ``"new"`` job (the
      default, unless ``cache_ttl`` says otherwise), or ``"return"`` it however old:
      work done once under a key is never run again.
    """

    on_active: OnActive = "return"
    cache_ttl: float | None = None
    on_failed: OnFailed = "new"
    on_completed: OnCompleted = "new"


_DEFAULT_DEDUPE = Dedupe()


@dataclass(slots=True)
class NewJob:
    """A job to insert, its fields checked. Not frozen: a bulk enqueue makes one per job,
    and a frozen dataclass sets each field through ``object.__setattr__``."""

    task: str
    queue: str
    payload: Any
    payload_json: str | None
    key: str | None
    priority: int
    run_at: datetime | None
    max_attempts: int
    group: str | None = None
    after: tuple[int, ...] = ()
    on_dependency_failure: OnDependencyFailure = "cancel"
    trace_context: str | None = None

    def insert(self, v: Values, *, waiting_for: int = 0) -> db.InsertJob:
        """The operation that inserts this job."""
        return _insert_job(
            queue=self.queue,
            task=self.task,
            payload=self.payload_json,
            key=self.key,
            priority=self.priority,
            run_at=None if self.run_at is None else v.encode_time(self.run_at),
            max_attempts=self.max_attempts,
            job_group=self.group,
            depends_on=v.json_param(list(self.after)) if self.after else None,
            waiting_for=waiting_for,
            trace_context=self.trace_context,
        )

    def row(self, v: Values) -> list[Any]:
        """The job as one row of a bulk insert (``insert_jobs``), its columns by position."""
        run_at = None if self.run_at is None else v.encode_time(self.run_at)
        return [self.queue, self.task, self.payload_json, self.priority, run_at,
                self.max_attempts, self.group, self.trace_context]  # fmt: skip

    def inserted(self, v: Values, row: Row, *, waiting_for: int = 0) -> Job:
        """The job as just inserted: ``row`` holds what the database chose (its id and
        times); everything else is what was sent, so nothing needs decoding."""
        created = v.decode_time(row["created_at"])
        run_at = v.decode_time(row["run_at"])
        assert created is not None
        assert run_at is not None
        return _new_job(
            id=row["id"],
            queue=self.queue,
            task=self.task,
            payload=None if self.payload_json is None else check.decode_own_json(self.payload_json),
            key=self.key,
            priority=self.priority,
            run_at=run_at,
            max_attempts=self.max_attempts,
            created_at=created,
            updated_at=created,
            group=self.group,
            depends_on=self.after,
            waiting_for=waiting_for,
            trace_context=self.trace_context,
        )

    def wire(self) -> dict[str, Any]:
        """The fields as a remote queue sends them."""
        return {
            "task": self.task,
            "queue": self.queue,
            "payload": self.payload,
            "key": self.key,
            "priority": self.priority,
            "run_at": self.run_at,
            "max_attempts": self.max_attempts,
            "group": self.group,
            "after": list(self.after) or None,
            "on_dependency_failure": self.on_dependency_failure,
        }


# The options of an enqueue that is one INSERT committed on its own: no key to dedupe,
# no subscriber, no dependencies, no caller's connection.
PLAIN_OPTIONS = frozenset({"queue", "priority", "run_at", "max_attempts", "group"})


def plain_job(d: Defaults, task: Any, payload: Any, options: Mapping[str, Any]) -> NewJob:
    """The checked job of an enqueue whose ``options`` are among ``PLAIN_OPTIONS``: what
    ``enqueue``'s plan would insert, for a caller that runs the INSERT itself
    (``NewJob.insert``, then ``NewJob.inserted``) without building the plan around it."""
    o = resolved(options)
    return new_job(
        d, task, payload, o["queue"], None, o["priority"], o["run_at"], o["max_attempts"],
        o["group"],
    )  # fmt: skip


def enqueue(d: Defaults, task: Any, payload: Any, **options: Unpack[EnqueueOptions]) -> Call[Job]:
    """One job; ``options`` as ``conveyor.options.EnqueueOptions`` declares them (an
    unknown name is a ``TypeError``, as for any keyword argument)."""
    o = resolved(options)
    queue, key, priority, run_at = o["queue"], o["key"], o["priority"], o["run_at"]
    max_attempts, subscriber, conn = o["max_attempts"], o["subscriber"], o["conn"]
    on_active, cache_ttl, on_failed = o["on_active"], o["cache_ttl"], o["on_failed"]
    on_completed, group, after = o["on_completed"], o["group"], o["after"]
    on_dependency_failure = o["on_dependency_failure"]
    job = new_job(
        d, task, payload, queue, key, priority, run_at, max_attempts, group, after,
        on_dependency_failure,
    )  # fmt: skip
    who = None if subscriber is None else check.name(subscriber, "subscriber")
    if on_active == "return" and cache_ttl is None and on_failed == "new" == on_completed:
        policy = _DEFAULT_DEDUPE  # the usual call: nothing to check
    else:
        policy = dedupe(on_active, cache_ttl, on_failed, on_completed)

    def args() -> dict[str, Any]:
        return {**job.wire(), "subscriber": who, "on_active": policy.on_active,
                "cache_ttl": policy.cache_ttl, "on_failed": policy.on_failed,
                "on_completed": policy.on_completed}  # fmt: skip

    def build(v: Values) -> Plan[Job] | Once[Job]:
        if conn is None and job.key is None and who is None and not job.after:
            # Nothing to dedupe, wait for or subscribe: one INSERT, committed on its own.
            return _once(
                op=job.insert(v),
                then=lambda rows: job.inserted(v, rows[0]),
                queues=(job.queue,),
            )
        return _insert(v, job, policy, who)

    return _call(op="enqueue", args=LazyArgs(args), build=build, conn=conn)


def enqueue_many(
    d: Defaults, items: Any, *, queue: Any = "default", conn: Any = None
) -> Call[list[Job]]:
    """Every item is checked before anything is written."""
    prepared = _prepare_items(d, items, queue)

    def args() -> dict[str, Any]:
        return {"items": [{**job.wire(), "subscriber": who} for job, who in prepared],
                "queue": queue}  # fmt: skip

    def build(v: Values) -> Plan[list[Job]]:
        return _insert_many(v, prepared)

    return Call("enqueue_many", LazyArgs(args), build, conn=conn)


def enqueue_ids(
    d: Defaults, items: Any, *, queue: Any = "default", conn: Any = None
) -> Call[list[int]]:
    """Many jobs without keys, subscribers or dependencies; only their ids come back,
    which spares building a ``Job`` for each row of a large load."""
    prepared = _prepare_items(d, items, queue)
    for index, (job, who) in enumerate(prepared):
        if job.key is not None or who is not None or job.after:
            raise InvalidArgument(
                f"items[{index}]: keys, subscribers and dependencies need enqueue_many"
            )

    def args() -> dict[str, Any]:
        return {"items": [job.wire() for job, _ in prepared], "queue": queue}

    def build(v: Values) -> Plan[list[int]]:
        ids: list[int] = []
        queues: set[str] = set()
        for start in range(0, len(prepared), _BULK_CHUNK):
            chunk = [job.row(v) for job, _ in prepared[start : start + _BULK_CHUNK]]
            rows = yield db.InsertJobs(items=v.rows_param(chunk), ids_only=1)
            ids.extend(sorted(r["id"] for r in rows))
            queues.update(r[0] for r in chunk)
        yield Announce(queues=queues)
        return ids

    return Call("enqueue_ids", LazyArgs(args), build, conn=conn)


def _prepare_items(d: Defaults, items: Any, queue: Any) -> list[tuple[NewJob, str | None]]:
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidArgument("items: expected a list of dicts")
    prepared: list[tuple[NewJob, str | None]] = []
    for index, item in enumerate(items):
        if type(item) is not dict and not isinstance(item, Mapping):
            raise InvalidArgument(f"items[{index}]: expected a dict, got {type(item).__name__}")
        if not ENQUEUE_FIELDS.issuperset(item):  # no set built per item
            unknown = sorted(set(item) - ENQUEUE_FIELDS)
            raise InvalidArgument(f"items[{index}]: unknown field(s) {', '.join(unknown)}")
        if "task" not in item:
            raise InvalidArgument(f"items[{index}]: a task name is required")
        get = item.get
        try:
            job = new_job(
                d,
                item["task"],
                get("payload"),
                get("queue", queue),
                get("key"),
                get("priority", 0),
                get("run_at"),
                get("max_attempts"),
                get("group"),
                get("after"),
                get("on_dependency_failure", "cancel"),
            )
            who = get("subscriber")
            who = None if who is None else check.name(who, "subscriber")
        except InvalidArgument as exc:
            raise InvalidArgument(f"items[{index}]: {exc}") from None
        prepared.append((job, who))
    return prepared


def _insert_many(v: Values, prepared: list[tuple[NewJob, str | None]]) -> Plan[list[Job]]:
    if any(job.key is not None or who or job.after for job, who in prepared):
        jobs = []
        for job, who in prepared:
            jobs.append((yield from _insert(v, job, Dedupe(), who)))
        return jobs
    out: list[Job] = []
    for start in range(0, len(prepared), _BULK_CHUNK):
        batch = [job for job, _ in prepared[start : start + _BULK_CHUNK]]
        rows = yield db.InsertJobs(items=v.rows_param([j.row(v) for j in batch]))
        # Ids follow the items' order; the rows hold what the database chose (id, times).
        ordered = sorted(rows, key=lambda r: r["id"])
        out.extend(job.inserted(v, row) for job, row in zip(batch, ordered, strict=True))
    yield Announce(queues={j.queue for j in out})
    return out


def new_job(
    d: Defaults,
    task: Any,
    payload: Any,
    queue: Any,
    key: Any,
    priority: Any,
    run_at: Any,
    max_attempts: Any,
    group: Any = None,
    after: Any = None,
    on_dependency_failure: Any = "cancel",
) -> NewJob:
    if max_attempts is None:
        attempts = d.max_attempts  # checked when the defaults were made
    else:
        attempts = check.integer(max_attempts, "max_attempts", low=1, high=1_000_000)
    if on_dependency_failure not in ("cancel", "run"):
        raise InvalidArgument(
            f"on_dependency_failure: expected 'cancel' or 'run', got {on_dependency_failure!r}"
        )
    # By position: twelve keywords took twice as long to bind, once per job of a bulk load.
    return NewJob(
        check.name(task, "task"),
        check.name(queue, "queue"),
        payload,
        check.encode_json(payload, "payload", max_bytes=d.max_payload_bytes),
        None if key is None else check.key(key),
        0 if priority == 0 and type(priority) is int else check.integer(priority, "priority"),
        None if run_at is None else check.timestamp(run_at, "run_at"),
        attempts,
        None if group is None else check.name(group, "group"),
        () if after is None else _job_ids(after),
        on_dependency_failure,
        tracing.CARRIER.get(),
    )


def _job_ids(after: Any) -> tuple[int, ...]:
    if after is None:
        return ()
    if isinstance(after, (str, bytes, Mapping)) or not isinstance(after, Iterable):
        raise InvalidArgument(f"after: expected a list of job ids, got {after!r}")
    ids = tuple(dict.fromkeys(job_id(i) for i in after))
    if len(ids) > MAX_DEPENDENCIES:
        raise InvalidArgument(f"after: expected at most {MAX_DEPENDENCIES} job ids, got {len(ids)}")
    return ids


def dedupe(on_active: Any, cache_ttl: Any, on_failed: Any, on_completed: Any = "new") -> Dedupe:
    if on_active not in ("return", "raise"):
        raise InvalidArgument(f"on_active: expected 'return' or 'raise', got {on_active!r}")
    if on_failed not in ("new", "return", "retry"):
        raise InvalidArgument(f"on_failed: expected 'new', 'return' or 'retry', got {on_failed!r}")
    if on_completed not in ("new", "return"):
        raise InvalidArgument(f"on_completed: expected 'new' or 'return', got {on_completed!r}")
    ttl = None if cache_ttl is None else seconds(cache_ttl, "cache_ttl")
    return Dedupe(on_active, ttl, on_failed, on_completed)


def _insert(v: Values, job: NewJob, policy: Dedupe, subscriber: str | None) -> Plan[Job]:
    found = yield from _insert_or_find(v, job, policy)
    if subscriber is not None and found.status in ACTIVE_STATUSES:
        # The insert's guard enforces the cap; callers at once take their turn on the
        # job's row, so none passes it. Refused, the whole enqueue changes nothing.
        yield db.LockSubscribers(job_id=found.id)
        yield db.AddSubscriber(job_id=found.id, subscriber=subscriber, cap=MAX_SUBSCRIBERS)
        if not (yield db.Subscribers(job_id=found.id, subscriber=subscriber)):
            raise TooManySubscribers(
                f"subscriber: job {found.id} has {MAX_SUBSCRIBERS} subscribers already; "
                f"a job takes at most {MAX_SUBSCRIBERS}"
            )
    return found


def _insert_or_find(v: Values, job: NewJob, policy: Dedupe) -> Plan[Job]:
    if job.key is None:
        inserted = yield from _insert_new(v, job)
        assert inserted is not None  # without a key, nothing conflicts
        return inserted
    where: dict[str, Any] = {"queue": job.queue, "key": job.key}
    # The unique index decides races: a conflicting insert returns nothing and we look
    # again. The loop only repeats when the active job finished in between.
    for _ in range(_RACE_ROUNDS):
        active = yield db.JobsByKey(**where, active=1)
        if active:
            found = active[0]
            if lease_expired(v, found):
                # Its worker is gone: recover the job now rather than let it hold the key
                # until a rescuer passes; then look again.
                yield from recover_one(v, found["id"])
                continue
            if policy.on_active == "raise":
                raise DuplicateJob(
                    f"job {found['id']} is already {found['status']} with key {job.key!r} "
                    f"in queue {job.queue!r}",
                    job_id=found["id"],
                )
            return v.decode_job(found, deduplicated=True)
        latest = yield db.JobsByKey(**where)
        if latest:
            reused = yield from _reuse(v, latest[0], policy)
            if reused is not None:
                return reused
        else:
            # Its job may have been pruned under a policy that retires keys: the key
            # is answered as the job was then.
            retired = yield db.RetiredKey(**where)
            if retired:
                kept = _reuse_retired(v, retired[0], policy)
                if kept is not None:
                    return kept
        inserted = yield from _insert_new(v, job)
        if inserted is not None:
            return inserted
    raise DuplicateJob(f"key {job.key!r} in queue {job.queue!r} is contended; try again")


def _insert_new(v: Values, job: NewJob) -> Plan[Job | None]:
    """Insert the job (None when an active job took its key first), with its
    dependencies: each is marked (which also locks it until this transaction ends, so
    none can finish unnoticed), the unmet ones counted, the edges recorded."""
    waiting_for = 0
    doomed: tuple[int, str] | None = None
    if job.after:
        rows = yield db.MarkDependencies(ids=v.json_param(list(job.after)))
        states = {r["id"]: r["status"] for r in rows}
        for dep in job.after:
            if dep not in states:
                raise InvalidArgument(f"after: job {dep} does not exist")
        run_anyway = job.on_dependency_failure == "run"
        met = FINAL_STATUSES if run_anyway else {Status.COMPLETED}
        waiting_for = sum(states[d] not in met for d in job.after)
        if not run_anyway:
            broken = [d for d in job.after if states[d] in (Status.FAILED, Status.CANCELLED)]
            doomed = (broken[0], states[broken[0]]) if broken else None
    rows = yield job.insert(v, waiting_for=waiting_for)
    if not rows:
        return None
    row = rows[0]
    if job.after:
        on_failure = int(job.on_dependency_failure == "run")
        edges = [[row["id"], parent, on_failure] for parent in job.after]
        yield db.InsertDependencies(items=v.json_param(edges))
    if doomed is not None:
        error = f"dependency job {doomed[0]} {doomed[1]}"
        rows = yield db.CancelForDependency(id=row["id"], error=error)
        yield Announce(finished=[row["id"]])
        return v.decode_job(rows[0])
    if waiting_for == 0:
        yield Announce(queues=[job.queue])
    return job.inserted(v, row, waiting_for=waiting_for)


def _reuse(v: Values, latest: Row, policy: Dedupe) -> Plan[Job | None]:
    status = latest["status"]
    if status == Status.COMPLETED and policy.on_completed == "return":
        return v.decode_job(latest, deduplicated=True)
    if status == Status.COMPLETED and policy.cache_ttl is not None:
        finished = v.decode_time(latest["finished_at"])
        now = v.decode_time(latest["db_now"])
        if finished and now and (now - finished).total_seconds() < policy.cache_ttl:
            return v.decode_job(latest, deduplicated=True)
    if status == Status.FAILED and policy.on_failed == "return":
        return v.decode_job(latest, deduplicated=True)
    if status == Status.FAILED and policy.on_failed == "retry":
        rows = yield db.ReopenJob(id=latest["id"])
        if rows:
            yield Announce(queues=[rows[0]["queue"]])
            return v.decode_job(rows[0], deduplicated=True)
    return None


def _reuse_retired(v: Values, row: Row, policy: Dedupe) -> Job | None:
    """``_reuse`` for a retired key: the pruned job is returned where the policy would
    return it; a failed one that the policy would retry cannot be (it is gone): a new
    job is enqueued instead."""
    status = row["status"]
    job = retired_job(v, row)
    if status == Status.COMPLETED and policy.on_completed == "return":
        return job
    if status == Status.COMPLETED and policy.cache_ttl is not None:
        finished = v.decode_time(row["finished_at"])
        now = v.decode_time(row["db_now"])
        if finished and now and (now - finished).total_seconds() < policy.cache_ttl:
            return job
    if status == Status.FAILED and policy.on_failed == "return":
        return job
    return None


def lease_expired(v: Values, row: Row) -> bool:
    """A running job whose lease ran out (``row`` carries ``db_now``)."""
    if row["status"] != Status.RUNNING or row["lease_expires_at"] is None:
        return False
    lease, now = v.decode_time(row["lease_expires_at"]), v.decode_time(row["db_now"])
    return lease is not None and now is not None and lease < now


def recover_one(v: Values, jid: int) -> Plan[None]:
    """Recover one job whose lease expired (the write's guard checks it again)."""
    yield from recover_leases(v, job=jid)


__all__ = [
    "Dedupe",
    "Duration",
    "OnActive",
    "OnCompleted",
    "OnDependencyFailure",
    "OnFailed",
    "enqueue",
    "enqueue_ids",
    "enqueue_many",
    "recover_one",
]
