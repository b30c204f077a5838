"""SQLite binds a bulk insert's jobs as parameters of one statement, and a statement may
hold only so many (999 in builds before SQLite 3.32): a larger batch is split into
statements within the cap, its ids and order kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import conveyor
from conveyor.drivers.sqlite.bulk import COLUMNS


def test_a_bulk_insert_past_the_parameter_cap_is_split_and_keeps_its_order(
    tmp_path: Path,
) -> None:
    q = conveyor.connect(f"sqlite:///{tmp_path / 'q.db'}")
    try:
        conn = q.driver._conn  # type: ignore[attr-defined]
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 10 * COLUMNS + 3)
        ids = q.enqueue_ids([{"task": "t", "payload": n} for n in range(35)])
        jobs = q.enqueue_many([{"task": "t", "payload": n} for n in range(35, 58)])
    finally:
        q.close()
    q = conveyor.connect(f"sqlite:///{tmp_path / 'q.db'}")
    try:
        every = [*ids, *(j.id for j in jobs)]
        assert every == list(range(1, 59))
        assert [q.get(i).payload for i in every] == list(range(58))  # type: ignore[union-attr]
        assert [j.payload for j in jobs] == list(range(35, 58))
        assert q.stats().pending == 58
    finally:
        q.close()
