"""How long a process holds SQLite's write lock, measured from outside the library.

    python -m benchmarks.lockclock -m conveyor worker --app ... --db sqlite:///... --burst

runs the module after ``-m`` with ``sqlite3.connect`` patched (in this process only) to
build connections whose cursors clock their writes: from ``BEGIN IMMEDIATE`` (or
``BEGIN EXCLUSIVE``) returning to ``COMMIT``/``ROLLBACK`` returning, and, for a lone
writing statement in autocommit mode (its own transaction), from the call until the
statement is done (its last row fetched, when it has ``RETURNING``), which is when SQLite
commits it and lets the lock go. Of that time it also sums what was spent inside
SQLite's own calls (the statements, their rows fetched, the commit): the rest is Python
run while the lock is held. At exit it writes ``<nanoseconds held> <transactions>
<nanoseconds inside SQLite>`` to ``$BENCH_LOG_DIR/<pid>.lock``. The library is not
changed; this is a benchmark-only wrapper, and it adds a little Python per statement to
the process it measures, so the drains that report throughput run without it.
"""

from __future__ import annotations

import atexit
import os
import re
import runpy
import sqlite3
import sys
import threading
import time
from typing import Any

_WRITE = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
_BEGIN = re.compile(r"^\s*BEGIN\s+(IMMEDIATE|EXCLUSIVE)", re.IGNORECASE)
_END = re.compile(r"^\s*(COMMIT|END|ROLLBACK)\b", re.IGNORECASE)
_clock = time.perf_counter_ns
_total = [0, 0, 0]  # nanoseconds held, transactions, nanoseconds inside SQLite's calls
_guard = threading.Lock()


def _add(ns: int, inside: int) -> None:
    with _guard:
        _total[0] += ns
        _total[1] += 1
        _total[2] += inside


class ClockedCursor(sqlite3.Cursor):
    _pending: int = 0  # start of a lone write still being stepped (RETURNING rows)
    _pending_inside: int = 0  # of it, the time inside SQLite's calls so far

    def _settle(self) -> None:
        if self._pending:
            _add(_clock() - self._pending, self._pending_inside)
            self._pending = self._pending_inside = 0

    def _inside(self, ns: int) -> None:
        """Time spent in one of SQLite's calls: part of a transaction's, or of a lone
        write's still being stepped."""
        conn: ClockedConnection = self.connection  # type: ignore[assignment]
        if conn.began:
            conn.inside += ns
        elif self._pending:
            self._pending_inside += ns

    def execute(self, sql: str, parameters: Any = (), /) -> ClockedCursor:  # type: ignore[override]
        self._settle()
        conn: ClockedConnection = self.connection  # type: ignore[assignment]
        if _BEGIN.match(sql):
            super().execute(sql, parameters)
            conn.began, conn.inside = _clock(), 0
            return self
        if _END.match(sql):
            conn.end(lambda: super(ClockedCursor, self).execute(sql, parameters))
            return self
        if conn.in_transaction or not _WRITE.search(sql):
            started = _clock()
            super().execute(sql, parameters)
            self._inside(_clock() - started)
            return self
        started = _clock()
        super().execute(sql, parameters)
        if self.description is None:  # done within execute: committed already
            took = _clock() - started
            _add(took, took)
        else:
            self._pending = started
            self._pending_inside = _clock() - started
        return self

    def executemany(self, sql: str, seq: Any, /) -> ClockedCursor:  # type: ignore[override]
        self._settle()
        conn: ClockedConnection = self.connection  # type: ignore[assignment]
        started = _clock()
        if conn.in_transaction or not _WRITE.search(sql):
            super().executemany(sql, seq)
            self._inside(_clock() - started)
            return self
        super().executemany(sql, seq)
        took = _clock() - started
        _add(took, took)
        return self

    def fetchall(self) -> list[Any]:
        started = _clock()
        rows = super().fetchall()
        self._inside(_clock() - started)
        self._settle()
        return rows

    def fetchone(self) -> Any:
        started = _clock()
        row = super().fetchone()
        self._inside(_clock() - started)
        if row is None:
            self._settle()
        return row

    def close(self) -> None:
        self._settle()
        super().close()


class ClockedConnection(sqlite3.Connection):
    began = 0
    inside = 0  # of the open transaction's time, what SQLite's calls took

    def cursor(self, factory: Any = ClockedCursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:  # type: ignore[override]
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq: Any, /) -> Any:  # type: ignore[override]
        return self.cursor().executemany(sql, seq)

    def commit(self) -> None:
        self.end(super().commit)

    def rollback(self) -> None:
        self.end(super().rollback)

    def end(self, end: Any) -> None:
        """Run ``end`` (a COMMIT or ROLLBACK, by call or by statement) and count the
        transaction it closes, if one was clocked."""
        started = _clock()
        end()
        if self.began:
            ended = _clock()
            _add(ended - self.began, self.inside + ended - started)
            self.began = 0


_connect = sqlite3.connect


def _clocked_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    kwargs.setdefault("factory", ClockedConnection)
    return _connect(*args, **kwargs)


def _write_total() -> None:
    folder = os.environ.get("BENCH_LOG_DIR")
    if folder:
        with open(os.path.join(folder, f"{os.getpid()}.lock"), "w") as out:
            out.write(f"{_total[0]} {_total[1]} {_total[2]}\n")


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        raise SystemExit("usage: python -m benchmarks.lockclock -m MODULE [ARGS...]")
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    sqlite3.connect = _clocked_connect  # type: ignore[assignment]
    atexit.register(_write_total)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
