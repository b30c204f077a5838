"""MySQL's and MariaDB's optimizer, on the statements that find a claim's jobs: they read
the index of running claims (a generated column that is NULL outside running jobs,
migration 0016), whatever the size of the history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import conveyor
from tests.conftest import drop_schema, fresh_url, mysql_connection


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[tuple[conveyor.Queue, str]]:
    url, database = fresh_url("mysql", tmp_path)
    assert database is not None
    q = conveyor.connect(url, use_env=False)
    # A few running jobs beside finished ones, so the plan is not one of an empty table.
    q.enqueue_ids([{"task": "t.x"} for _ in range(40)])
    done = q.claim("default", limit=30)
    q.ack(done.id)
    q.claim("default", limit=5)
    yield q, database
    q.close()
    drop_schema(database)


def keys(q: conveyor.Queue, database: str, name: str, **params: Any) -> list[str | None]:
    sql = q.driver._queries.text(name, params)  # type: ignore[attr-defined]
    with mysql_connection(database) as conn, conn.cursor() as cur:
        cur.execute("EXPLAIN " + sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True))["key"] for row in cur.fetchall()]


def test_a_claim_is_acknowledged_and_released_through_the_index_of_running_claims(
    queue: tuple[conveyor.Queue, str],
) -> None:
    q, database = queue
    # Read through that index first: on so small a table MariaDB at times intersects it
    # with the status index (an index merge, keys "conveyor_jobs_claim,conveyor_jobs_…").
    found = keys(q, database, "ack_claim_lock", claim_id="c")
    assert len(found) == 1 and _first(found[0]) == "conveyor_jobs_claim", found
    for queues in (None, '["default"]'):
        found = keys(q, database, "release_jobs_lock", claim_id="c", queues=queues)
        assert _first(found[0]) == "conveyor_jobs_claim", found


def _first(key: str | None) -> str | None:
    """The first index of a plan's key (an index merge names several)."""
    return None if key is None else key.replace("|", ",").split(",")[0]


def test_the_index_of_claims_holds_running_jobs_only(queue: tuple[conveyor.Queue, str]) -> None:
    _, database = queue
    with mysql_connection(database) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s"
            " AND TABLE_NAME = 'conveyor_jobs' AND INDEX_NAME = 'conveyor_jobs_claim'",
            (database,),
        )
        assert [row[0] for row in cur.fetchall()] == ["running_claim"]
        # NULL outside running jobs: the 30 acknowledged jobs keep their claim id, not
        # their place in the index.
        cur.execute("SELECT status, count(*) FROM conveyor_jobs"
                    " WHERE running_claim IS NOT NULL GROUP BY status")  # fmt: skip
        assert cur.fetchall() == (("running", 5),)


def test_the_pending_summary_reads_a_range_of_each_index_whatever_the_history(
    queue: tuple[conveyor.Queue, str],
) -> None:
    # With the queue as a subquery's outer reference, the optimizer read the index of
    # jobs not yet due by the queue alone: an entry per finished job of that queue (15 s
    # a stats() call at a million and a half finished jobs). Named as a constant, each
    # index is read by a range (or a lookup) within that queue.
    q, database = queue
    sql = q.driver._queries.text("pending_summary_of", {"queue": "default"})  # type: ignore[attr-defined]
    with mysql_connection(database) as conn, conn.cursor() as cur:
        cur.execute("EXPLAIN " + sql, {"queue": "default"})
        names = [d[0] for d in cur.description]
        plans = {
            row["key"]: row["type"]
            for row in (dict(zip(names, r, strict=True)) for r in cur.fetchall())
            if row["key"]
        }
    assert plans.get("conveyor_jobs_due") == "range", plans
    assert plans.get("conveyor_jobs_status") in ("ref", "range"), plans
