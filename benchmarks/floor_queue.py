"""The floor queue: the least a durable, multi-process job queue can do per job.

A bare table (id, queue, payload, status, claim id) with one index on the pending rows
(a partial index on SQLite and PostgreSQL; MariaDB has no partial indexes, so there it
is an ordinary index led by ``status``). Each of N worker processes loops:

- one transaction acknowledges its previous batch (``status = 'done'``) and claims the
  next 100 pending rows: SQLite ``UPDATE ... RETURNING`` inside ``BEGIN IMMEDIATE``;
  PostgreSQL ``UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``; MariaDB
  ``SELECT ... FOR UPDATE SKIP LOCKED`` then ``UPDATE``;
- then runs the claimed jobs (each appends a line to its process's log, like every
  system's job: ``benchmarks.drain_apps.log_job``).

Finished rows are kept, as conveyor keeps them. Durability as everywhere: SQLite WAL +
``synchronous=FULL``; PostgreSQL ``fsync``/``synchronous_commit`` on; MariaDB
``innodb_flush_log_at_trx_commit=1``. On SQLite each worker also clocks how long it
holds the write lock (``BEGIN IMMEDIATE`` returning to ``COMMIT`` returning) and writes
the sum to ``$BENCH_LOG_DIR/<pid>.lock``.

    python -m benchmarks.floor_queue sqlite /path/to/floor.db     # one worker process
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Any

BATCH = 100
FILL_CHUNK = 1000
QUEUE = "bench"

SCHEMA = {
    "sqlite": (
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT,"
        " status TEXT NOT NULL DEFAULT 'pending', claim_id TEXT)",
        "CREATE INDEX jobs_pending ON jobs (queue, id) WHERE status = 'pending'",
    ),
    "postgresql": (
        "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " queue text NOT NULL, payload jsonb, status text NOT NULL DEFAULT 'pending',"
        " claim_id text)",
        "CREATE INDEX jobs_pending ON jobs (queue, id) WHERE status = 'pending'",
    ),
    "mariadb": (
        "CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
        " queue VARCHAR(64) NOT NULL, payload JSON, status VARCHAR(16) NOT NULL"
        " DEFAULT 'pending', claim_id CHAR(32)) ENGINE=InnoDB",
        "CREATE INDEX jobs_pending ON jobs (status, queue, id)",
    ),
}


def connect(backend: str, db: str) -> Any:
    """An autocommit connection with the benchmark's durability."""
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(db, timeout=60, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        return conn
    if backend == "postgresql":
        import psycopg

        return psycopg.connect(db, autocommit=True)
    if backend == "mariadb":
        return mariadb_connect(db)
    raise ValueError(f"unknown backend {backend!r}")


def mariadb_connect(url: str, client: str = "pymysql") -> Any:
    """An autocommitted connection from ``mysql://user[:password]@host[:port]/db``, of
    PyMySQL or (``client="mysqlclient"``) of the C client library."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    options: dict[str, Any] = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": parts.path.lstrip("/"),
        "autocommit": True,
    }
    if client == "mysqlclient":
        import MySQLdb

        return MySQLdb.connect(**options)
    import pymysql

    return pymysql.connect(**options)


def create_and_fill(backend: str, db: str, n: int) -> None:
    """The floor's table with ``n`` pending jobs (not measured)."""
    conn = connect(backend, db)
    mark = "?" if backend == "sqlite" else "%s"
    for statement in SCHEMA[backend]:
        conn.execute(statement) if backend != "mariadb" else conn.cursor().execute(statement)
    for start in range(0, n, FILL_CHUNK):
        rows = [(QUEUE, json.dumps({"i": i})) for i in range(start, min(n, start + FILL_CHUNK))]
        values = ", ".join([f"({mark}, {mark})"] * len(rows))
        sql = f"INSERT INTO jobs (queue, payload) VALUES {values}"
        params = [v for r in rows for v in r]
        if backend == "sqlite":
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(sql, params)
            conn.execute("COMMIT")
        elif backend == "postgresql":
            with conn.transaction():
                conn.execute(sql, params)
        else:
            conn.cursor().execute(sql, params)
    conn.close()


def done_count(backend: str, db: str) -> tuple[int, int]:
    """(rows done, rows not done)."""
    conn = connect(backend, db)
    sql = "SELECT sum(status = 'done'), sum(status <> 'done') FROM jobs"
    if backend == "postgresql":
        sql = ("SELECT count(*) FILTER (WHERE status = 'done'),"
               " count(*) FILTER (WHERE status <> 'done') FROM jobs")  # fmt: skip
    cur = conn.cursor()
    cur.execute(sql)
    done, other = cur.fetchone()
    conn.close()
    return int(done or 0), int(other or 0)


def work(backend: str, db: str) -> None:
    """One worker process: claim 100 and acknowledge the previous batch in one
    transaction, run the jobs, until nothing is pending."""
    from benchmarks.drain_apps import log_job

    conn = connect(backend, db)
    previous: list[int] = []
    held_ns = 0
    transactions = 0
    clock = time.perf_counter_ns
    while True:
        claim_id = uuid.uuid4().hex
        if backend == "sqlite":
            conn.execute("BEGIN IMMEDIATE")
            began = clock()
            if previous:
                marks = ",".join("?" * len(previous))
                conn.execute(f"UPDATE jobs SET status = 'done' WHERE id IN ({marks})", previous)
            rows = conn.execute(
                "UPDATE jobs SET status = 'running', claim_id = ? WHERE id IN ("
                "SELECT id FROM jobs WHERE queue = ? AND status = 'pending'"
                " ORDER BY id LIMIT ?) RETURNING id, payload",
                (claim_id, QUEUE, BATCH),
            ).fetchall()
            conn.execute("COMMIT")
            held_ns += clock() - began
            transactions += 1
        elif backend == "postgresql":
            with conn.transaction():
                if previous:
                    conn.execute("UPDATE jobs SET status = 'done' WHERE id = ANY(%s)", (previous,))
                rows = conn.execute(
                    "UPDATE jobs AS j SET status = 'running', claim_id = %s FROM ("
                    "SELECT id FROM jobs WHERE queue = %s AND status = 'pending'"
                    " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) AS picked"
                    " WHERE j.id = picked.id RETURNING j.id, j.payload",
                    (claim_id, QUEUE, BATCH),
                ).fetchall()
        else:
            rows = _mariadb_batch(conn, previous, claim_id)
        if not rows:
            break
        for _id, payload in rows:
            log_job((payload if isinstance(payload, dict) else json.loads(payload))["i"])
        previous = [r[0] for r in rows]
    conn.close()
    if backend == "sqlite":
        path = os.path.join(os.environ["BENCH_LOG_DIR"], f"{os.getpid()}.lock")
        with open(path, "w") as out:
            out.write(f"{held_ns} {transactions}\n")


def _mariadb_batch(conn: Any, previous: list[int], claim_id: str) -> list[Any]:
    """One MariaDB transaction of the loop, run again when the server rolls it back to
    break a deadlock (1213) or a lock wait (1205), as any MySQL application must: the
    SKIP LOCKED claim of one process and the acknowledgement of another lock the same
    status index in different orders."""
    import pymysql

    while True:
        cur = conn.cursor()
        try:
            conn.begin()
            if previous:
                marks = ",".join(["%s"] * len(previous))
                cur.execute(f"UPDATE jobs SET status = 'done' WHERE id IN ({marks})", previous)
            cur.execute(
                "SELECT id, payload FROM jobs WHERE status = 'pending' AND queue = %s"
                " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                (QUEUE, BATCH),
            )
            rows = list(cur.fetchall())
            if rows:
                cur.execute(
                    f"UPDATE jobs SET status = 'running', claim_id = %s"
                    f" WHERE id IN ({','.join(['%s'] * len(rows))})",
                    [claim_id, *(r[0] for r in rows)],
                )
            conn.commit()
            return rows
        except pymysql.err.OperationalError as exc:
            conn.rollback()
            if exc.args[0] not in (1205, 1213):
                raise


if __name__ == "__main__":
    work(sys.argv[1], sys.argv[2])
