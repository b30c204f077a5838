"""PostgreSQL's planner, on the statements that find a claim's jobs: they can use the
index of running claims (partial on ``status = 'running'``, migration 0018), whatever
the size of the history. With sequential scans turned off, a plan that still scans the
table says the index cannot serve the statement (its predicate is not implied)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _index_rows(node: dict[str, Any], index: str) -> int:
    """Entries the plan's scans of ``index`` returned, every loop counted."""
    own = node.get("Actual Rows", 0) * node.get("Actual Loops", 1)
    read = own if node.get("Index Name") == index else 0
    return read + sum(_index_rows(child, index) for child in node.get("Plans", []))


def test_a_report_reads_only_its_own_claims_entries_in_the_index_of_running_claims(
    schema: str,
) -> None:
    # A job that ends leaves its entry in the index until the table is vacuumed. A
    # report that scanned the whole index for `status = 'running'` (then joined its
    # items) read every entry left by the jobs finished since: with four workers, over
    # a hundred per job. Looked up by its claims, it reads its own jobs' entries.
    url = f"{PG_URL}?schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".conveyor_jobs SET (autovacuum_enabled = off)')
    with conveyor.connect(url, use_env=False) as q:
        q.enqueue_ids([{"task": "t"} for _ in range(2_200)])
        for _ in range(20):
            done = q.claim("default", limit=100)
            q.complete_many([(job.id, done.id, None) for job in done.jobs])
        held = q.claim("default", limit=100)
    assert len(held.jobs) == 100
    pairs = [{"id": job.id, "claim_id": held.id} for job in held.jobs]
    reports: dict[str, dict[str, object]] = {
        "complete_jobs": {"items": [{**p, "result": None} for p in pairs], "brief": 1},
        "fail_jobs": {
            "items": [
                {
                    **p,
                    "attempts": 1,
                    "again": True,
                    "error": "e",
                    "error_kind": "retryable",
                    "delay_s": 0,
                }
                for p in pairs
            ]
        },
        "snooze_jobs": {"items": [{**p, "delay_s": 0} for p in pairs]},
        "heartbeat_jobs": {"items": pairs, "extend_s": None, "brief": 1},
        "end_leases": {"items": [{**p, "again": True, "error": "e", "cause": "c"} for p in pairs]},
    }
    values = PostgresValues(PG_URL, schema)
    with psycopg.connect(PG_URL) as conn:
        for name, params in reports.items():
            params = {**params, "items": json.dumps(params["items"])}
            sql = values._queries.text(name, params)
            if name == "end_leases":  # their leases ran out
                conn.execute(
                    f'UPDATE "{schema}".conveyor_jobs SET lease_expires_at = now() - '
                    "interval '1 second' WHERE claim_id = %s",
                    (held.id,),
                )
            (explained,) = conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + sql,
                params,  # type: ignore[arg-type]
            ).fetchone() or (None,)
            conn.rollback()
            changed = explained[0]["Plan"]["Actual Rows"]
            read = _index_rows(explained[0]["Plan"], "conveyor_jobs_claim")
            assert changed == 100, (name, changed)
            assert read <= 100, (name, read)
