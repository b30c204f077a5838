"""The operations of the contract, each written once as a *call*: its arguments checked,
and a *plan* that carries out the job logic against the database.

A plan is a generator. It yields the driver operations it needs
(``conveyor.drivers.operations``), receives their rows (or the number of rows changed),
says what to announce once the transaction commits (``Announce``), and returns the
operation's result. It never touches a connection, so the same plan runs in the
synchronous ``Queue`` and the asynchronous ``AsyncQueue``, on every database. The
hottest operations are a single driver operation committed on its own: those build a
``Once`` instead of a generator. What a job may go through is ``conveyor.machine``'s.

A remote queue runs no plans: it sends the call's ``op`` and checked ``args`` over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from conveyor.drivers.operations import Operation
from conveyor.job import Job

T = TypeVar("T")
Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Announce:
    """Once the transaction commits, wake whoever waits: jobs became claimable in
    ``queues``, or the jobs ``finished`` reached a final state."""

    queues: Iterable[str] = ()
    finished: Iterable[int] = ()


@dataclass(frozen=True, slots=True)
class Upgrade:
    """The plan must write after all (it found a job to recover while reading): a
    runner in a read transaction starts the call again in a write transaction; in a
    write transaction this step does nothing."""


Step = Operation[Any] | Announce | Upgrade
Plan = Generator[Step, Any, T]


@dataclass(frozen=True, slots=True)
class Once(Generic[T]):
    """A single operation committed on its own; ``then`` turns its rows into the result.
    What it announces is known before it runs (PostgreSQL sends it in the same round
    trip), and is announced only when the statement changed something. When it returns
    no rows and ``if_empty`` is given, that plan runs next, in a transaction of its own,
    and gives the result instead."""

    op: Operation[list[Row]]
    then: Callable[[list[Row]], T]
    queues: tuple[str, ...] = ()
    finished: tuple[int, ...] = ()
    if_empty: Callable[[], Plan[T] | Plan[Later[T]]] | None = None


@dataclass(frozen=True, slots=True)
class Later(Generic[T]):
    """A plan's result, made once its transaction has ended: the work of turning rows
    into objects (a claimed batch's jobs) is kept out of the time the transaction holds
    its locks (SQLite's single write lock above all). Runners call ``make``; a plan
    that needs the value inside its transaction calls ``settled``."""

    make: Callable[[], T]


def settled(result: T | Later[T]) -> T:
    """A plan's result, made now if it was left for later."""
    return result.make() if isinstance(result, Later) else result


class Values(Protocol):
    """How one database dialect stores values; what plans need of a backend."""

    @property
    def dialect(self) -> str: ...

    def encode_time(self, value: datetime) -> Any: ...

    def decode_time(self, value: Any) -> datetime | None: ...

    def decode_json(self, value: Any) -> Any: ...

    def json_param(self, items: Any) -> str: ...

    def rows_param(self, rows: list[list[Any]]) -> Any: ...

    def decode_job(self, row: Row, *, deduplicated: bool = False) -> Job: ...


Work = Plan[T] | Plan["Later[T]"] | Once[T]


class LazyArgs(Mapping[str, Any]):
    """A call's arguments by name, made on first use: only a remote queue reads them,
    and the hot calls (enqueue) should not build them for a database queue."""

    __slots__ = ("_made", "_make")

    def __init__(self, make: Callable[[], dict[str, Any]]) -> None:
        self._make = make
        self._made: dict[str, Any] | None = None

    def _args(self) -> dict[str, Any]:
        if self._made is None:
            self._made = self._make()
        return self._made

    def __getitem__(self, name: str) -> Any:
        return self._args()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._args())

    def __len__(self) -> int:
        return len(self._args())

    def __repr__(self) -> str:
        return repr(self._args())


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One operation, its arguments checked. ``args`` holds them by name, as a remote
    queue sends them; ``build`` makes the plan for a database of the given dialect."""

    op: str
    args: Mapping[str, Any]
    build: Callable[[Values], Work[T]] = field(repr=False)
    write: bool = True
    conn: Any = field(default=None, repr=False)
