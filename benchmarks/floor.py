"""The plain-SQL floor: the reference limit of each database.

A plain loop with no library around it, at the same durability: enqueue one is one
INSERT in its own transaction; bulk is one multi-row INSERT of 1,000 rows per transaction;
drain claims 100 jobs in one transaction (an UPDATE ... RETURNING), then completes them in
a second one, as any durable queue must (the claim has to be on disk before the job runs).
MariaDB has no ``UPDATE ... RETURNING``: its claim selects the batch ``FOR UPDATE SKIP
LOCKED`` and updates it in the same transaction, as conveyor's MySQL driver does, under
the same READ COMMITTED isolation.

``table="bare"`` uses a minimal jobs table (id, queue, payload, status, claim id, result)
with one partial index on the pending rows: what the database itself can do.
``table="conveyor"`` runs the same plain loop on conveyor's own table and indexes, so the
gap between the two floors is the cost of the schema, and the gap between that floor
and conveyor is the cost of the library.
On SQLite since migration 0018 the claims and completions of that loop fire no count
trigger (conveyor's own statements write those counts), so the library's side of the
gap holds the counting there.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import conveyor
from benchmarks.harness import Timed, server_database, sqlite_connect, sqlite_dir, time_calls
from conveyor.cli.bench import VerificationFailed, verify_once

BATCH = 100
BULK_CHUNK = 1000

_SQLITE_BARE = (
    "CREATE TABLE jobs (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT,"
    " status TEXT NOT NULL DEFAULT 'pending', claim_id TEXT, result TEXT)",
    "CREATE INDEX jobs_pending ON jobs (queue, id) WHERE status = 'pending'",
)
_PG_BARE = (
    "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " queue text NOT NULL, payload jsonb, status text NOT NULL DEFAULT 'pending',"
    " claim_id text, result jsonb)",
    "CREATE INDEX jobs_pending ON jobs (queue, id) WHERE status = 'pending'",
)

# MariaDB has no partial indexes: the pending rows' index is led by status instead.
_MARIADB_BARE = (
    "CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(64) NOT NULL,"
    " payload JSON, status VARCHAR(16) NOT NULL DEFAULT 'pending', claim_id CHAR(32),"
    " result JSON) ENGINE=InnoDB",
    "CREATE INDEX jobs_pending ON jobs (status, queue, id)",
)

# The SQLite clock in epoch seconds, as conveyor's own statements write it.
_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

# Per dialect and table: insert one row, claim a batch, complete a batch.
_SQL: dict[tuple[str, str], dict[str, str]] = {
    ("sqlite", "bare"): {
        "insert": "INSERT INTO jobs (queue, payload) VALUES (?, ?)",
        "claim": "UPDATE jobs SET status = 'running', claim_id = ? WHERE id IN ("
        "SELECT id FROM jobs WHERE queue = 'default' AND status = 'pending'"
        " ORDER BY id LIMIT ?) RETURNING id, payload",
        "complete": "UPDATE jobs SET status = 'completed', result = NULL"
        " WHERE id = ? AND claim_id = ? AND status = 'running'",
    },
    ("sqlite", "conveyor"): {
        "insert": "INSERT INTO conveyor_jobs (queue, task, payload, run_at, max_attempts,"
        " created_at, updated_at) VALUES (?, 'bench.noop', ?, {now}, 3,"
        " {now}, {now})",
        "claim": "UPDATE conveyor_jobs SET status = 'running', claim_id = ?,"
        " attempts = attempts + 1, claimed_at = {now},"
        " lease_expires_at = {now} + 300 WHERE id IN ("
        "SELECT id FROM conveyor_jobs WHERE queue = 'default' AND status = 'pending'"
        " ORDER BY priority, id LIMIT ?) RETURNING id, payload",
        "complete": "UPDATE conveyor_jobs SET status = 'completed', result = NULL,"
        " finished_at = {now}, lease_expires_at = NULL"
        " WHERE id = ? AND claim_id = ? AND status = 'running'",
    },
    ("postgresql", "bare"): {
        "insert": "INSERT INTO jobs (queue, payload) VALUES (%s, %s)",
        "claim": "UPDATE jobs AS j SET status = 'running', claim_id = %s FROM ("
        "SELECT id FROM jobs WHERE queue = 'default' AND status = 'pending'"
        " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) AS picked"
        " WHERE j.id = picked.id RETURNING j.id, j.payload",
        "complete": "UPDATE jobs SET status = 'completed', result = NULL"
        " WHERE id = ANY(%s) AND claim_id = %s AND status = 'running'",
    },
    ("postgresql", "conveyor"): {
        "insert": "INSERT INTO conveyor_jobs (queue, task, payload, run_at, max_attempts,"
        " created_at, updated_at) VALUES (%s, 'bench.noop', %s, now(), 3, now(), now())",
        "claim": "UPDATE conveyor_jobs AS j SET status = 'running', claim_id = %s,"
        " attempts = j.attempts + 1, claimed_at = now(),"
        " lease_expires_at = now() + interval '300 seconds' FROM ("
        "SELECT id FROM conveyor_jobs WHERE queue = 'default' AND status = 'pending'"
        " ORDER BY priority, id LIMIT %s FOR UPDATE SKIP LOCKED) AS picked"
        " WHERE j.id = picked.id RETURNING j.id, j.payload",
        "complete": "UPDATE conveyor_jobs SET status = 'completed', result = NULL,"
        " finished_at = now(), lease_expires_at = NULL"
        " WHERE id = ANY(%s) AND claim_id = %s AND status = 'running'",
    },
    ("mariadb", "bare"): {
        "insert": "INSERT INTO jobs (queue, payload) VALUES (%s, %s)",
        "claim": "SELECT id, payload FROM jobs WHERE status = 'pending' AND queue = 'default'"
        " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
        "take": "UPDATE jobs SET status = 'running', claim_id = %s WHERE id IN ({ids})",
        "complete": "UPDATE jobs SET status = 'completed', result = NULL"
        " WHERE id IN ({ids}) AND claim_id = %s AND status = 'running'",
    },
    ("mariadb", "conveyor"): {
        "insert": "INSERT INTO conveyor_jobs (queue, task, payload, run_at, max_attempts,"
        " created_at, updated_at) VALUES (%s, 'bench.noop', %s, UTC_TIMESTAMP(6), 3,"
        " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
        "claim": "SELECT id, payload FROM conveyor_jobs FORCE INDEX (conveyor_jobs_claimable)"
        " WHERE queue = 'default' AND status = 'pending' AND waiting_for = 0"
        " AND run_at <= UTC_TIMESTAMP(6) ORDER BY priority, id LIMIT %s FOR UPDATE SKIP LOCKED",
        "take": "UPDATE conveyor_jobs FORCE INDEX (PRIMARY) SET status = 'running',"
        " claim_id = %s, attempts = attempts + 1, claimed_at = UTC_TIMESTAMP(6),"
        " lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL 300 SECOND WHERE id IN ({ids})",
        "complete": "UPDATE conveyor_jobs FORCE INDEX (PRIMARY) SET status = 'completed',"
        " result = NULL, finished_at = UTC_TIMESTAMP(6), lease_expires_at = NULL"
        " WHERE id IN ({ids}) AND claim_id = %s AND status = 'running'",
    },
}


def multi_row(insert: str, rows: int) -> str:
    """The one-row INSERT as one statement of ``rows`` rows (a multi-row VALUES list)."""
    head, row = insert.split(" VALUES ")
    return f"{head} VALUES {', '.join([row] * rows)}"


class SQLiteFloor:
    backend = "sqlite"

    def __init__(self, workdir: Path, table: str = "bare") -> None:
        self.workdir = workdir
        self.table = table
        self.name = "floor" if table == "bare" else "floor (conveyor table)"
        self.sql = {k: v.replace("{now}", _NOW) for k, v in _SQL[("sqlite", table)].items()}

    def _open(self, folder: Path) -> Any:
        if self.table == "conveyor":
            conveyor.connect(f"sqlite:///{folder / 'floor.db'}").close()  # migrate only
            return sqlite_connect(folder / "floor.db")
        conn = sqlite_connect(folder / "floor.db")
        for statement in _SQLITE_BARE:
            conn.execute(statement)
        return conn

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        with sqlite_dir(str(self.workdir)) as folder:
            conn = self._open(folder)
            sql = self.sql["insert"]
            lat: Timed = time_calls(
                lambda i: conn.execute(sql, ("default", json.dumps({"i": i}))), n, warmup
            )
            conn.close()
        return lat

    def _fill(self, conn: Any, n: int) -> float:
        started = time.perf_counter()
        for start in range(0, n, BULK_CHUNK):
            rows = [("default", json.dumps({"i": i}))
                    for i in range(start, min(n, start + BULK_CHUNK))]  # fmt: skip
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(multi_row(self.sql["insert"], len(rows)), [v for r in rows for v in r])
            conn.execute("COMMIT")
        return time.perf_counter() - started

    def bulk(self, n: int) -> float:
        with sqlite_dir(str(self.workdir)) as folder:
            conn = self._open(folder)
            took = self._fill(conn, n)
            conn.close()
        return took

    def drain(self, n: int) -> float:
        with sqlite_dir(str(self.workdir)) as folder:
            conn = self._open(folder)
            self._fill(conn, n)
            seen: list[int] = []
            completed = 0
            started = time.perf_counter()
            while True:
                claim_id = uuid.uuid4().hex
                conn.execute("BEGIN IMMEDIATE")
                rows = conn.execute(self.sql["claim"], (claim_id, BATCH)).fetchall()
                conn.execute("COMMIT")
                if not rows:
                    break
                conn.execute("BEGIN IMMEDIATE")
                cur = conn.executemany(self.sql["complete"], [(r[0], claim_id) for r in rows])
                completed += cur.rowcount
                conn.execute("COMMIT")
                seen.extend(json.loads(r[1])["i"] for r in rows)
            took = time.perf_counter() - started
            conn.close()
        verify_once(seen, n, completed, what=f"{self.name} drain")
        return took


class _ServerFloor:
    """The floor on a database server: a new database for each measurement, one
    connection in autocommit mode; a dialect says how it inserts, loads and claims."""

    backend: str

    def __init__(self, url: str, table: str = "bare") -> None:
        self.url = url
        self.table = table
        self.name = "floor" if table == "bare" else "floor (conveyor table)"
        self.sql = _SQL[(self.backend, table)]

    def _open(self, url: str) -> Any:
        raise NotImplementedError

    def _run(self, conn: Any, sql: str, params: tuple[Any, ...]) -> None:
        """One statement, committed on its own (the connection is in autocommit)."""
        raise NotImplementedError

    def _insert_many(self, conn: Any, sql: str, params: list[Any]) -> None:
        """``sql`` with ``params`` as one transaction of its own."""
        raise NotImplementedError

    def _batch(self, conn: Any) -> tuple[list[Any], int]:
        """Claim up to ``BATCH`` jobs, then complete them, each in a transaction: the
        claimed rows (id, payload) and how many the completion changed."""
        raise NotImplementedError

    def enqueue_one(self, n: int, warmup: int = 0) -> Timed:
        sql = self.sql["insert"]
        with server_database(self.backend, self.url) as url:
            conn = self._open(url)
            lat: Timed = time_calls(
                lambda i: self._run(conn, sql, ("default", json.dumps({"i": i}))), n, warmup
            )
            conn.close()
        return lat

    def _fill(self, conn: Any, n: int) -> float:
        started = time.perf_counter()
        for start in range(0, n, BULK_CHUNK):
            rows = [("default", json.dumps({"i": i}))
                    for i in range(start, min(n, start + BULK_CHUNK))]  # fmt: skip
            self._insert_many(conn, multi_row(self.sql["insert"], len(rows)),
                              [v for r in rows for v in r])  # fmt: skip
        return time.perf_counter() - started

    def bulk(self, n: int) -> float:
        with server_database(self.backend, self.url) as url:
            conn = self._open(url)
            took = self._fill(conn, n)
            conn.close()
        return took

    def drain(self, n: int) -> float:
        with server_database(self.backend, self.url) as url:
            conn = self._open(url)
            self._fill(conn, n)
            seen: list[int] = []
            completed = 0
            started = time.perf_counter()
            while True:
                rows, done = self._batch(conn)
                if not rows:
                    break
                completed += done
                seen.extend(_number(r[1]) for r in rows)
            took = time.perf_counter() - started
            conn.close()
        if completed != n:
            raise VerificationFailed(f"{self.name} drain: {completed} of {n} completed")
        verify_once(seen, n, completed, what=f"{self.name} drain")
        return took


def _number(payload: Any) -> int:
    """The job's number from its payload: jsonb arrives parsed, MariaDB's JSON as text."""
    value: int = (json.loads(payload) if isinstance(payload, str | bytes) else payload)["i"]
    return value


class PostgresFloor(_ServerFloor):
    backend = "postgresql"

    def _open(self, url: str) -> Any:
        import psycopg

        if self.table == "conveyor":
            conveyor.connect(url).close()  # migrate only
        conn = psycopg.connect(url, autocommit=True)
        if self.table == "bare":
            for statement in _PG_BARE:
                conn.execute(statement)
        return conn

    def _run(self, conn: Any, sql: str, params: tuple[Any, ...]) -> None:
        conn.execute(sql, params)

    def _insert_many(self, conn: Any, sql: str, params: list[Any]) -> None:
        with conn.transaction():
            conn.execute(sql, params)

    def _batch(self, conn: Any) -> tuple[list[Any], int]:
        claim_id = uuid.uuid4().hex
        with conn.transaction():
            rows = conn.execute(self.sql["claim"], (claim_id, BATCH)).fetchall()
        if not rows:
            return [], 0
        with conn.transaction():
            cur = conn.execute(self.sql["complete"], ([r[0] for r in rows], claim_id))
        return rows, cur.rowcount


class MariaDBFloor(_ServerFloor):
    backend = "mariadb"

    def _open(self, url: str) -> Any:
        from benchmarks.floor_queue import mariadb_connect

        if self.table == "conveyor":
            conveyor.connect(url).close()  # migrate only
        conn = mariadb_connect(url)
        cur = conn.cursor()
        # As conveyor's own connections: no gap locks between concurrent claimers.
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        if self.table == "bare":
            for statement in _MARIADB_BARE:
                cur.execute(statement)
        return conn

    def _run(self, conn: Any, sql: str, params: tuple[Any, ...]) -> None:
        conn.cursor().execute(sql, params)

    def _insert_many(self, conn: Any, sql: str, params: list[Any]) -> None:
        conn.begin()
        conn.cursor().execute(sql, params)
        conn.commit()

    def _batch(self, conn: Any) -> tuple[list[Any], int]:
        # No UPDATE … RETURNING: the batch is locked, then taken, in one transaction.
        claim_id = uuid.uuid4().hex
        cur = conn.cursor()
        conn.begin()
        cur.execute(self.sql["claim"], (BATCH,))
        rows = list(cur.fetchall())
        ids = ", ".join(str(int(r[0])) for r in rows)
        if rows:
            cur.execute(self.sql["take"].format(ids=ids), (claim_id,))
        conn.commit()
        if not rows:
            return [], 0
        conn.begin()
        done = cur.execute(self.sql["complete"].format(ids=ids), (claim_id,))
        conn.commit()
        return rows, int(done)
