"""The seam between the queue and a database.

A backend offers sessions (a transaction on one connection) in which the queue runs
*named statements*. Every backend ships the same statement names with the same
parameters in its own ``queries.sql``, and the same numbered migrations, so the job
logic in ``conveyor.queue`` is written once. A third backend is a new package holding a
``Backend`` subclass, ``queries.sql`` and ``migrations/``.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar

from conveyor.job import AttemptError, ErrorKind, Job, Progress, Status

Row = Mapping[str, Any]

_STATUSES = {status.value: status for status in Status}
_ERROR_KINDS = {kind.value: kind for kind in ErrorKind}
_NO_PROGRESS = Progress()


class Session(ABC):
    """One transaction. Statements are named; parameters are a mapping."""

    def __init__(self) -> None:
        self.queues_touched: set[str] = set()
        self.jobs_finished: set[int] = set()

    @abstractmethod
    def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]: ...

    @abstractmethod
    def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement, return how many rows it changed."""

    def one(self, query: str, params: Mapping[str, Any] | None = None) -> Row | None:
        rows = self.all(query, params)
        return rows[0] if rows else None

    def notify(self, *, queues: Iterable[str] = (), finished: Iterable[int] = ()) -> None:
        """Announce, once the transaction commits, that jobs became claimable in
        ``queues`` or reached a final state."""
        self.queues_touched.update(queues)
        self.jobs_finished.update(finished)


class Backend(ABC):
    dialect: ClassVar[str]
    supports_listen_notify: ClassVar[bool] = False

    def __init__(self) -> None:
        self._changes = threading.Condition()
        self._generation = 0

    # -- sessions -------------------------------------------------------------------
    @abstractmethod
    def session(self, *, write: bool = True, conn: Any = None) -> AbstractContextManager[Session]:
        """A transaction. With ``conn`` (the caller's own connection) statements run
        inside the caller's transaction, which commits or rolls back with theirs."""

    def write_once(
        self,
        query: str,
        params: Mapping[str, Any],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        """Run one statement as a transaction of its own; when it changed something,
        announce that jobs became claimable in ``queues`` or final (``finished``).

        The hot operations (enqueue, claim, complete) are a single statement, and a
        backend may commit one with less ceremony than a session: SQLite without its
        BEGIN and COMMIT statements, PostgreSQL in one round trip instead of four."""
        with self.session() as s:
            rows = s.all(query, params)
            if rows:
                s.notify(queues=queues, finished=finished)
        return rows

    # -- schema ---------------------------------------------------------------------
    @abstractmethod
    def migrate(self, target: int | None = None) -> list[int]:
        """Apply pending migrations up to ``target`` (all by default); return the
        versions applied. Safe when several processes start at once."""

    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def latest_version(self) -> int: ...

    @abstractmethod
    def drop_schema(self) -> None:
        """Remove conveyor's tables and everything in them."""

    @abstractmethod
    def describe_schema(self) -> list[str]:
        """A sorted, comparable description of tables, columns and indexes."""

    # -- values ---------------------------------------------------------------------
    @abstractmethod
    def encode_time(self, value: datetime) -> Any:
        """A UTC datetime as the database stores it (also inside JSON parameters)."""

    @abstractmethod
    def decode_time(self, value: Any) -> datetime | None: ...

    @abstractmethod
    def decode_json(self, value: Any) -> Any: ...

    def decode_job(self, row: Row, *, deduplicated: bool = False) -> Job:
        # Hot path: every claimed and completed job passes here, so NULLs skip the
        # decoders and a job without progress shares one empty Progress.
        t = self.decode_time
        j = self.decode_json
        total, done = row["progress_total"], row["progress_completed"]
        failed, current = row["progress_failed"], row["progress_current"]
        checkpoint, detail = row["progress_checkpoint"], row["progress_detail"]
        if (total is None and done is None and failed is None and current is None
                and checkpoint is None and detail is None):  # fmt: skip
            progress = _NO_PROGRESS
        else:
            progress = Progress(
                total=total,
                completed=done,
                failed=failed,
                current=None if current is None else j(current),
                checkpoint=None if checkpoint is None else j(checkpoint),
                detail=None if detail is None else j(detail),
            )
        payload, result, kind = row["payload"], row["result"], row["error_kind"]
        deps, errors = row["depends_on"], row["errors"]
        claimed_at, lease, beat = row["claimed_at"], row["lease_expires_at"], row["heartbeat_at"]
        started_at, finished_at = row["started_at"], row["finished_at"]
        return Job(
            id=row["id"],
            queue=row["queue"],
            task=row["task"],
            payload=None if payload is None else j(payload),
            key=row["key"],
            status=_STATUSES[row["status"]],
            priority=row["priority"],
            run_at=t(row["run_at"]),  # type: ignore[arg-type]
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            claim_id=row["claim_id"],
            claimed_at=None if claimed_at is None else t(claimed_at),
            lease_expires_at=None if lease is None else t(lease),
            heartbeat_at=None if beat is None else t(beat),
            worker=row["worker"],
            progress=progress,
            result=None if result is None else j(result),
            error=row["error"],
            error_kind=_ERROR_KINDS[kind] if kind else None,
            created_at=t(row["created_at"]),  # type: ignore[arg-type]
            started_at=None if started_at is None else t(started_at),
            finished_at=None if finished_at is None else t(finished_at),
            updated_at=t(row["updated_at"]),  # type: ignore[arg-type]
            group=row["job_group"],
            depends_on=() if deps is None else tuple(j(deps)),
            waiting_for=row["waiting_for"],
            errors=() if errors is None else self._attempt_errors(j(errors)),
            deduplicated=deduplicated,
        )

    def _attempt_errors(self, entries: list[dict[str, Any]]) -> tuple[AttemptError, ...]:
        return tuple(
            AttemptError(
                attempt=int(e["attempt"]),
                error=e["error"] or "",
                kind=_ERROR_KINDS.get(e["kind"], ErrorKind.RETRYABLE),
                at=self._json_time(e["at"]),
                worker=e.get("worker"),
            )
            for e in entries
        )

    def _json_time(self, value: Any) -> datetime:
        """A time stored inside JSON: epoch seconds (SQLite) or ISO 8601 (PostgreSQL)."""
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        decoded = self.decode_time(value)
        assert decoded is not None
        return decoded

    @staticmethod
    def json_param(items: Any) -> str:
        return json.dumps(items, separators=(",", ":"), ensure_ascii=False)

    # -- change notification ------------------------------------------------------------
    def generation(self) -> int:
        """A counter that grows whenever this process learns of a change (a commit made
        here, or a notification from the database). Read it before looking at the state
        you wait on, then pass it to ``wait_for_change``: no wake-up is missed."""
        return self._generation

    def wait_for_change(self, since: int, timeout: float) -> bool:
        """Block until the generation passes ``since`` or ``timeout`` seconds elapse.
        Returns whether a change was seen (a timeout means: poll the database)."""
        with self._changes:
            return self._changes.wait_for(lambda: self._generation != since, timeout)

    def _announce(self) -> None:
        with self._changes:
            self._generation += 1
            self._changes.notify_all()

    # -- lifecycle ------------------------------------------------------------------
    @abstractmethod
    def ping(self) -> None:
        """Raise ``DatabaseError`` unless the database answers."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def describe(self) -> str:
        """The database location without secrets, for logs and the dashboard."""


def iter_chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
