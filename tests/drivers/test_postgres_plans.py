"""PostgreSQL's planner, on the statements that find a claim's jobs: they can use the
index of running claims (partial on ``status = 'running'``, migration 0018), whatever
the size of the history. With sequential scans turned off, a plan that still scans the
table says the index cannot serve the statement (its predicate is not implied)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import conveyor
from conveyor.drivers.postgres.dialect import PostgresValues
from tests.conftest import PG_URL, drop_schema, fresh_url, require_postgres


@pytest.fixture
def schema(tmp_path: Path) -> Iterator[str]:
    require_postgres()
    url, name = fresh_url("postgresql", tmp_path)
    conveyor.connect(url, use_env=False).close()
    assert name is not None
    yield name
    drop_schema(name)


def plan(schema: str, name: str, **params: object) -> str:
    sql = PostgresValues(PG_URL, schema)._queries.text(name, params)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        rows = conn.execute("EXPLAIN " + sql, params).fetchall()  # type: ignore[arg-type]
    return " | ".join(row[0] for row in rows)


def test_a_claim_is_acknowledged_and_released_through_the_index_of_running_claims(
    schema: str,
) -> None:
    assert "Index Scan using conveyor_jobs_claim " in plan(schema, "ack_claim", claim_id="c")
    for queues in (None, '["default"]'):
        found = plan(schema, "release_jobs", claim_id="c", queues=queues)
        assert "Index Scan using conveyor_jobs_claim " in found, found


def test_the_index_of_claims_holds_running_jobs_only(schema: str) -> None:
    # A completed job keeps its claim id; the index leaves it out, so a history of
    # millions of jobs does not make each claim write into a tree of millions of ids.
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        (definition,) = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
            (schema, "conveyor_jobs_claim"),
        ).fetchone() or (None,)
    assert definition is not None
    assert definition.endswith("WHERE (status = 'running'::text)"), definition
