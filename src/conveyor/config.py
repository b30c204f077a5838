"""Database URLs: which backend, where, with which options.

``sqlite:///relative.db``, ``sqlite:////absolute/path.db``, ``sqlite:///:memory:``,
``postgresql://user@host:port/db``, ``mysql://user:password@host:3306/db`` (or
``mariadb://…``). Options go in the query string; for PostgreSQL the ones conveyor does
not know are handed to libpq (``sslmode``, ``application_name``, …); MySQL refuses them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from conveyor.drivers.base import Driver
from conveyor.errors import ConfigurationError
from conveyor.validation import DEFAULT_MAX_PAYLOAD_BYTES

DEFAULT_URL = "sqlite:///conveyor.db"
ENV_URL = "CONVEYOR_DATABASE_URL"
_QUEUE_OPTIONS = {"max_payload_bytes"}
_SQLITE_OPTIONS = {"synchronous", "timeout", "max_pages"}
_POSTGRES_OPTIONS = {"schema", "pool_min", "pool_max", "connect_timeout"}
_MYSQL_OPTIONS = {"pool_min", "pool_max", "connect_timeout", "client"}
_MYSQL_CLIENTS = ("pymysql", "mysqlclient")
MYSQL_SCHEMES = ("mysql", "mariadb")


@dataclass
class Settings:
    backend: str
    target: str  # a file path, or a libpq conninfo
    backend_options: dict[str, Any] = field(default_factory=dict)
    queue_options: dict[str, Any] = field(default_factory=dict)


def database_url(url: str | None = None, *, command_line: str | None = None) -> str:
    """Which database, in one order everywhere: the command line's ``--db``
    (``command_line``), else ``$CONVEYOR_DATABASE_URL``, else the URL the code names
    (``url``: ``App(url)``, ``connect(url)``), else ``sqlite:///conveyor.db``."""
    return command_line or os.environ.get(ENV_URL) or url or DEFAULT_URL


def parse_url(url: str, **overrides: Any) -> Settings:
    if not isinstance(url, str) or "://" not in url:
        raise ConfigurationError(
            "database URL: expected sqlite:///path.db, postgresql://… or mysql://…, got "
            f"{_without_password(url)!r}"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update({k: str(v) for k, v in overrides.items() if v is not None})
    queue_options = {k: _integer(k, query.pop(k)) for k in list(query) if k in _QUEUE_OPTIONS}
    if "max_payload_bytes" not in queue_options:
        queue_options["max_payload_bytes"] = DEFAULT_MAX_PAYLOAD_BYTES
    if scheme == "sqlite":
        return _sqlite(parts.netloc, parts.path, query, queue_options)
    if scheme in ("postgresql", "postgres"):
        return _postgres(parts, query, queue_options)
    if scheme in MYSQL_SCHEMES:
        return _mysql(parts, query, queue_options)
    raise ConfigurationError(
        f"database URL: unsupported scheme {parts.scheme!r}; expected sqlite, postgresql or mysql"
    )


def _without_password(url: Any) -> Any:
    if not isinstance(url, str) or "@" not in url:
        return url
    head, _, tail = url.rpartition("@")
    scheme, sep, credentials = head.partition("://")
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}@{tail}" if sep else url


def _sqlite(
    netloc: str, path: str, query: dict[str, str], queue_options: dict[str, Any]
) -> Settings:
    if netloc:
        raise ConfigurationError(
            f"SQLite URL: expected sqlite:///path (three slashes), got a host {netloc!r}"
        )
    unknown = set(query) - _SQLITE_OPTIONS
    if unknown:
        raise ConfigurationError(
            f"SQLite URL: unknown option(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_SQLITE_OPTIONS | _QUEUE_OPTIONS))}"
        )
    file = path[1:] if path.startswith("/") else path
    if not file:
        raise ConfigurationError("SQLite URL: expected a file name, as in sqlite:///conveyor.db")
    options: dict[str, Any] = {}
    if "synchronous" in query:
        options["synchronous"] = query["synchronous"].lower()
    if "timeout" in query:
        options["timeout"] = _number("timeout", query["timeout"])
    if "max_pages" in query:
        pages = _number("max_pages", query["max_pages"])
        if pages != int(pages) or pages < 1:
            got = query["max_pages"]
            raise ConfigurationError(f"max_pages: expected a whole number of pages, got {got!r}")
        options["max_pages"] = int(pages)
    return Settings("sqlite", file, options, queue_options)


def _postgres(parts: Any, query: dict[str, str], queue_options: dict[str, Any]) -> Settings:
    options: dict[str, Any] = {}
    if "schema" in query:
        options["schema"] = query.pop("schema")
    for name in ("pool_min", "pool_max"):
        if name in query:
            options[name] = _integer(name, query.pop(name))
    if "connect_timeout" in query:
        options["connect_timeout"] = _number("connect_timeout", query["connect_timeout"])
    conninfo = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(query), ""))
    return Settings("postgresql", conninfo, options, queue_options)


def _mysql(parts: Any, query: dict[str, str], queue_options: dict[str, Any]) -> Settings:
    unknown = set(query) - _MYSQL_OPTIONS
    if unknown:
        raise ConfigurationError(
            f"MySQL URL: unknown option(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(_MYSQL_OPTIONS | _QUEUE_OPTIONS))}"
        )
    options: dict[str, Any] = {}
    for name in ("pool_min", "pool_max"):
        if name in query:
            options[name] = _integer(name, query[name])
    if "connect_timeout" in query:
        options["connect_timeout"] = _number("connect_timeout", query["connect_timeout"])
    if "client" in query:
        if query["client"] not in _MYSQL_CLIENTS:
            raise ConfigurationError(
                f"client: expected {' or '.join(_MYSQL_CLIENTS)}, got {query['client']!r}"
            )
        options["client"] = query["client"]
    database = parts.path.lstrip("/")
    if not database or "/" in database:
        raise ConfigurationError(
            "MySQL URL: expected a database name, as in mysql://user@host:3306/jobs"
        )
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise ConfigurationError("MySQL URL: the port must be a number") from None
    target = urlunsplit(("mysql", parts.netloc, parts.path, "", ""))
    return Settings("mysql", target, options, queue_options)


def application_conninfo(url: str) -> str:
    """The libpq URL for the application's own PostgreSQL connections (a psycopg pool
    of its own, ``psycopg.connect``) to the database of a conveyor URL: conveyor's
    options (``schema``, ``pool_min``, ``pool_max``, ``max_payload_bytes``) taken out,
    which libpq would refuse, and ``?schema=`` kept as the connections' ``search_path``
    (that schema first, then ``public``), so the application's tables live beside the
    queue's. Give the application this, never the conveyor URL itself."""
    settings = parse_url(url)
    if settings.backend != "postgresql":
        raise ConfigurationError(
            f"application_conninfo: expected a postgresql:// URL, got {settings.backend}"
        )
    schema = settings.backend_options.get("schema")
    if not schema:
        return settings.target
    parts = urlsplit(settings.target)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    path = f"-c search_path={_libpq_escape(schema)},public"
    query["options"] = f"{query['options']} {path}" if query.get("options") else path
    return urlunsplit(
        (parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote), "")
    )


def _libpq_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(" ", "\\ ")


def _integer(name: str, value: str) -> int:
    try:
        result = int(value)
    except ValueError:
        raise ConfigurationError(f"{name}: expected an integer, got {value!r}") from None
    if result < 0:
        raise ConfigurationError(f"{name}: expected a non-negative integer, got {result}")
    return result


def _number(name: str, value: str) -> float:
    try:
        result = float(value)
    except ValueError:
        raise ConfigurationError(f"{name}: expected a number, got {value!r}") from None
    if not result >= 0:
        raise ConfigurationError(f"{name}: expected a non-negative number, got {value!r}")
    return result


def open_backend(settings: Settings) -> Driver:
    if settings.backend == "sqlite":
        from conveyor.drivers.sqlite import SQLiteDriver

        return SQLiteDriver(settings.target, **settings.backend_options)
    if settings.backend == "mysql":
        try:
            from conveyor.drivers.mysql import MySQLDriver
        except ImportError as exc:
            raise ConfigurationError(
                f"MySQL needs PyMySQL: pip install 'conveyor[mysql]' ({exc})"
            ) from None
        return MySQLDriver(settings.target, **settings.backend_options)
    try:
        from conveyor.drivers.postgres import PostgresDriver
    except ImportError as exc:
        raise ConfigurationError(
            f"PostgreSQL needs psycopg 3 and psycopg_pool: pip install 'conveyor[postgres]' ({exc})"
        ) from None
    return PostgresDriver(settings.target, **settings.backend_options)
