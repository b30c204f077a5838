"""One JSON codec for jobs, claims and counts, derived from their dataclasses; the job's
fields are listed in ``conveyor.job`` and nowhere else in the code."""

from __future__ import annotations

import ast
import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from conveyor.codec import CodecError, from_json, json_fields, to_json
from conveyor.job import AttemptError, Claim, ErrorKind, Job, Progress, Stats, Status
from conveyor.web.models import ClaimOut, JobOut, StatsOut

SRC = Path(__file__).resolve().parents[2] / "src/conveyor"
T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def _every_field_set() -> Job:
    """A job whose every field differs from its default."""
    return Job(
        id=7, queue="q", task="t", payload={"a": [1, 2]}, key="k", status=Status.FAILED,
        priority=-3, run_at=T0, attempts=2, max_attempts=5, claim_id="c",
        claimed_at=T0 + timedelta(seconds=1), lease_expires_at=T0 + timedelta(seconds=2),
        heartbeat_at=T0 + timedelta(seconds=3), worker="w",
        progress=Progress(total=9, completed=4, failed=1, current="x", checkpoint=3,
                          detail={"d": 1}),
        result=[1], error="boom", error_kind=ErrorKind.TERMINAL,
        created_at=T0 - timedelta(seconds=9), started_at=T0 + timedelta(seconds=4),
        finished_at=T0 + timedelta(seconds=5), updated_at=T0 + timedelta(seconds=6),
        group="g", depends_on=(1, 2), waiting_for=1,
        errors=(AttemptError(attempt=1, error="e1", kind=ErrorKind.RETRYABLE, at=T0,
                             worker="w"),),
        deduplicated=True,
    )  # fmt: skip


def test_a_job_survives_its_json_form_with_every_field() -> None:
    job = _every_field_set()
    data = to_json(job)
    assert set(data) == {f.name for f in dataclasses.fields(Job)}
    assert data["run_at"] == T0.isoformat() and data["status"] == "failed"
    assert data["errors"][0]["kind"] == "retryable" and data["depends_on"] == [1, 2]
    back = from_json(Job, data)
    assert back == job and back.deduplicated
    assert job.to_dict() == data


def test_claims_and_stats_have_one_json_form() -> None:
    claim = Claim(id="secret", queue="q", jobs=[_every_field_set()], remaining=3, acked=1)
    data = to_json(claim)
    assert data["claim_id"] == "secret" and "id" not in data  # the wire name
    assert from_json(Claim, data) == claim
    stats = Stats(pending=1, running=2, failed=3, oldest_pending_at=T0, scheduled=1)
    assert stats.total == 6 and to_json(stats)["total"] == 6
    assert from_json(Stats, to_json(stats)) == stats


def test_the_http_schema_is_the_json_form() -> None:
    # The server's response models are derived from the dataclasses: what it validates
    # and documents is what the codec writes and the clients read, plus what only the
    # wire carries (a claim's fingerprint, whether an answer was cut at its budget).
    assert StatsOut is Stats
    wire_only = {JobOut: {"claim_ref"}, ClaimOut: {"truncated"}, StatsOut: set()}
    for model, cls in ((JobOut, Job), (ClaimOut, Claim), (StatsOut, Stats)):
        schema = TypeAdapter(model).json_schema()
        expected = {f.name for f in json_fields(cls)} | wire_only[model]
        assert set(schema["properties"]) == expected, cls
    value = Claim(id="c", queue="q", jobs=[_every_field_set()])
    dumped = TypeAdapter(Claim).dump_python(value, mode="json", by_alias=True)
    assert set(dumped) == set(to_json(value)) and from_json(Claim, dumped) == value


def test_a_reader_tolerates_what_a_server_leaves_out_but_not_a_bad_document() -> None:
    data = to_json(_every_field_set())
    for hidden in ("claim_id", "payload", "result", "errors"):
        del data[hidden]
    data["a_field_from_a_newer_server"] = 1
    job = from_json(Job, data)
    assert job.claim_id is None and job.payload is None and job.errors == ()
    with pytest.raises(CodecError, match="'queue' is missing"):
        from_json(Job, {k: v for k, v in data.items() if k != "queue"})
    with pytest.raises(CodecError, match="ISO 8601"):
        from_json(Job, {**data, "run_at": 12})
    with pytest.raises(CodecError, match="unknown value"):
        from_json(Job, {**data, "status": "lost"})
    with pytest.raises(CodecError, match="JSON object"):
        from_json(Stats, [1])


def _names_of_job_fields(source: str) -> set[str]:
    """The job's field names a module spells out: keyword arguments and string keys."""
    fields = {f.name for f in dataclasses.fields(Job)}
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg in fields:
            found.add(node.arg)
        elif isinstance(node, ast.Constant) and node.value in fields:
            found.add(node.value)
    return found


def test_the_job_fields_are_listed_once() -> None:
    # A listing of the fields (a decoder, a schema, a constructor call) names nearly all
    # of them; modules that merely use some jobs stay well below three quarters.
    total = len(dataclasses.fields(Job))
    listings = {
        str(path.relative_to(SRC)): len(names)
        for path in SRC.rglob("*.py")
        if path.name != "job.py"
        and len(names := _names_of_job_fields(path.read_text(encoding="utf-8"))) > 0.75 * total
    }
    assert listings == {}, f"modules that list the job's fields again: {listings}"
    # The check sees a listing when there is one: a decoder spelling out each field.
    decoder = "Job(" + ", ".join(f"{f.name}=row[{f.name!r}]" for f in dataclasses.fields(Job))
    assert len(_names_of_job_fields(decoder + ")")) == total
