"""``Queue``: the contract run against a database, in the calling thread.

Each operation's job logic is a plan (``conveyor.ops``); ``Queue`` runs it in one
transaction of its backend, or as a single statement committed on its own for the hot
paths, and wakes local waiters once it commits."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from conveyor.config import database_url, open_backend, parse_url
from conveyor.contract import QueueAPI
from conveyor.drivers.base import Driver, Session
from conveyor.drivers.operations import ForgetIdempotencyKeys, Operation
from conveyor.errors import ConveyorError, InvalidArgument, TransactionConflict
from conveyor.job import Job
from conveyor.ops import Announce, Call, Later, Once, Plan, settled
from conveyor.ops.defaults import (
    DEFAULT_LEASE,
    DEFAULT_MAX_ATTEMPTS,
    MAX_CLAIM,
    MAX_LIST,
    Defaults,
    Duration,
)
from conveyor.ops.enqueue import Dedupe, OnActive, OnFailed, plain_job
from conveyor.ops.idempotency import (
    MAX_PRUNE_BATCH,
    PRUNE_BATCH,
    Answer,
    IdempotentRequest,
    Outcome,
    idempotent,
)
from conveyor.retry import CONFLICT_RETRIES, BackoffPolicy, conflict_pause

T = TypeVar("T")


class Queue(QueueAPI):
    """A job queue in a SQL database. Build one with ``conveyor.connect(url)``."""

    def __init__(
        self,
        backend: Driver,
        *,
        max_payload_bytes: int | None = None,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: BackoffPolicy | None = None,
        worker_name: str | None = None,
    ) -> None:
        self.driver = backend
        options: dict[str, Any] = {"max_attempts": default_max_attempts}
        if max_payload_bytes is not None:
            options["max_payload_bytes"] = max_payload_bytes
        if backoff is not None:
            options["backoff"] = backoff
        if worker_name is not None:
            options["worker_name"] = worker_name
        self.defaults = Defaults(**options)

    def _insert_plain(self, task: Any, payload: Any, options: Mapping[str, Any]) -> Job | None:
        # The usual enqueue, one INSERT committed on its own, run without the plan
        # around it: on a durable commit that Python was a fifth of the call
        # (docs/benchmarks.md, "A single enqueue without its plan").
        job = plain_job(self.defaults, task, payload, options)
        try:
            rows = self.driver.write_once(job.insert(self.driver), queues=(job.queue,))
        except TransactionConflict:
            return None  # nothing was written: the plan runs it again
        return job.inserted(self.driver, rows[0])

    def _run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                return self._run_once(call)
            except TransactionConflict:
                # Nothing of the transaction was written. In the caller's transaction
                # (``conn``) the caller decides; our own runs again.
                if call.conn is not None or attempt >= CONFLICT_RETRIES:
                    raise
                time.sleep(conflict_pause(attempt))
                attempt += 1

    def _run_once(self, call: Call[T]) -> T:
        work = call.build(self.driver)
        plan: Plan[T] | Plan[Later[T]]
        result: T | Later[T]
        if isinstance(work, Once):
            rows = self.driver.write_once(work.op, queues=work.queues, finished=work.finished)
            if rows or work.if_empty is None:
                return work.then(rows)
            plan = work.if_empty()
        else:
            plan = work
        if call.write:
            with self.driver.session(conn=call.conn) as session:
                result = drive(plan, session, writing=True)
        else:
            try:
                with self.driver.session(write=False, conn=call.conn) as session:
                    result = drive(plan, session, writing=False)
            except NeedsWrite:
                again = call.build(self.driver)
                assert not isinstance(again, Once)
                with self.driver.session(conn=call.conn) as session:
                    result = drive(again, session, writing=True)
        return settled(result)

    # -- idempotent requests (the HTTP server's Idempotency-Key) ----------------------
    def run_idempotent(
        self, call: Call[T], request: IdempotentRequest, render: Callable[[T], Answer]
    ) -> Outcome[T]:
        """Run ``call`` (one that creates jobs) once per ``request`` key: the key's
        record, the jobs and their answer (``render`` of the result) commit together;
        the same key again gives the stored answer and creates nothing. Raises
        ``IdempotencyKeyReused`` when the key was used with another request."""
        return self._run(idempotent(call, request, render))

    def prune_idempotency_keys(self, limit: int = PRUNE_BATCH) -> int:
        """Delete at most ``limit`` idempotency records whose retention is over."""
        if not 1 <= limit <= MAX_PRUNE_BATCH:
            raise InvalidArgument(f"limit: expected 1 to {MAX_PRUNE_BATCH}, got {limit}")
        # Upkeep of the HTTP server's own table, not a call of the contract: one
        # statement, in a transaction of its own.
        with self.driver.session() as session:
            return session.run(ForgetIdempotencyKeys(limit=limit))

    # -- lifecycle ------------------------------------------------------------------
    def close(self) -> None:
        self.driver.close()

    def migrate(self, target: int | None = None) -> list[int]:
        return self.driver.migrate(target)

    @property
    def url(self) -> str:
        return self.driver.describe()

    @property
    def dialect(self) -> str:
        """``"sqlite"``, ``"postgresql"`` or ``"mysql"``."""
        return self.driver.dialect

    @property
    def listens(self) -> bool:
        """Whether other processes' changes wake this one (LISTEN/NOTIFY)."""
        return self.driver.capabilities.listen_notify

    def schema_version(self) -> int:
        """The migration the database is at (0: no schema yet)."""
        return self.driver.schema_version()

    @property
    def latest_schema_version(self) -> int:
        """The migration this release of conveyor brings the schema to."""
        return self.driver.latest_version()

    def drop_schema(self) -> None:
        """Remove conveyor's tables and everything in them (tests, ``bench``)."""
        self.driver.drop_schema()

    # -- waiting for changes -----------------------------------------------------------
    def generation(self) -> int:
        return self.driver.generation()

    def wait_for_change(self, since: int, timeout: float) -> bool:
        return self.driver.wait_for_change(since, timeout)


class NeedsWrite(Exception):
    """A plan run in a read transaction asked to write (``Upgrade``)."""


def drive(plan: Plan[T] | Plan[Later[T]], session: Session, *, writing: bool) -> T | Later[T]:
    """Run a plan's operations in ``session``; an operation's error is raised inside the
    plan, which may handle it."""
    try:
        step = next(plan)
        while True:
            reply: Any = None
            try:
                if isinstance(step, Operation):
                    reply = session.run(step)
                elif isinstance(step, Announce):
                    session.notify(queues=step.queues, finished=step.finished)
                elif not writing:
                    plan.close()
                    raise NeedsWrite
            except ConveyorError as exc:
                step = plan.throw(exc)
                continue
            step = plan.send(reply)
    except StopIteration as done:
        result: T | Later[T] = done.value
        return result


def connect(
    url: str | None = None,
    *,
    migrate: bool = True,
    schema: str | None = None,
    use_env: bool = True,
    **options: Any,
) -> Queue:
    """Open the queue and bring its schema up to date. Which database:
    ``$CONVEYOR_DATABASE_URL`` when it is set (the environment beats the code, so one
    deployment setting moves every process), else ``url``, else ``sqlite:///conveyor.db``.
    ``use_env=False`` opens ``url`` exactly, for a caller that has already settled which
    database (the CLI's ``--db`` does).

    Keyword options: ``schema`` (PostgreSQL), ``max_payload_bytes``, ``default_max_attempts``,
    ``backoff``, ``worker_name``."""
    queue_keys = {"default_max_attempts", "backoff", "worker_name"}
    queue_options = {k: options.pop(k) for k in list(options) if k in queue_keys}
    target = database_url(url) if use_env or url is None else url
    settings = parse_url(target, schema=schema, **options)
    backend = open_backend(settings)
    try:
        queue = Queue(backend, **settings.queue_options, **queue_options)
        if migrate:
            backend.migrate()
    except BaseException:
        backend.close()
        raise
    return queue


__all__ = [
    "DEFAULT_LEASE",
    "MAX_CLAIM",
    "MAX_LIST",
    "Dedupe",
    "Duration",
    "OnActive",
    "OnFailed",
    "Queue",
    "connect",
]
