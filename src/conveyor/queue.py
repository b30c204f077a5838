"""``Queue``: every operation of the contract, with the state rules and the dedupe
policy written once, above the backends. Each state change is one guarded statement
run by the backend; when it changes nothing, the queue reads the job to say why."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, NoReturn

from conveyor import validation as check
from conveyor.backends.base import Backend, Row, Session, iter_chunks
from conveyor.errors import (
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    StaleClaim,
)
from conveyor.job import ACTIVE_STATUSES, Claim, ErrorKind, Job, Stats, Status, sum_stats
from conveyor.retry import Backoff, BackoffPolicy, seconds

Duration = timedelta | float | int
OnActive = Literal["return", "raise"]
OnFailed = Literal["new", "return", "retry"]

DEFAULT_LEASE = timedelta(minutes=5)
DEFAULT_MAX_ATTEMPTS = 3
MAX_CLAIM = 10_000
MAX_LIST = 10_000
_JOB_ID_MAX = 2**63 - 1
_ENQUEUE_FIELDS = {
    "task",
    "payload",
    "key",
    "priority",
    "run_at",
    "max_attempts",
    "queue",
    "subscriber",
}
_BULK_CHUNK = 1000


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


class Queue:
    """A job queue in a SQL database. Build one with ``conveyor.connect(url)``."""

    def __init__(
        self,
        backend: Backend,
        *,
        max_payload_bytes: int = check.DEFAULT_MAX_PAYLOAD_BYTES,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: BackoffPolicy | None = None,
        worker_name: str | None = None,
    ) -> None:
        self.backend = backend
        self.max_payload_bytes = max_payload_bytes
        self.default_max_attempts = check.integer(
            default_max_attempts, "default_max_attempts", low=1, high=1_000_000
        )
        self.backoff: BackoffPolicy = backoff or Backoff()
        self.worker_name = worker_name or f"{socket.gethostname()}:{os.getpid()}"

    # -- lifecycle ------------------------------------------------------------------
    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def migrate(self, target: int | None = None) -> list[int]:
        return self.backend.migrate(target)

    @property
    def url(self) -> str:
        return self.backend.describe()

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.backend.dialect

    @property
    def listens(self) -> bool:
        """Whether other processes' changes wake this one (LISTEN/NOTIFY)."""
        return self.backend.supports_listen_notify

    def schema_version(self) -> int:
        """The migration the database is at (0: no schema yet)."""
        return self.backend.schema_version()

    @property
    def latest_schema_version(self) -> int:
        """The migration this release of conveyor brings the schema to."""
        return self.backend.latest_version()

    def drop_schema(self) -> None:
        """Remove conveyor's tables and everything in them (tests, ``bench``)."""
        self.backend.drop_schema()

    # -- waiting for changes -----------------------------------------------------------
    def generation(self) -> int:
        """A counter that grows whenever this process learns of a change: a commit made
        here, or another process's, announced by the database. Read it before looking
        at the state you wait on, then pass it to ``wait_for_change``."""
        return self.backend.generation()

    def wait_for_change(self, since: int, timeout: float) -> bool:
        """Block until ``generation()`` passes ``since`` or ``timeout`` seconds pass;
        True when a change was seen (a timeout means: look at the database again)."""
        return self.backend.wait_for_change(since, timeout)

    def now(self) -> datetime:
        """The database clock, the only clock conveyor trusts."""
        with self.backend.session(write=False) as s:
            row = s.one("db_now")
        assert row is not None
        return self.backend.decode_time(row["db_now"])  # type: ignore[return-value]

    # -- enqueue --------------------------------------------------------------------
    def enqueue(
        self,
        task: str,
        payload: Any = None,
        *,
        queue: str = "default",
        key: str | None = None,
        priority: int = 0,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        subscriber: str | None = None,
        conn: Any = None,
        on_active: OnActive = "return",
        cache_ttl: Duration | None = None,
        on_failed: OnFailed = "new",
    ) -> Job:
        """Add a job; with a ``key``, apply the dedupe policy (see ``Dedupe``).
        ``conn``: the caller's open connection, so the job commits with their work."""
        params = self._new_job(task, payload, queue, key, priority, run_at, max_attempts)
        who = None if subscriber is None else check.name(subscriber, "subscriber")
        policy = _dedupe(on_active, cache_ttl, on_failed)
        if conn is None and params["key"] is None and who is None:
            # Nothing to dedupe, nobody to subscribe: one INSERT, committed on its own.
            (row,) = self.backend.write_once("insert_job", params, queues=[params["queue"]])
            return self._job(row)
        with self.backend.session(conn=conn) as s:
            return self._insert(s, params, policy, who)

    def enqueue_many(
        self, items: Iterable[Mapping[str, Any]], *, queue: str = "default", conn: Any = None
    ) -> list[Job]:
        """Add many jobs in one transaction. Each item is a dict with the keyword names
        of ``enqueue``; every item is checked before anything is written."""
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidArgument("items: expected a list of dicts")
        prepared: list[tuple[dict[str, Any], str | None]] = []
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidArgument(f"items[{index}]: expected a dict, got {type(item).__name__}")
            unknown = set(item) - _ENQUEUE_FIELDS
            if unknown:
                raise InvalidArgument(
                    f"items[{index}]: unknown field(s) {', '.join(sorted(unknown))}"
                )
            if "task" not in item:
                raise InvalidArgument(f"items[{index}]: a task name is required")
            try:
                params = self._new_job(
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
            prepared.append((params, who))
        if not prepared:
            return []
        with self.backend.session(conn=conn) as s:
            if any(p["key"] is not None or who for p, who in prepared):
                return [self._insert(s, p, Dedupe(), who) for p, who in prepared]
            jobs: list[Job] = []
            for chunk in iter_chunks([p for p, _ in prepared], _BULK_CHUNK):
                rows = s.all("insert_jobs", {"items": self.backend.json_param(chunk)})
                jobs.extend(sorted((self._job(r) for r in rows), key=lambda j: j.id))
            s.notify(queues={j.queue for j in jobs})
            return jobs

    def _new_job(
        self,
        task: Any,
        payload: Any,
        queue: Any,
        key: Any,
        priority: Any,
        run_at: Any,
        max_attempts: Any,
    ) -> dict[str, Any]:
        when = check.timestamp(run_at, "run_at")
        attempts = self.default_max_attempts if max_attempts is None else max_attempts
        return {
            "task": check.name(task, "task"),
            "queue": check.name(queue, "queue"),
            "payload": check.encode_json(payload, "payload", max_bytes=self.max_payload_bytes),
            "key": check.key(key),
            "priority": check.integer(priority, "priority"),
            "run_at": None if when is None else self.backend.encode_time(when),
            "max_attempts": check.integer(attempts, "max_attempts", low=1, high=1_000_000),
        }

    def _insert(
        self, s: Session, params: dict[str, Any], policy: Dedupe, subscriber: str | None
    ) -> Job:
        job = self._insert_or_find(s, params, policy)
        if subscriber is not None and job.status in ACTIVE_STATUSES:
            s.execute("add_subscriber", {"job_id": job.id, "subscriber": subscriber})
        return job

    def _insert_or_find(self, s: Session, params: dict[str, Any], policy: Dedupe) -> Job:
        queue, key = params["queue"], params["key"]
        if key is None:
            row = s.one("insert_job", params)
            assert row is not None
            s.notify(queues=[queue])
            return self._job(row)
        where = {"queue": queue, "key": key}
        # The unique index decides races: a conflicting insert returns nothing and we
        # look again. The loop only repeats when the active job finished in between.
        for _ in range(10):
            active = s.one("active_by_key", where)
            if active is not None:
                if policy.on_active == "raise":
                    raise DuplicateJob(
                        f"job {active['id']} is already {active['status']} with key {key!r} "
                        f"in queue {queue!r}",
                        job_id=active["id"],
                    )
                return self._job(active, deduplicated=True)
            latest = s.one("latest_by_key", where)
            if latest is not None:
                reused = self._reuse(s, latest, policy)
                if reused is not None:
                    return reused
            row = s.one("insert_job", params)
            if row is not None:
                s.notify(queues=[queue])
                return self._job(row)
        raise DuplicateJob(f"key {key!r} in queue {queue!r} is contended; try again")

    def _reuse(self, s: Session, latest: Row, policy: Dedupe) -> Job | None:
        status = latest["status"]
        if status == Status.COMPLETED and policy.cache_ttl is not None:
            finished = self.backend.decode_time(latest["finished_at"])
            now = self.backend.decode_time(latest["db_now"])
            if finished and now and (now - finished).total_seconds() < policy.cache_ttl:
                return self._job(latest, deduplicated=True)
        if status == Status.FAILED and policy.on_failed == "return":
            return self._job(latest, deduplicated=True)
        if status == Status.FAILED and policy.on_failed == "retry":
            row = s.one("reopen_job", {"id": latest["id"]})
            if row is not None:
                s.notify(queues=[row["queue"]])
                return self._job(row, deduplicated=True)
        return None

    # -- claim and report -----------------------------------------------------------
    def claim(
        self,
        queue: str = "default",
        *,
        limit: int = 1,
        lease: Duration = DEFAULT_LEASE,
        worker: str | None = None,
        ack: str | None = None,
        count_remaining: bool = True,
    ) -> Claim:
        """Claim up to ``limit`` claimable jobs, by priority then FIFO, under one new
        claim id. ``ack``: a previous claim id whose running jobs are completed first, in
        the same transaction. ``count_remaining=False`` skips counting the backlog."""
        check.name(queue, "queue")
        check.integer(limit, "limit", low=1, high=MAX_CLAIM)
        lease_s = seconds(lease, "lease", allow_zero=False)
        who = check.name(worker, "worker") if worker is not None else self.worker_name
        previous = None if ack is None else check.text(ack, "ack", max_length=200)
        claim_id = uuid.uuid4().hex
        params = {"queue": queue, "limit": limit, "lease_s": lease_s, "claim_id": claim_id,
                  "worker": who}  # fmt: skip
        acked: list[Row] = []
        remaining = None
        if not previous and not count_remaining:  # a worker's claim: one statement
            rows = self.backend.write_once("claim_jobs", params)
        else:
            with self.backend.session() as s:
                if previous:
                    acked = s.all("ack_claim", {"claim_id": previous})
                    s.notify(finished=[r["id"] for r in acked])
                rows = s.all("claim_jobs", params)
                if count_remaining:
                    counted = s.one("count_claimable", {"queue": queue})
                    remaining = int(counted["n"]) if counted else 0
        jobs = sorted((self._job(r) for r in rows), key=lambda j: (j.priority, j.id))
        return Claim(id=claim_id, queue=queue, jobs=jobs, remaining=remaining, acked=len(acked))

    def complete(self, job_id: int, claim_id: str, result: Any = None) -> Job:
        """Mark a running job completed, storing ``result``. Raises ``StaleClaim`` when
        the claim no longer holds the job."""
        item = self._complete_item(job_id, claim_id, result)
        with self.backend.session() as s:
            rows = s.all("complete_jobs", {"items": self.backend.json_param([item])})
            if not rows:
                self._refuse(s, job_id, claim_id, "complete")
            s.notify(finished=[job_id])
            return self._job(rows[0])

    def complete_many(self, items: Sequence[tuple[int, str, Any]]) -> list[Job]:
        """Complete ``(job_id, claim_id, result)`` triples in one statement. Returns the
        jobs completed; items whose claim no longer holds the job are left out."""
        batch = [self._complete_item(*item) for item in items]
        if not batch:
            return []
        rows = self.backend.write_once(
            "complete_jobs",
            {"items": self.backend.json_param(batch)},
            finished=[job_id for job_id, _claim, _result in items],
        )
        return [self._job(r) for r in rows]

    def _complete_item(self, job_id: Any, claim_id: Any, result: Any) -> dict[str, Any]:
        return {
            "id": self._job_id(job_id),
            "claim_id": self._claim_id(claim_id),
            "result": check.encode_json(result, "result", max_bytes=self.max_payload_bytes),
        }

    def fail(
        self,
        job_id: int,
        claim_id: str,
        error: str,
        *,
        retryable: bool = True,
        delay: Duration | None = None,
    ) -> Job:
        """Report a failed attempt. Retryable with attempts left: back to ``pending``,
        runnable after ``delay`` (default: the backoff policy). Otherwise ``failed``."""
        self._job_id(job_id)
        self._claim_id(claim_id)
        message = check.text(error, "error")
        if not isinstance(retryable, bool):
            raise InvalidArgument(f"retryable: expected true or false, got {retryable!r}")
        delay_s = None if delay is None else seconds(delay, "delay")
        with self.backend.session() as s:
            row = s.one("get_job", {"id": job_id})
            if row is None or row["claim_id"] != claim_id or row["status"] != Status.RUNNING:
                self._refuse(s, job_id, claim_id, "fail")
            assert row is not None
            if delay_s is None:
                delay_s = self.backoff.delay(row["attempts"])
            item = self._fail_item(job_id, claim_id, message, retryable, delay_s)
            rows = s.all("fail_jobs", {"items": self.backend.json_param([item])})
            if not rows:
                self._refuse(s, job_id, claim_id, "fail")
            job = self._job(rows[0])
            self._notify_outcome(s, [job])
            return job

    def fail_many(self, items: Sequence[tuple[int, str, str, bool, Duration | None]]) -> list[Job]:
        """Fail ``(job_id, claim_id, error, retryable, delay)`` tuples in one statement.
        A ``None`` delay uses the backoff policy for the job's attempt count. Returns the
        jobs changed; items whose claim no longer holds the job are left out."""
        # Every item is checked before the write transaction opens.
        batch = [
            self._fail_item(
                self._job_id(job_id),
                self._claim_id(claim_id),
                check.text(error, "error"),
                bool(retryable),
                None if delay is None else seconds(delay, "delay"),
            )
            for job_id, claim_id, error, retryable, delay in items
        ]
        if not batch:
            return []
        with self.backend.session() as s:
            for item in batch:
                if item["delay_s"] is None:  # the backoff depends on the attempts made
                    row = s.one("get_job", {"id": item["id"]})
                    item["delay_s"] = self.backoff.delay(row["attempts"] if row else 1)
            rows = s.all("fail_jobs", {"items": self.backend.json_param(batch)})
            jobs = [self._job(r) for r in rows]
            self._notify_outcome(s, jobs)
        return jobs

    @staticmethod
    def _fail_item(
        job_id: int, claim_id: str, error: str, retryable: bool, delay_s: float | None
    ) -> dict[str, Any]:
        kind = ErrorKind.RETRYABLE if retryable else ErrorKind.TERMINAL
        return {
            "id": job_id,
            "claim_id": claim_id,
            "error": error,
            "error_kind": str(kind),
            "retry": retryable,
            "delay_s": delay_s,
        }

    @staticmethod
    def _notify_outcome(s: Session, jobs: Iterable[Job]) -> None:
        for job in jobs:
            if job.status == Status.PENDING:
                s.notify(queues=[job.queue])
            else:
                s.notify(finished=[job.id])

    def heartbeat(self, job_id: int, claim_id: str, *, extend: Duration | None = None) -> Job:
        """Prove the claim is alive: the lease now ends ``extend`` from now (default: the
        claim's lease length)."""
        self._job_id(job_id)
        item = {"id": job_id, "claim_id": self._claim_id(claim_id)}
        extend_s = None if extend is None else seconds(extend, "extend", allow_zero=False)
        with self.backend.session() as s:
            rows = s.all(
                "heartbeat_jobs", {"items": self.backend.json_param([item]), "extend_s": extend_s}
            )
            if not rows:
                self._refuse(s, job_id, claim_id, "heartbeat")
            return self._job(rows[0])

    def heartbeat_many(
        self, items: Sequence[tuple[int, str]], *, extend: Duration | None = None
    ) -> list[Job]:
        """Renew many leases in one statement; returns the jobs still held."""
        batch = [{"id": self._job_id(j), "claim_id": self._claim_id(c)} for j, c in items]
        if not batch:
            return []
        extend_s = None if extend is None else seconds(extend, "extend", allow_zero=False)
        with self.backend.session() as s:
            rows = s.all(
                "heartbeat_jobs", {"items": self.backend.json_param(batch), "extend_s": extend_s}
            )
        return [self._job(r) for r in rows]

    def progress(
        self,
        job_id: int,
        claim_id: str,
        *,
        total: int | None = None,
        completed: int | None = None,
        failed: int | None = None,
        current: Any = None,
        checkpoint: Any = None,
        detail: Any = None,
    ) -> Job:
        """Record progress as absolute values (a replay changes nothing); ``None`` leaves
        a field as it was. Also renews the lease."""
        self._job_id(job_id)
        limit = self.max_payload_bytes
        params = {
            "id": job_id,
            "claim_id": self._claim_id(claim_id),
            "total": check.optional_integer(total, "total"),
            "completed": check.optional_integer(completed, "completed"),
            "failed": check.optional_integer(failed, "failed"),
            "current": check.encode_json(current, "current", max_bytes=limit),
            "checkpoint": check.encode_json(checkpoint, "checkpoint", max_bytes=limit),
            "detail": check.encode_json(detail, "detail", max_bytes=limit),
        }
        with self.backend.session() as s:
            row = s.one("progress_job", params)
            if row is None:
                self._refuse(s, job_id, claim_id, "report progress on")
            assert row is not None
            return self._job(row)

    # -- claims, admin --------------------------------------------------------------
    def ack(self, claim_id: str) -> int:
        """Complete every running job of a claim; returns how many."""
        with self.backend.session() as s:
            rows = s.all("ack_claim", {"claim_id": self._claim_id(claim_id)})
            s.notify(finished=[r["id"] for r in rows])
        return len(rows)

    def release(self, claim_id: str) -> int:
        """Put a claim's running jobs back to pending (an admin reset); returns how many."""
        with self.backend.session() as s:
            rows = s.all("release_claim", {"claim_id": self._claim_id(claim_id)})
            s.notify(queues={r["queue"] for r in rows})
        return len(rows)

    def reset_claims(self, older_than: Duration) -> int:
        """Put back to pending every running job claimed more than ``older_than`` ago."""
        older_than_s = seconds(older_than, "older_than")
        with self.backend.session() as s:
            rows = s.all("reset_claims", {"older_than_s": older_than_s})
            s.notify(queues={r["queue"] for r in rows})
        return len(rows)

    def recover(self) -> int:
        """Running jobs whose lease expired go back to pending, or to failed when their
        attempts are spent. Returns how many jobs were recovered."""
        with self.backend.session() as s:
            rows = s.all("recover_expired")
            s.notify(queues={r["queue"] for r in rows if r["status"] == Status.PENDING})
            s.notify(finished=[r["id"] for r in rows if r["status"] == Status.FAILED])
        return len(rows)

    def retry(self, job_id: int) -> Job:
        """A final job (failed, cancelled or completed) back to pending, attempts reset."""
        self._job_id(job_id)
        try:
            with self.backend.session() as s:
                row = s.one("reopen_job", {"id": job_id})
                if row is None:
                    self._refuse_status(s, job_id, "retry", "completed, failed or cancelled")
                assert row is not None
                s.notify(queues=[row["queue"]])
                return self._job(row)
        except DuplicateJob:
            raise InvalidTransition(
                f"cannot retry job {job_id}: another active job has its key"
            ) from None

    def cancel(self, job_id: int) -> Job:
        """Cancel a pending or running job. A running task's later reports are refused."""
        self._job_id(job_id)
        with self.backend.session() as s:
            row = s.one("cancel_job", {"id": job_id})
            if row is None:
                self._refuse_status(s, job_id, "cancel", "pending or running")
            assert row is not None
            s.notify(finished=[job_id])
            return self._job(row)

    def complete_by_key(self, key: str, *, queue: str = "default", result: Any = None) -> int:
        """The work was done elsewhere: complete the active job(s) with this key."""
        params = {
            "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH),
            "queue": check.name(queue, "queue"),
            "result": check.encode_json(result, "result", max_bytes=self.max_payload_bytes),
        }
        with self.backend.session() as s:
            rows = s.all("complete_by_key", params)
            s.notify(finished=[r["id"] for r in rows])
        return len(rows)

    def prune(self, *, older_than: Duration, statuses: Iterable[str] = ("completed",)) -> int:
        """Delete final jobs that finished more than ``older_than`` ago."""
        older_than_s = seconds(older_than, "older_than")
        wanted = check.statuses(statuses)
        active = [s for s in wanted if s in ACTIVE_STATUSES]
        if active or not wanted:
            raise InvalidArgument(
                "statuses: expected final statuses (completed, failed, cancelled), "
                f"got {', '.join(str(s) for s in wanted) or 'none'}"
            )
        with self.backend.session() as s:
            return s.execute(
                "prune_jobs",
                {
                    "statuses": self.backend.json_param([str(x) for x in wanted]),
                    "older_than_s": older_than_s,
                },
            )

    # -- reading --------------------------------------------------------------------
    def get(self, job_id: int) -> Job | None:
        self._job_id(job_id)
        with self.backend.session(write=False) as s:
            row = s.one("get_job", {"id": job_id})
        return None if row is None else self._job(row)

    def latest(self, key: str, *, queue: str = "default") -> Job | None:
        """The newest job with this key, whatever its state."""
        where = {
            "key": check.name(key, "key", max_length=check.MAX_KEY_LENGTH),
            "queue": check.name(queue, "queue"),
        }
        with self.backend.session(write=False) as s:
            row = s.one("latest_by_key", where)
        return None if row is None else self._job(row)

    def jobs(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        key: str | None = None,
        limit: int = 100,
        after: int | None = None,
        newest_first: bool = False,
    ) -> list[Job]:
        """Jobs in id order, ``limit`` at a time; page with ``after`` = the last id seen.
        ``newest_first``: descending order, where ``after`` means ids below it."""
        params = {
            "queue": None if queue is None else check.name(queue, "queue"),
            "status": None if status is None else str(check.status(status)),
            "key": check.key(key),
            "limit": check.integer(limit, "limit", low=1, high=MAX_LIST),
        }
        cursor = None if after is None else check.integer(after, "after", low=0, high=_JOB_ID_MAX)
        with self.backend.session(write=False) as s:
            if newest_first:
                rows = s.all("list_jobs_newest", {**params, "before": cursor})
            else:
                rows = s.all("list_jobs", {**params, "after": cursor or 0})
        return [self._job(r) for r in rows]

    def stats(self, queue: str | None = None) -> Stats:
        """Counts per status (of one queue, or all), and the oldest pending job's age."""
        per_queue = self.queue_stats(queue)
        if queue is not None:
            return per_queue.get(queue, Stats())
        return sum_stats(per_queue.values())

    def queue_stats(self, queue: str | None = None) -> dict[str, Stats]:
        """``{queue: Stats}`` for every queue with jobs (or just ``queue``); ``stats()``
        gives the total."""
        where = {"queue": None if queue is None else check.name(queue, "queue")}
        with self.backend.session(write=False) as s:
            counts = s.all("count_by_queue_status", where)
            pending = s.all("pending_summary", where)
            expired = s.all("expired_summary", where)
        fields: dict[str, dict[str, Any]] = {}
        for row in counts:
            fields.setdefault(row["queue"], {})[row["status"]] = int(row["n"])
        for row in pending:
            entry = fields.setdefault(row["queue"], {})
            entry["oldest_pending_at"] = self.backend.decode_time(row["oldest_pending_at"])
            entry["scheduled"] = int(row["scheduled"] or 0)
        for row in expired:
            fields.setdefault(row["queue"], {})["expired"] = int(row["n"])
        return {name: Stats(**values) for name, values in sorted(fields.items())}

    def subscribers(self, job_id: int) -> list[str]:
        self._job_id(job_id)
        with self.backend.session(write=False) as s:
            return [r["subscriber"] for r in s.all("subscribers", {"job_id": job_id})]

    def take_notifications(
        self, *, limit: int = 100, lease: Duration = 60.0
    ) -> list[tuple[Job, list[str]]]:
        """Take up to ``limit`` subscribers of final jobs who were not yet told of the
        job's latest finish, with their jobs. They are this caller's for ``lease``: call
        ``mark_notified`` once they are told; if it never comes (a crash), they are
        offered again when the lease ends. Two dispatchers never take the same one."""
        params = {
            "limit": check.integer(limit, "limit", low=1, high=MAX_LIST),
            "lease_s": seconds(lease, "lease", allow_zero=False),
        }
        with self.backend.session() as s:
            taken = s.all("take_notifications", params)
            if not taken:
                return []
            ids = sorted({r["job_id"] for r in taken})
            jobs = {
                r["id"]: self._job(r)
                for r in s.all("jobs_by_id", {"ids": self.backend.json_param(ids)})
            }
        found: dict[int, list[str]] = {}
        for row in sorted(taken, key=lambda r: (r["job_id"], r["subscriber"])):
            found.setdefault(row["job_id"], []).append(row["subscriber"])
        return [(jobs[job_id], who) for job_id, who in found.items() if job_id in jobs]

    def mark_notified(self, items: Sequence[tuple[int, str]]) -> int:
        """Record that subscribers were told: ``(job_id, subscriber)`` pairs."""
        batch = [{"job_id": self._job_id(j), "subscriber": check.name(who, "subscriber")}
                 for j, who in items]  # fmt: skip
        if not batch:
            return 0
        with self.backend.session() as s:
            return s.execute("mark_notified", {"items": self.backend.json_param(batch)})

    def wait(self, job_id: int, timeout: Duration | None = None, *, poll: float = 0.5) -> Job:
        """Block until the job is final, or ``timeout`` passes; returns the job as it is
        then (check ``job.is_final``). Woken by LISTEN/NOTIFY on PostgreSQL and by
        commits of this process on SQLite; otherwise it polls every ``poll`` seconds."""
        limit = None if timeout is None else seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            since = self.generation()
            job = self.get(job_id)
            if job is None:
                raise JobNotFound(f"job {job_id} does not exist")
            if job.is_final:
                return job
            left = poll if deadline is None else min(poll, deadline - time.monotonic())
            if left <= 0:
                return job
            self.wait_for_change(since, left)

    # -- helpers --------------------------------------------------------------------
    def _job(self, row: Row, *, deduplicated: bool = False) -> Job:
        return self.backend.decode_job(row, deduplicated=deduplicated)

    @staticmethod
    def _job_id(job_id: Any) -> int:
        return check.integer(job_id, "job_id", low=1, high=_JOB_ID_MAX)

    @staticmethod
    def _claim_id(claim_id: Any) -> str:
        value = check.text(claim_id, "claim_id", max_length=200)
        if not value:
            raise InvalidArgument("claim_id: expected a claim id, got an empty string")
        return value

    def _refuse(self, s: Session, job_id: int, claim_id: str, verb: str) -> NoReturn:
        """A guarded write changed nothing: say why, precisely."""
        row = s.one("get_job", {"id": job_id})
        if row is None:
            raise JobNotFound(f"cannot {verb} job {job_id}: it does not exist")
        if row["claim_id"] != claim_id:
            # Claim ids are secrets of their holders: the message names neither.
            holder = " under another claim" if row["claim_id"] else ""
            raise StaleClaim(
                f"cannot {verb} job {job_id}: the claim given no longer holds it "
                f"(the job is {row['status']}{holder})"
            )
        raise InvalidTransition(
            f"cannot {verb} job {job_id}: expected status running, found {row['status']}"
        )

    def _refuse_status(self, s: Session, job_id: int, verb: str, expected: str) -> NoReturn:
        row = s.one("get_job", {"id": job_id})
        if row is None:
            raise JobNotFound(f"cannot {verb} job {job_id}: it does not exist")
        raise InvalidTransition(
            f"cannot {verb} job {job_id}: expected status {expected}, found {row['status']}"
        )


def _dedupe(on_active: Any, cache_ttl: Any, on_failed: Any) -> Dedupe:
    if on_active not in ("return", "raise"):
        raise InvalidArgument(f"on_active: expected 'return' or 'raise', got {on_active!r}")
    if on_failed not in ("new", "return", "retry"):
        raise InvalidArgument(f"on_failed: expected 'new', 'return' or 'retry', got {on_failed!r}")
    ttl = None if cache_ttl is None else seconds(cache_ttl, "cache_ttl")
    return Dedupe(on_active, ttl, on_failed)
