"""The seam between the queue and a database: a *driver*.

A driver offers sessions (a transaction on one connection) in which the queue runs
*operations* (``conveyor.drivers.operations``): frozen dataclasses named for what they
do to jobs. The job logic above (``conveyor.ops``, ``conveyor.machine``) is written once
and never sees SQL. A SQL driver keeps one statement per operation in its
``queries/*.sql`` under the operation's name, and may perform an operation with several
statements (or Python between them) inside the same transaction instead: such
operations are its session's ``handlers``. A new database is a new package holding a
``Driver`` subclass, its ``queries/*.sql`` and ``migrations/``, built against the driver
conformance suite (``tests/drivers/``).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, cast

from conveyor.drivers.operations import Operation
from conveyor.drivers.values import Row, Values

R = TypeVar("R")
Handler = Callable[[Any, Any], Any]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a database offers that the layers above may lean on."""

    one_round_trip: bool
    """A single-statement operation commits in one round trip (``write_once``)."""
    listen_notify: bool
    """Other processes' commits wake waiters without polling."""
    skip_locked: bool
    """Concurrent claimers skip each other's rows instead of waiting on them."""
    returning: bool
    """``UPDATE … RETURNING``: a guarded write answers the rows it changed in one statement."""


class Session(ABC):
    """One transaction, in which operations run. ``handlers`` maps an operation's name
    to the dialect's way of performing it with several statements; the others run the
    statement of the same name with the operation's fields as parameters."""

    handlers: ClassVar[Mapping[str, Handler]] = {}

    def __init__(self) -> None:
        self.queues_touched: set[str] = set()
        self.jobs_finished: set[int] = set()

    def run(self, op: Operation[R]) -> R:
        handler = self.handlers.get(op.op)
        if handler is not None:
            return cast(R, handler(self, op))
        if op.returns_rows:
            return cast(R, self.all(op.op, op.params()))
        return cast(R, self.execute(op.op, op.params()))

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


class Driver(Values):
    """A database reached from the calling thread (the async twin is ``AsyncDriver``)."""

    capabilities: ClassVar[Capabilities]

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
        op: Operation[list[Row]],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        """Run one operation as a transaction of its own; when it changed something,
        announce that jobs became claimable in ``queues`` or final (``finished``).

        The hot operations (enqueue, claim, complete) are a single statement, and a
        driver may commit one with less ceremony than a session: SQLite without its
        BEGIN and COMMIT statements, PostgreSQL in one round trip instead of four."""
        with self.session() as s:
            rows = s.run(op)
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

    # -- change notification ------------------------------------------------------------
    @property
    def hears_other_processes(self) -> bool:
        """Whether ``wait_for_change`` wakes for commits made by other processes (else
        only for this process's own, and waiters poll for the rest)."""
        return self.capabilities.listen_notify

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
