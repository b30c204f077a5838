"""What the synchronous and asynchronous MySQL backends share: where the server is,
statements in PyMySQL's placeholder style, values, and error translation.

Both drivers (PyMySQL, and aiomysql built on it) escape parameters on the client, so a
tuple parameter becomes an SQL list: ``id IN :locked`` with ``locked=(1, 2)`` reads
``id IN (1, 2)``."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql
import pymysql.converters
from pymysql.constants import CLIENT, FIELD_TYPE

from conveyor.drivers.base import Capabilities
from conveyor.drivers.mysql.handlers import PACKED_JOB
from conveyor.drivers.sql import (
    Migration,
    Statements,
    load_migrations,
    load_queries,
    split_statements,
)
from conveyor.drivers.values import Values, job_columns, json_columns, utc_milliseconds
from conveyor.errors import (
    ConfigurationError,
    ConveyorError,
    DatabaseError,
    DatabaseUnavailable,
    DuplicateJob,
    InvalidArgument,
    StorageFull,
    StorageReadOnly,
    TransactionConflict,
)

PACKAGE = "conveyor.drivers.mysql"
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
# The database clock: UTC, to the microsecond, whatever the server's time zone.
NOW = "UTC_TIMESTAMP(6)"
# A job's error history as it stands before one more entry: the latest 19 (of at most 20).
_ERRORS_KEPT = (
    "(CASE WHEN JSON_LENGTH(coalesce(errors, '[]')) >= 20"
    " THEN JSON_REMOVE(errors, '$[0]') ELSE coalesce(errors, '[]') END)"
)
_MINUTE_OF_AT = "CAST(DATE_FORMAT(at, '%Y-%m-%d %H:%i:00') AS DATETIME)"
# Binary, no-pad collations: text compares as on the other databases ('A' <> 'a',
# 'a' <> 'a '). MariaDB and MySQL name theirs differently.
MARIADB_COLLATION = "utf8mb4_nopad_bin"
MYSQL_COLLATION = "utf8mb4_0900_bin"
# Errors after which running the transaction again may succeed.
_DEADLOCK, _LOCK_WAIT_TIMEOUT = 1213, 1205
CONFLICTS = (_DEADLOCK, _LOCK_WAIT_TIMEOUT)
_DUPLICATE_KEY = 1062
# The server runs --read-only (1290), or the transaction is READ ONLY (1792), or the
# server went read-only for a transaction in progress (1836).
_READ_ONLY = {1290, 1792, 1836}
# Disk full (1021), a table full (1114), an error writing a file (3); and 1030, "Got
# error 28 from storage engine", where 28 is ENOSPC.
_FULL = {3, 1021, 1114}
# Cannot connect (2002, 2003), the server has gone away (2006) or the connection was
# lost (2013, 2055), the server is shutting down (1053, ER_SERVER_SHUTDOWN; 1927 on
# MariaDB, a connection killed at shutdown), too many connections (1040).
_UNAVAILABLE = {1040, 1053, 1927, 2002, 2003, 2006, 2013, 2055}
# Values the server refused: bad JSON (4025: CHECK failed on MariaDB, 3819 on MySQL),
# out of range, too long, bad date.
_REFUSED_VALUES = {1264, 1292, 1366, 1406, 1690, 3140, 3819, 4025, 4078}
# Conveyor's locks are held for milliseconds: a wait this long (seconds) means a holder
# that stopped (a frozen process mid-transaction). The wait ends in TransactionConflict,
# and the operation runs again.
LOCK_WAIT_TIMEOUT = 5
DEFAULT_PORT = 3306


@dataclass(frozen=True)
class Server:
    """Where the database is; the password never leaves this object in text."""

    host: str
    port: int
    user: str
    password: str | None
    database: str

    @classmethod
    def from_url(cls, url: str) -> Server:
        parts = urlsplit(url)
        database = unquote(parts.path.lstrip("/"))
        if not database or "/" in database:
            raise ConfigurationError(
                "MySQL URL: expected a database name, as in mysql://user@host:3306/jobs"
            )
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise ConfigurationError("MySQL URL: the port must be a number") from None
        return cls(
            host=parts.hostname or "localhost",
            port=port,
            user=unquote(parts.username or "root"),
            password=None if parts.password is None else unquote(parts.password),
            database=database,
        )

    def describe(self) -> str:
        return f"mysql://{self.user}@{self.host}:{self.port}/{self.database}"

    def connect_kwargs(
        self, connect_timeout: float, conversions: dict[Any, Any] | None = None
    ) -> dict[str, Any]:
        """Keyword arguments of PyMySQL's and mysqlclient's ``connect`` (``conversions``:
        the column readers, PyMySQL's by default)."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password or "",
            "database": self.database,
            "charset": "utf8mb4",
            "autocommit": True,
            # Changed-row counts as the other databases give them: rows matched, not only
            # rows whose values differ.
            "client_flag": CLIENT.FOUND_ROWS,
            "connect_timeout": max(1, round(connect_timeout)),
            "conv": PYMYSQL_CONVERSIONS if conversions is None else conversions,
        }


@lru_cache(maxsize=4096)
def datetime_column(text: str) -> datetime | str:
    """A DATETIME as PyMySQL hands it over (``2026-11-28 01:02:03.456000``), read by
    the C parser: PyMySQL's own (a regular expression, then ``int`` of each part) was a
    quarter of a MySQL worker's claim loop. Cached, as a claimed batch repeats the same
    few instants. What the parser refuses (a zero date) goes to PyMySQL's."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        converted: datetime | str = pymysql.converters.convert_datetime(text)
        return converted


PYMYSQL_CONVERSIONS: dict[Any, Any] = {
    **pymysql.converters.conversions,
    FIELD_TYPE.DATETIME: datetime_column,
    FIELD_TYPE.TIMESTAMP: datetime_column,
}


def to_pymysql(statement: str) -> str:
    return _PARAM.sub(r"%(\1)s", statement.replace("%", "%%"))


def bind(
    statement: str, params: Mapping[str, Any], escape: Callable[[Any], str]
) -> tuple[str, Mapping[str, Any]]:
    """A list parameter (a tuple, of values or of tuples) written into the statement as
    an SQL list, each value escaped by the connection: ``IN %(locked)s`` with
    ``locked=(1, 2)`` becomes ``IN (1,2)``. Drivers differ in whether they do it."""
    lists = [name for name, value in params.items() if isinstance(value, tuple)]
    if not lists:
        return statement, params

    def literal(value: Any) -> str:
        if type(value) is int:  # what every driver writes for one, without its call
            return str(value)
        if isinstance(value, tuple):
            if all(type(v) is int for v in value):  # ids, the commonest list
                return "(" + ",".join(map(str, value)) + ")"
            return "(" + ",".join(literal(v) for v in value) + ")"
        return escape(value)

    rest = dict(params)
    for name in lists:
        text = literal(rest.pop(name)).replace("%", "%%")
        statement = statement.replace(f"%({name})s", text)
    return statement, rest


# What a single enqueue returns on MariaDB, whose INSERT can (a session tells whether it
# has that statement: returning_inserts).
_RETURNING_NEW_JOB = "\nRETURNING id, run_at, created_at"


def is_mariadb(version: str) -> bool:
    return "mariadb" in version.lower()


def macros(collation: str, *, packed_rows: bool = False) -> dict[str, str]:
    columns = ", ".join(f"`{column}`" for column in job_columns())
    return {
        "now": NOW,
        "errors_kept": _ERRORS_KEPT,
        "minute_of_at": _MINUTE_OF_AT,
        "collation": collation,
        # A text column of a JSON_TABLE, compared with conveyor's own text.
        "text": f"VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE {collation}",
        # What a job is read from: not the generated columns the indexes use.
        "job_columns": columns,
        # Whole jobs read back by the handlers: on MariaDB one JSON array per row.
        "job_row": _packed_job() if packed_rows else columns,
    }


def _packed_job() -> str:
    """A job's columns as one JSON array (``handlers.read_jobs`` reads it): PyMySQL reads
    each column of a row in Python, and parses its times there too, where ``json``
    reads the array in C: about 40% less of the client's CPU per claimed row
    (``benchmarks/mysql_rows.py``). JSON columns go in as text, as they are stored
    (MariaDB would otherwise embed them as JSON, re-written); times go in as MariaDB
    writes a DATETIME(6), which ``decode_time`` reads."""
    as_json = set(json_columns())
    values = ", ".join(
        f"CAST(`{c}` AS CHAR CHARACTER SET utf8mb4)" if c in as_json else f"`{c}`"
        for c in job_columns()
    )
    return f"JSON_ARRAY({values}) AS {PACKED_JOB}"


def compound_complete(text: str) -> bool:
    """Whether ``text`` holds whole statements: a trigger with a BEGIN … END body ends
    at its ``END;``, anything else at a semicolon."""
    stripped = text.rstrip()
    if not stripped.endswith(";"):
        return False
    if re.search(r"^\s*BEGIN\s*$", text, re.MULTILINE | re.IGNORECASE):
        return stripped.upper().endswith("END;")
    return True


def migration_statements(migration: Migration) -> list[str]:
    return [s.rstrip().rstrip(";") for s in split_statements(migration.sql, compound_complete)]


# A value read from a DATETIME is naive, and UTC. Cached: a claimed batch repeats the
# same few instants.
_to_milliseconds = lru_cache(maxsize=4096)(utc_milliseconds)


@lru_cache(maxsize=4096)
def _text_to_milliseconds(value: str) -> datetime:
    """The same for a time as text (a packed row's): cached by its text, parse and all."""
    return utc_milliseconds(datetime.fromisoformat(value))


class MySQLValues(Values):
    """Statements and values of one database, for either kind of backend."""

    dialect = "mysql"
    # Declared once for the synchronous and the asynchronous driver.
    capabilities = Capabilities(
        one_round_trip=False, listen_notify=False, skip_locked=True, returning=False
    )

    def __init__(self, server: Server) -> None:
        self.server = server
        self._queries = Statements({}, {})
        self._migrations: list[Migration] = []

    def _load(self, server_version: str) -> None:
        """Statements for the server found (the collation's name differs)."""
        self.mariadb = is_mariadb(server_version)
        found = macros(
            MARIADB_COLLATION if self.mariadb else MYSQL_COLLATION, packed_rows=self.mariadb
        )
        self._queries = load_queries(PACKAGE, found).map(to_pymysql)
        if self.mariadb:
            insert = self._queries["insert_job"]
            self._queries["insert_job_returning"] = insert + _RETURNING_NEW_JOB
        self._migrations = load_migrations(PACKAGE, found)

    def encode_time(self, value: datetime) -> str:
        # Text MySQL reads as a DATETIME(6), and JSON can carry (bulk inserts).
        utc = value.astimezone(timezone.utc) if value.tzinfo else value
        return utc.strftime("%Y-%m-%d %H:%M:%S.%f")

    def decode_time(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return _text_to_milliseconds(value)
        assert isinstance(value, datetime)
        return _to_milliseconds(value)

    def decode_json(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray):
            value = value.decode("utf-8")
        return json.loads(value)

    def latest_version(self) -> int:
        return self._migrations[-1].version

    def describe(self) -> str:
        return self.server.describe()


def error_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_driver_error(exc: BaseException) -> bool:
    """An error of PyMySQL, or of mysqlclient (``MySQLdb``, Django's MySQL driver) when a
    caller's connection of it runs conveyor's statements (``conn=``)."""
    if isinstance(exc, pymysql.Error):
        return True
    mysqldb = sys.modules.get("MySQLdb")  # imported if a connection of it exists
    return mysqldb is not None and isinstance(exc, getattr(mysqldb, "Error", ()))


def translation(exc: BaseException) -> ConveyorError:
    """The conveyor error for a driver's error (messages never hold the password)."""
    code = error_code(exc)
    message = exc.args[1] if len(exc.args) > 1 else str(exc)
    if code == _DEADLOCK:
        return TransactionConflict(f"MySQL broke a deadlock by rolling back: {message}")
    if code == _LOCK_WAIT_TIMEOUT:
        return TransactionConflict(f"MySQL gave up waiting for a lock: {message}")
    if code == _DUPLICATE_KEY:
        if "conveyor_jobs_active_key" in str(message):
            return DuplicateJob("an active job with this key already exists")
        return DatabaseError(f"MySQL duplicate key: {message}")
    if code in _READ_ONLY:
        return StorageReadOnly(f"MySQL accepts no writes: {message}")
    if code in _FULL or (code == 1030 and "error 28 " in str(message)):
        return StorageFull(f"MySQL has no room left: {message}")
    # By class name: PyMySQL's and mysqlclient's exception classes are distinct.
    if code in _UNAVAILABLE or (code is None and type(exc).__name__ == "InterfaceError"):
        return DatabaseUnavailable(f"MySQL is unavailable: {message}")
    if code in _REFUSED_VALUES or type(exc).__name__ == "DataError":
        return InvalidArgument(f"MySQL refused a value: {message}")
    if code is None:
        return DatabaseError(f"MySQL error: {exc}")
    return DatabaseError(f"MySQL error {code}: {message}")


def connect_failure(exc: BaseException, where: str) -> ConveyorError:
    """Why a connection to ``where`` could not be made: a server that cannot be reached
    is unavailable (worth waiting for; a timeout included), one that refuses us is a
    plain error. Both drivers, sync and async, say it alike."""
    if not is_driver_error(exc):  # an OSError of the socket, before the protocol began
        return DatabaseUnavailable(f"cannot connect to MySQL at {where}: "
                                   f"{exc or type(exc).__name__}")  # fmt: skip
    why = translation(exc)
    if isinstance(why, DatabaseUnavailable):
        reason = exc.args[1] if len(exc.args) > 1 else exc
        return DatabaseUnavailable(f"cannot connect to MySQL at {where}: {reason}")
    return DatabaseError(f"cannot connect to MySQL at {where}: {why.message}")


@contextmanager
def translated() -> Iterator[None]:
    """Nothing above the backend sees driver exceptions."""
    try:
        yield
    except Exception as exc:
        if not is_driver_error(exc):
            raise
        raise translation(exc) from None


@contextmanager
def scratch_database(url: str, name: str) -> Iterator[str]:
    """A new, empty database ``name`` on the server of ``url`` (its URL), dropped after."""
    server = Server.from_url(url)
    options = server.connect_kwargs(10.0)
    options.pop("database")
    with translated():
        admin = pymysql.connect(**options)
    try:
        with translated(), admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        try:
            parts = urlsplit(url)
            yield parts._replace(path=f"/{name}").geturl()
        finally:
            with translated(), admin.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        admin.close()
