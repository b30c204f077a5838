"""PostgreSQL: for workers spread over many machines.

Claims use ``FOR UPDATE SKIP LOCKED`` so concurrent claimers never wait on each other's
rows. A transaction that makes jobs claimable or final sends one NOTIFY (at most) on the
schema's channel; a listener thread turns those into wake-ups for ``wait()`` and workers.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from conveyor.backends.base import Backend, Row, Session
from conveyor.backends.sql import load_migrations, load_queries
from conveyor.errors import ConfigurationError, DatabaseError, DuplicateJob, InvalidArgument

log = logging.getLogger("conveyor.postgres")
_PACKAGE = "conveyor.backends.postgres"
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# A job's error history as it stands before one more entry: the latest 19 (of at most 20).
_ERRORS_KEPT = (
    "(CASE WHEN jsonb_array_length(coalesce(errors, '[]'::jsonb)) >= 20"
    " THEN errors - 0 ELSE coalesce(errors, '[]'::jsonb) END)"
)
# Keep NOTIFY payloads well under PostgreSQL's 8000-byte limit.
_MAX_PAYLOAD = 4000


def _to_psycopg(statement: str) -> str:
    return _PARAM.sub(r"%(\1)s", statement.replace("%", "%%"))


@lru_cache(maxsize=4096)
def _to_milliseconds(value: datetime) -> datetime:
    """PostgreSQL keeps microseconds, SQLite milliseconds: keep both alike, in UTC.
    Cached: a claimed batch repeats the same few instants (its transaction's now())."""
    extra = value.microsecond % 1000
    if extra:
        value = value.replace(microsecond=value.microsecond - extra)
    return value if value.tzinfo is timezone.utc else value.astimezone(timezone.utc)


class _PostgresSession(Session):
    def __init__(self, conn: psycopg.Connection[Any], queries: Mapping[str, str]) -> None:
        super().__init__()
        self._cur = conn.cursor(row_factory=dict_row)
        self._queries = queries

    def all(self, query: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        with _translated():
            self._cur.execute(self._queries[query], params or {})
            rows: list[Row] = list(self._cur.fetchall()) if self._cur.description else []
            return rows

    def execute(self, query: str, params: Mapping[str, Any] | None = None) -> int:
        with _translated():
            self._cur.execute(self._queries[query], params or {})
            return self._cur.rowcount

    def send_notification(self, channel: str) -> None:
        payload = _notification(self.queues_touched, self.jobs_finished)
        if payload is None:
            return
        with _translated():
            self._cur.execute("SELECT pg_notify(%s, %s)", (channel, payload))


def _notification(queues: Iterable[str], finished: Iterable[int]) -> str | None:
    """The NOTIFY payload saying which queues got claimable jobs and which jobs finished."""
    touched, done = sorted(set(queues)), sorted(set(finished))
    if not (touched or done):
        return None
    payload = json.dumps({"queues": touched, "finished": done})
    if len(payload) > _MAX_PAYLOAD:
        payload = json.dumps({"queues": touched[:50], "finished": "*"})
    return payload


# A statement that makes jobs claimable or final carries its NOTIFY along. In autocommit
# mode one statement is one transaction: one round trip, where a session needs four
# (BEGIN, the statement, NOTIFY, COMMIT). MATERIALIZED: the notification is sent once,
# however many rows the statement returns.
_ANNOUNCING = (
    "WITH changed AS ({statement}),"
    " sent AS MATERIALIZED (SELECT pg_notify(%(notify_channel)s, %(notify_payload)s))"
    " SELECT changed.* FROM changed, sent"
)


@contextmanager
def _translated() -> Iterator[None]:
    """Nothing above the backend sees ``psycopg`` exceptions."""
    try:
        yield
    except pgerrors.UniqueViolation as exc:
        if "conveyor_jobs_active_key" in str(exc):
            raise DuplicateJob("an active job with this key already exists") from None
        raise DatabaseError(f"PostgreSQL unique violation: {exc}") from None
    except (pgerrors.DataException, pgerrors.NumericValueOutOfRange) as exc:
        raise InvalidArgument(f"PostgreSQL refused a value: {exc}") from None
    except PoolTimeout as exc:
        raise DatabaseError(f"no PostgreSQL connection available: {exc}") from None
    except psycopg.Error as exc:
        raise DatabaseError(f"PostgreSQL error: {exc}") from None


class PostgresBackend(Backend):
    dialect = "postgresql"
    supports_listen_notify = True

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        pool_min: int = 1,
        pool_max: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__()
        if not _IDENTIFIER.match(schema):
            raise ConfigurationError(
                f"schema: expected a plain identifier (letters, digits, _), got {schema!r}"
            )
        self.schema = schema
        self._conninfo = conninfo
        macros = {"schema": sql.Identifier(schema).as_string(None), "errors_kept": _ERRORS_KEPT}
        self._queries = {k: _to_psycopg(v) for k, v in load_queries(_PACKAGE, macros).items()}
        self._migrations = load_migrations(_PACKAGE, macros)
        self.channel = f"conveyor_{schema}"[:63]
        self._listener: threading.Thread | None = None
        self._closing = threading.Event()
        self._pool = ConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=max(pool_min, pool_max),
            kwargs={"autocommit": True},
            configure=self._configure,
            timeout=connect_timeout,
            open=False,
            name=f"conveyor-{schema}",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout:
            self._pool.close()
            raise DatabaseError(
                f"cannot connect to PostgreSQL at {self.describe()} within {connect_timeout:g}s"
            ) from None

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET TIME ZONE 'UTC'")

    # -- sessions -------------------------------------------------------------------
    @contextmanager
    def session(self, *, write: bool = True, conn: Any = None) -> Iterator[Session]:
        if conn is not None:
            with self._caller_session(conn) as session:
                yield session
            return
        with _translated(), self._pool.connection() as pooled, pooled.transaction():
            session = _PostgresSession(pooled, self._queries)
            yield session
            session.send_notification(self.channel)
        if session.queues_touched or session.jobs_finished:
            self._announce()

    def write_once(
        self,
        query: str,
        params: Mapping[str, Any],
        *,
        queues: Iterable[str] = (),
        finished: Iterable[int] = (),
    ) -> list[Row]:
        statement = self._queries[query]
        payload = _notification(queues, finished)
        if payload is not None:
            statement = _ANNOUNCING.format(statement=statement)
            params = {**params, "notify_channel": self.channel, "notify_payload": payload}
        # Pool connections are in autocommit mode: the statement commits on its own.
        with _translated(), self._pool.connection() as pooled:
            cur = pooled.cursor(row_factory=dict_row)
            cur.execute(statement, params)
            rows: list[Row] = list(cur.fetchall()) if cur.description else []
        if rows and payload is not None:
            self._announce()
        return rows

    @contextmanager
    def _caller_session(self, conn: Any) -> Iterator[Session]:
        if not isinstance(conn, psycopg.Connection):
            raise InvalidArgument(
                "conn: expected a psycopg.Connection for a PostgreSQL queue, "
                f"got {type(conn).__name__}"
            )
        # Inside the caller's transaction we work in a savepoint, so an error of ours
        # never aborts their transaction; the jobs commit or roll back with it.
        in_tx = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        if in_tx:
            with _translated(), conn.transaction():
                session = _PostgresSession(conn, self._queries)
                yield session
                session.send_notification(self.channel)
        else:
            session = _PostgresSession(conn, self._queries)
            yield session
            session.send_notification(self.channel)

    # -- schema ---------------------------------------------------------------------
    def migrate(self, target: int | None = None) -> list[int]:
        applied: list[int] = []
        ident = sql.Identifier(self.schema)
        with _translated(), self._pool.connection() as conn, conn.transaction():
            # One migrator at a time per schema, across every process and machine.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"conveyor:{self.schema}",))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.conveyor_migrations ("
                    " version integer PRIMARY KEY, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(ident)
            )
            rows = conn.execute(
                sql.SQL("SELECT version FROM {}.conveyor_migrations").format(ident)
            ).fetchall()
            done = {r[0] for r in rows}
            for migration in self._migrations:
                if migration.version in done or (target and migration.version > target):
                    continue
                # One script, sent as a simple query (no parameters), so function bodies
                # with semicolons of their own need no splitting; bytes: no placeholder
                # parsing.
                conn.execute(migration.sql.encode())
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {}.conveyor_migrations (version, name) VALUES (%s, %s)"
                    ).format(ident),
                    (migration.version, migration.name),
                )
                applied.append(migration.version)
        return applied

    def schema_version(self) -> int:
        with _translated(), self._pool.connection() as conn:
            exists = conn.execute(
                "SELECT to_regclass(%s)", (f"{self.schema}.conveyor_migrations",)
            ).fetchone()
            if not exists or exists[0] is None:
                return 0
            row = conn.execute(
                sql.SQL("SELECT max(version) FROM {}.conveyor_migrations").format(
                    sql.Identifier(self.schema)
                )
            ).fetchone()
            return int(row[0] or 0) if row else 0

    def latest_version(self) -> int:
        return self._migrations[-1].version

    def describe_schema(self) -> list[str]:
        with _translated(), self._pool.connection() as conn:
            cols = conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable, column_default"
                " FROM information_schema.columns WHERE table_schema = %s"
                " AND table_name LIKE 'conveyor%%' AND table_name != 'conveyor_migrations'",
                (self.schema,),
            ).fetchall()
            indexes = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s"
                " AND tablename LIKE 'conveyor%%' AND tablename != 'conveyor_migrations'",
                (self.schema,),
            ).fetchall()
            constraints = conn.execute(
                "SELECT conname, pg_get_constraintdef(c.oid) FROM pg_constraint c"
                " JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = %s"
                " AND conname NOT LIKE 'conveyor_migrations%%'",
                (self.schema,),
            ).fetchall()
        out = [f"column {t}.{c} {d} nullable={n} default={df}" for t, c, d, n, df in cols]
        out += [f"index {name}: {definition}" for name, definition in indexes]
        out += [f"constraint {name}: {definition}" for name, definition in constraints]
        # Compare shapes, not places: drop the schema name from definitions.
        return sorted(line.replace(f"{self.schema}.", "") for line in out)

    def drop_schema(self) -> None:
        """Remove the schema and everything in it (tests and ``conveyor migrate --drop``)."""
        with _translated(), self._pool.connection() as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )

    # -- values ---------------------------------------------------------------------
    def encode_time(self, value: datetime) -> str:
        return value.astimezone(timezone.utc).isoformat()

    def decode_time(self, value: Any) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return _to_milliseconds(value)

    def decode_json(self, value: Any) -> Any:
        return value  # psycopg already parsed jsonb

    # -- change notification ------------------------------------------------------------
    def wait_for_change(self, since: int, timeout: float) -> bool:
        self._ensure_listener()
        return super().wait_for_change(since, timeout)

    def _ensure_listener(self) -> None:
        if self._listener is None or not self._listener.is_alive():
            with self._changes:
                if self._listener is None or not self._listener.is_alive():
                    ready = threading.Event()
                    self._listener = threading.Thread(
                        target=self._listen, args=(ready,), name="conveyor-listen", daemon=True
                    )
                    self._listener.start()
                    ready.wait(5.0)

    def _listen(self, ready: threading.Event) -> None:
        delay = 0.1
        while not self._closing.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    ready.set()
                    # Something may have changed while we were not listening.
                    self._announce()
                    delay = 0.1
                    while not self._closing.is_set():
                        for _ in conn.notifies(timeout=0.5, stop_after=1):
                            self._announce()
            except psycopg.Error as exc:
                ready.set()
                log.warning("listener connection lost (%s); reconnecting", exc)
                self._closing.wait(delay)
                delay = min(delay * 2, 5.0)

    # -- lifecycle ------------------------------------------------------------------
    def ping(self) -> None:
        with _translated(), self._pool.connection() as conn:
            conn.execute("SELECT 1").fetchone()

    def close(self) -> None:
        self._closing.set()
        self._pool.close()
        if self._listener is not None:
            self._listener.join(timeout=2.0)

    def describe(self) -> str:
        params = psycopg.conninfo.conninfo_to_dict(self._conninfo)
        host = params.get("host", "localhost")
        port = params.get("port", 5432)
        where = f"postgresql://{params.get('user', '')}@{host}:{port}/{params.get('dbname', '')}"
        return where if self.schema == "public" else f"{where}?schema={self.schema}"
