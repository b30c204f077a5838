"""What the synchronous and asynchronous PostgreSQL backends share: statements in
psycopg's placeholder style, values, error translation and notifications."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.adapt import AdaptersMap
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.json import JsonbLoader
from psycopg_pool import PoolClosed, PoolTimeout

from conveyor.drivers.base import Capabilities
from conveyor.drivers.sql import Migration, load_migrations, load_queries
from conveyor.drivers.values import Values, utc_milliseconds
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DatabaseUnavailable,
    DuplicateJob,
    InvalidArgument,
    StorageFull,
    StorageReadOnly,
)

PACKAGE = "conveyor.drivers.postgres"
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# A job's error history as it stands before one more entry: the latest 19 (of at most 20).
_ERRORS_KEPT = (
    "(CASE WHEN jsonb_array_length(coalesce(errors, '[]'::jsonb)) >= 20"
    " THEN errors - 0 ELSE coalesce(errors, '[]'::jsonb) END)"
)
# The claims a report's items name, for `claim_id = {claims_of_items}`: a report finds
# its jobs through them (why: queries/reports.sql).
_CLAIMS_OF_ITEMS = (
    "ANY (ARRAY(SELECT DISTINCT c.claim_id"
    " FROM jsonb_to_recordset(:items::jsonb) AS c(claim_id text)))"
)
# Statements planned at every call, never prepared. psycopg prepares a statement run five
# times, and PostgreSQL may then keep one generic plan for every value of its parameters:
# for the job lists that plan walks the primary key (right for a status most jobs have,
# such as completed), and a list of the few pending or running jobs, or of one queue's,
# then read every finished job before them (benchmarks/growth.py). Planned with its
# values, each call gets the index its filter needs; planning costs a fraction of a
# millisecond, and these are reads of pages for people, not the hot path.
PLANNED_PER_CALL = frozenset({"list_jobs"})


def prepare(query: str) -> bool | None:
    """psycopg's ``prepare`` argument for a named statement (None: its default)."""
    return False if query in PLANNED_PER_CALL else None


# Keep NOTIFY payloads well under PostgreSQL's 8000-byte limit.
_MAX_PAYLOAD = 4000


def _to_psycopg(statement: str) -> str:
    return _PARAM.sub(r"%(\1)s", statement.replace("%", "%%"))


# Cached: a claimed batch repeats the same few instants (its transaction's now()).
_to_milliseconds = lru_cache(maxsize=4096)(utc_milliseconds)


class PostgresValues(Values):
    """Statements and values of one schema, for either kind of backend."""

    dialect = "postgresql"
    # Declared once for the synchronous and the asynchronous driver.
    capabilities = Capabilities(
        one_round_trip=True, listen_notify=True, skip_locked=True, returning=True
    )

    def __init__(self, conninfo: str, schema: str) -> None:
        if not _IDENTIFIER.match(schema):
            raise ConfigurationError(
                f"schema: expected a plain identifier (letters, digits, _), got {schema!r}"
            )
        self.schema = schema
        self._conninfo = conninfo
        macros = {
            "schema": sql.Identifier(schema).as_string(None),
            "errors_kept": _ERRORS_KEPT,
            "claims_of_items": _CLAIMS_OF_ITEMS,
        }
        self._queries = load_queries(PACKAGE, macros).map(_to_psycopg)
        self._announcing: dict[str, str] = {}
        self._migrations: list[Migration] = load_migrations(PACKAGE, macros)
        self.channel = f"conveyor_{schema}"[:63]

    def _announced(self, statement: str) -> str:
        """``statement`` with its NOTIFY, made once: the same string object every call
        keeps psycopg's query and prepared-statement caches from hashing it anew. (The
        statements are a fixed set, each with a few variants: ``Statements.text``.)"""
        made = self._announcing.get(statement)
        if made is None:
            made = self._announcing[statement] = ANNOUNCING.format(statement=statement)
        return made

    # Whether the server is known to be unreachable: set and cleared by the drivers'
    # ``_watching`` around each operation.
    _down = False

    def _checkout_timeout(self) -> float | None:
        """How long to wait for a pooled connection: the pool's timeout, but only a
        moment while the server is known to be unreachable, so that callers (an HTTP
        request, a worker's claim) hear ``DatabaseUnavailable`` at once rather than
        after every reconnection attempt the pool makes meanwhile."""
        return DOWN_CHECKOUT_TIMEOUT if self._down else None

    def encode_time(self, value: datetime) -> str:
        return value.astimezone(timezone.utc).isoformat()

    def decode_time(self, value: Any) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return _to_milliseconds(value)

    def decode_json(self, value: Any) -> Any:
        return value  # psycopg already parsed jsonb

    def describe(self) -> str:
        params = psycopg.conninfo.conninfo_to_dict(self._conninfo)
        host = params.get("host", "localhost")
        port = params.get("port", 5432)
        where = f"postgresql://{params.get('user', '')}@{host}:{port}/{params.get('dbname', '')}"
        return where if self.schema == "public" else f"{where}?schema={self.schema}"


def read_as_conveyor(adapters: AdaptersMap) -> None:
    """Make a cursor on a caller's connection read values as conveyor's own connections
    do, whatever that connection was configured with (Django reads jsonb as text and
    timestamptz in its own time zone)."""
    adapters.register_loader("jsonb", JsonbLoader)
    adapters.register_loader("timestamptz", TimestamptzLoader)


def in_own_block(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether work on a caller's connection needs a transaction block of its own: a
    savepoint inside their open transaction, or a transaction when the connection is in
    autocommit mode. Otherwise (no autocommit, nothing begun yet) our statements begin
    the caller's transaction, which commits or rolls back when they say."""
    status = conn.info.transaction_status
    return bool(conn.autocommit) or status != psycopg.pq.TransactionStatus.IDLE


def notification(queues: Iterable[str], finished: Iterable[int]) -> str | None:
    """The NOTIFY payload saying which queues got claimable jobs and which jobs finished."""
    if type(queues) is tuple and len(queues) == 1 and finished == ():
        return _queue_touched(queues[0])  # every enqueue: one queue, nothing finished
    touched, done = sorted(set(queues)), sorted(set(finished))
    if not (touched or done):
        return None
    if not done and len(touched) == 1:
        return _queue_touched(touched[0])  # every enqueue: the same few payloads
    payload = json.dumps({"queues": touched, "finished": done})
    if len(payload) > _MAX_PAYLOAD:
        payload = json.dumps({"queues": touched[:50], "finished": "*"})
    return payload


@lru_cache(maxsize=256)
def _queue_touched(queue: str) -> str:
    return json.dumps({"queues": [queue], "finished": []})


# A statement that makes jobs claimable or final carries its NOTIFY along. In autocommit
# mode one statement is one transaction: one round trip, where a session needs four
# (BEGIN, the statement, NOTIFY, COMMIT). MATERIALIZED: the notification is sent once,
# however many rows the statement returns.
ANNOUNCING = (
    "WITH changed AS ({statement}),"
    " sent AS MATERIALIZED (SELECT pg_notify(%(notify_channel)s, %(notify_payload)s))"
    " SELECT changed.* FROM changed, sent"
)


@contextmanager
def translated() -> Iterator[None]:
    """Nothing above the backend sees ``psycopg`` exceptions."""
    try:
        yield
    except psycopg.Error as exc:
        raise translation(exc) from None


def translation(exc: psycopg.Error) -> ConveyorError:
    """The error to raise for a ``psycopg`` one (the pool's timeouts included)."""
    if isinstance(exc, pgerrors.UniqueViolation):
        if "conveyor_jobs_active_key" in str(exc):
            return DuplicateJob("an active job with this key already exists")
        return DatabaseError(f"PostgreSQL unique violation: {exc}")
    if isinstance(exc, pgerrors.DataException):  # NumericValueOutOfRange among them
        return InvalidArgument(f"PostgreSQL refused a value: {exc}")
    if isinstance(exc, pgerrors.DiskFull):
        return StorageFull(f"PostgreSQL is out of disk space: {one_line(exc)}")
    if isinstance(exc, pgerrors.ReadOnlySqlTransaction):
        return StorageReadOnly(f"PostgreSQL accepts no writes: {one_line(exc)}")
    if isinstance(exc, PoolTimeout):
        return DatabaseUnavailable(f"no PostgreSQL connection available: {exc}")
    if unavailable(exc):
        return DatabaseUnavailable(f"PostgreSQL is unavailable: {one_line(exc)}")
    return DatabaseError(f"PostgreSQL error: {exc}")


# Seconds a pool keeps trying to replace a connection the server refused, backing off
# (1 s, 2 s, ...), before it gives that attempt up; the next caller who finds no
# connection starts a fresh one at once. Short, so that a server back from a restart is
# found within a second or two, not after the pool's long backoff (minutes, by default).
RECONNECT_TIMEOUT = 2.0
# Seconds to wait for a pooled connection while the server is known to be unreachable,
# rather than the pool's whole timeout: callers (an HTTP request, a worker's claim)
# hear ``DatabaseUnavailable`` at once.
DOWN_CHECKOUT_TIMEOUT = 1.0


class OneLineLogs(logging.Filter):
    """The pool's own log records on one line: psycopg's connection errors carry a
    second, indented line ("Is the server running on that host ..."), which, once per
    attempt while a server is down, fills a log with noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "\n" in message:
            record.msg, record.args = " ".join(message.split()), None
        return True


_POOL_LOG = logging.getLogger("psycopg.pool")
if not any(isinstance(f, OneLineLogs) for f in _POOL_LOG.filters):
    _POOL_LOG.addFilter(OneLineLogs())


# The server is shutting down, starting up, or in recovery: class 57P, and 08 (the
# connection failed or was lost).
_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03", "57P05")


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server cannot be reached (rather than refusing the
    statement): a lost or refused connection, or a server shutting down or starting."""
    if isinstance(exc, PoolClosed):  # the queue was closed: not the server's doing
        return False
    state = getattr(exc, "sqlstate", None)
    if state is None:
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return state.startswith("08") or state in _UNAVAILABLE_STATES


def one_line(exc: BaseException) -> str:
    """The first line of a driver's message (PostgreSQL adds DETAIL and HINT lines)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
