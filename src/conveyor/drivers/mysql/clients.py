"""Which client library the synchronous MySQL backend's own connections use.

PyMySQL (the default) is pure Python: ``pip install 'conveyor[mysql]'`` needs no
compiler. mysqlclient (``MySQLdb``, Django's MySQL driver) is a C extension that reads a
result set several times faster, for a busy worker; it is built against the MySQL or
MariaDB client headers, so it is chosen explicitly, with ``?client=mysqlclient``. Both
speak to conveyor through the same dict cursor, ``escape`` and error codes; the
asynchronous backend always uses aiomysql (built on PyMySQL)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysql.constants import FIELD_TYPE

from conveyor.drivers.mysql.dialect import PYMYSQL_CONVERSIONS, datetime_column
from conveyor.errors import ConfigurationError

PYMYSQL, MYSQLCLIENT = "pymysql", "mysqlclient"
CLIENTS = (PYMYSQL, MYSQLCLIENT)


@dataclass(frozen=True)
class Client:
    """What the backend needs of a client library."""

    name: str
    connect: Callable[..., Any]
    dict_cursor: type[Any]
    error: type[Exception]
    # Errors after which a pooled connection is thrown away and another one tried.
    gone: tuple[type[Exception], ...]
    # Column readers by field type: the library's own, with conveyor's for DATETIME.
    conversions: dict[Any, Any]
    # How a connection of the library writes a value as an SQL literal, as text.
    escape: Callable[[Any], Callable[[Any], str]]
    # The file descriptor of a connection's socket.
    fileno: Callable[[Any], int]


def _pymysql_escape(conn: Any) -> Callable[[Any], str]:
    escape: Callable[[Any], str] = conn.escape
    return escape


def mysqlclient_escape(conn: Any) -> Callable[[Any], str]:
    encoding = getattr(conn, "encoding", None) or "utf-8"

    def literal(value: Any) -> str:
        text = conn.literal(value)
        return text.decode(encoding) if isinstance(text, bytes) else str(text)

    return literal


def client(name: str) -> Client:
    """The client called ``name`` (one of ``CLIENTS``)."""
    if name == PYMYSQL:
        return Client(
            PYMYSQL,
            pymysql.connect,
            pymysql.cursors.DictCursor,
            pymysql.Error,
            (pymysql.err.OperationalError, pymysql.err.InterfaceError),
            PYMYSQL_CONVERSIONS,
            _pymysql_escape,
            lambda conn: int(conn._sock.fileno()),
        )
    if name != MYSQLCLIENT:
        raise ConfigurationError(f"client: expected one of {', '.join(CLIENTS)}, got {name!r}")
    try:
        mysqldb = importlib.import_module("MySQLdb")
        converters = importlib.import_module("MySQLdb.converters")
        cursors = importlib.import_module("MySQLdb.cursors")
    except ImportError as exc:
        raise ConfigurationError(
            "client=mysqlclient needs mysqlclient, a C extension built against the MySQL "
            "or MariaDB client headers: pip install 'conveyor[mysqlclient]' "
            f"({type(exc).__name__}: {exc})"
        ) from None
    return Client(
        MYSQLCLIENT,
        mysqldb.connect,
        cursors.DictCursor,
        mysqldb.Error,
        (mysqldb.OperationalError, mysqldb.InterfaceError),
        {
            **converters.conversions,
            FIELD_TYPE.DATETIME: datetime_column,
            FIELD_TYPE.TIMESTAMP: datetime_column,
        },
        mysqlclient_escape,
        lambda conn: int(conn.fileno()),
    )
