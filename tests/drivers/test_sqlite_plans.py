"""SQLite's planner, on the claim a worker makes: it walks the claimable index in claim
order and stops at the limit; it never visits every pending job to sort them (which
made each claim cost as much as the backlog). Plans are read with EXPLAIN QUERY PLAN,
on a fresh database as a user's is (no statistics gathered)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import conveyor
from conveyor.drivers.sqlite import driver as sqlite_driver


def plan(path: Path, name: str, **params: object) -> str:
    statements = sqlite_driver.load_queries(sqlite_driver._PACKAGE, sqlite_driver._MACROS)
    sql = statements.text(name, params)
    given = {k: params.get(k) for k in re.findall(r":(\w+)", sql)}
    with sqlite3.connect(path) as conn:
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, given).fetchall()
    return " | ".join(row[3] for row in rows)


def test_the_worker_claim_walks_the_claimable_index_without_sorting(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = conveyor.connect(f"sqlite:///{path}", use_env=False)
    q.enqueue_ids([{"task": "t.x"} for _ in range(50)])
    q.close()
    found = plan(
        path, "claim_jobs", claim_id="c", worker="w", lease_s=30.0, queue="default", limit=10
    )
    assert "USING INDEX conveyor_jobs_claimable" in found
    assert "TEMP B-TREE" not in found


def test_a_claim_is_acknowledged_and_released_through_the_index_of_running_claims(
    tmp_path: Path,
) -> None:
    # The index holds running jobs only (migration 0019): a statement can use it only if
    # its guard is written as the index's predicate. A plan that scans the table instead
    # would make each acknowledgement cost as much as the history of finished jobs.
    path = tmp_path / "q.db"
    conveyor.connect(f"sqlite:///{path}", use_env=False).close()
    assert "USING INDEX conveyor_jobs_claim " in plan(path, "ack_claim", claim_id="c")
    for queues in (None, '["default"]'):
        found = plan(path, "release_jobs", claim_id="c", queues=queues)
        assert "USING INDEX conveyor_jobs_claim " in found, found
