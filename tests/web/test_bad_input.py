"""A catalogue of hostile and broken requests. Each must get a 4xx JSON error, never a
500, and leave the database exactly as it was."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.testclient import TestClient

import conveyor
from tests.web.conftest import snapshot

JSON = {"Content-Type": "application/json"}
SQL = "'; DROP TABLE conveyor_jobs; --"


def _cases(job_id: int, claim_id: str) -> list[tuple[str, str, str, Any, int]]:
    """(name, method, url, body, expected status). A ``bytes`` body is sent as is. Job
    ids route only as digits, so other text in their place names no route (404)."""
    job = f"/api/jobs/{job_id}"
    big = json.dumps({"task": "t", "payload": "x" * (2 * 1024 * 1024)}).encode()
    return [
        # oversize and malformed bodies
        ("oversize body", "POST", "/api/jobs", big, 413),
        ("truncated JSON", "POST", "/api/jobs", b'{"task": "t"', 400),
        ("trailing comma", "POST", "/api/jobs", b'{"task": "t",}', 400),
        ("trailing garbage", "POST", "/api/jobs", b'{"task": "t"} x', 400),
        ("invalid UTF-8", "POST", "/api/jobs", b'{"task": "\xff\xfe"}', 400),
        ("raw NUL in a JSON string", "POST", "/api/jobs", b'{"task": "a\x00b"}', 400),
        ("empty body", "POST", "/api/jobs", b"", 422),
        ("array instead of object", "POST", "/api/jobs", b"[1, 2]", 422),
        ("a bare string", "POST", "/api/jobs", b'"task"', 422),
        ("null body", "POST", "/api/jobs", b"null", 422),
        ("unknown field", "POST", "/api/jobs", {"task": "t", "prio": 1}, 422),
        ("missing task", "POST", "/api/jobs", {"payload": 1}, 422),
        # nesting
        ("10,000-deep arrays", "POST", "/api/jobs", b"[" * 10_000 + b"]" * 10_000, 422),
        ("10,000-deep objects", "POST", "/api/jobs", b'{"a":' * 10_000 + b"1" + b"}" * 10_000, 422),
        ("deep payload", "POST", "/api/jobs",
         b'{"task": "t", "payload": ' + b"[" * 70 + b"]" * 70 + b"}", 422),
        # numbers JSON cannot hold
        ("NaN payload", "POST", "/api/jobs", b'{"task": "t", "payload": NaN}', 422),
        ("Infinity delay", "POST", f"{job}/fail",
         b'{"claim_id": "%s", "error": "e", "delay_seconds": Infinity}' % claim_id.encode(), 422),
        ("NaN lease", "POST", "/api/queues/default/claim", b'{"lease_seconds": NaN}', 422),
        ("1e999 payload", "POST", "/api/jobs", b'{"task": "t", "payload": 1e999}', 422),
        ("huge priority", "POST", "/api/jobs", {"task": "t", "priority": 10**30}, 422),
        ("huge max_attempts", "POST", "/api/jobs", {"task": "t", "max_attempts": 2**63}, 422),
        ("5000-digit integer", "POST", "/api/jobs",
         b'{"task": "t", "payload": ' + b"9" * 5000 + b"}", 400),
        ("huge claim limit", "POST", "/api/queues/default/claim", {"limit": 10**20}, 422),
        ("huge job id", "GET", "/api/jobs/" + "9" * 30, None, 422),
        ("negative job id", "POST", "/api/jobs/-1/cancel", None, 404),
        ("zero job id", "POST", "/api/jobs/0/retry", None, 422),
        ("huge progress total", "POST", f"{job}/progress",
         {"claim_id": claim_id, "total": 2**40}, 422),
        ("negative progress", "POST", f"{job}/progress",
         {"claim_id": claim_id, "completed": -1}, 422),
        # wrong types
        ("task is a number", "POST", "/api/jobs", {"task": 5}, 422),
        ("priority is a string", "POST", "/api/jobs", {"task": "t", "priority": "5"}, 422),
        ("priority is a float", "POST", "/api/jobs", {"task": "t", "priority": 1.5}, 422),
        ("key is a list", "POST", "/api/jobs", {"task": "t", "key": ["k"]}, 422),
        ("limit is true", "POST", "/api/queues/default/claim", {"limit": True}, 422),
        ("retryable is a string", "POST", f"{job}/fail",
         {"claim_id": claim_id, "error": "e", "retryable": "yes"}, 422),
        ("claim_id is a number", "POST", f"{job}/complete", {"claim_id": 12}, 422),
        ("error is null", "POST", f"{job}/fail", {"claim_id": claim_id, "error": None}, 422),
        ("statuses is a string", "POST", "/api/prune",
         {"older_than_seconds": 0, "statuses": "completed"}, 422),
        ("active status pruned", "POST", "/api/prune",
         {"older_than_seconds": 0, "statuses": ["running"]}, 422),
        ("jobs is an object", "POST", "/api/jobs/batch", {"jobs": {"task": "t"}}, 422),
        ("naive run_at", "POST", "/api/jobs", {"task": "t", "run_at": "2030-01-01T00:00:00"}, 422),
        ("run_at is not a date", "POST", "/api/jobs", {"task": "t", "run_at": "tomorrow"}, 422),
        ("on_active unknown", "POST", "/api/jobs", {"task": "t", "on_active": "merge"}, 422),
        ("negative cache ttl", "POST", "/api/jobs",
         {"task": "t", "key": "k", "cache_ttl_seconds": -1}, 422),
        ("job id is a word", "GET", "/api/jobs/abc/wait", None, 404),
        ("limit is a word", "GET", "/api/jobs?limit=lots", None, 422),
        ("wait timeout negative", "GET", f"{job}/wait?timeout=-1", None, 422),
        ("wait timeout nan", "GET", f"{job}/wait?timeout=nan", None, 422),
        # unknown claim ids and jobs
        ("complete with an unknown claim", "POST", f"{job}/complete", {"claim_id": "nope"}, 409),
        ("fail with an unknown claim", "POST", f"{job}/fail",
         {"claim_id": "nope", "error": "e"}, 409),
        ("heartbeat with an unknown claim", "POST", f"{job}/heartbeat", {"claim_id": "nope"}, 409),
        ("progress with an unknown claim", "POST", f"{job}/progress",
         {"claim_id": "nope", "total": 1}, 409),
        ("complete an unknown job", "POST", "/api/jobs/999999/complete",
         {"claim_id": claim_id}, 404),
        ("empty claim id", "POST", f"{job}/complete", {"claim_id": ""}, 422),
        # SQL-looking text where it does not belong
        ("SQL in a job id", "GET", "/api/jobs/1%20OR%201=1", None, 404),
        ("SQL in a status filter", "GET", "/api/jobs?status=pending'%20OR%20'1'='1", None, 422),
        ("SQL in a limit", "GET", "/api/jobs?limit=1;DROP%20TABLE%20conveyor_jobs", None, 422),
        ("SQL in reset age", "POST", "/api/claims/reset?older_than_minutes=0%20OR%201=1",
         None, 422),
        ("SQL as a claim id", "POST", f"{job}/complete", {"claim_id": SQL}, 409),
        ("SQL as a job id in a batch", "POST", "/api/batch/complete",
         {"items": [{"job_id": SQL, "claim_id": claim_id}]}, 422),
        # NUL bytes and other unstorable text
        ("NUL in task", "POST", "/api/jobs", {"task": "a\x00b"}, 422),
        ("NUL in payload", "POST", "/api/jobs", {"task": "t", "payload": {"k": "\x00"}}, 422),
        ("NUL in a payload key", "POST", "/api/jobs", {"task": "t", "payload": {"\x00": 1}}, 422),
        ("NUL in key", "POST", "/api/jobs", {"task": "t", "key": "k\x00"}, 422),
        ("NUL in error text", "POST", f"{job}/fail", {"claim_id": claim_id, "error": "\x00"}, 422),
        ("NUL in a query", "GET", "/api/jobs?key=%00", None, 422),
        ("NUL in a queue path", "POST", "/api/queues/a%00b/claim", {}, 422),
        ("NUL in result", "POST", f"{job}/complete", {"claim_id": claim_id, "result": "\x00"}, 422),
        ("lone surrogate", "POST", "/api/jobs", b'{"task": "t", "payload": "\\ud800"}', 422),
        ("lone surrogate in task", "POST", "/api/jobs", b'{"task": "\\udc00"}', 422),
        ("control character in queue", "POST", "/api/jobs", {"task": "t", "queue": "a\nb"}, 422),
        ("task too long", "POST", "/api/jobs", {"task": "t" * 201}, 422),
        # the wrong door
        ("unknown route", "POST", "/api/jobz", {"task": "t"}, 404),
        ("wrong method", "PUT", "/api/jobs", {"task": "t"}, 405),
        ("GET on a POST-only path", "GET", "/api/jobs/batch", None, 405),
        ("DELETE on the reset resource", "DELETE", "/api/claims/reset", None, 405),
        ("form body", "POST", "/api/jobs", ("task=t", "application/x-www-form-urlencoded"), 415),
        # bodies built to stall a parser, or its checks
        ("a depth-check staller", "POST", "/api/jobs",
         b"[" * 80 + b'"\\' * 200_000, 422),
        ("an unterminated string", "POST", "/api/jobs", b'{"task": "' + b"[" * 100, 400),
        ("a million brackets", "POST", "/api/jobs", b"[" * 1_000_000, 422),
        ("many shallow arrays", "POST", "/api/jobs", b"[" + b"[]," * 300_000 + b"[]]", 422),
        # times and numbers past what the calendar or int() can hold
        ("run_at past year 9999 in UTC", "POST", "/api/jobs",
         {"task": "t", "run_at": "9999-12-31T23:00:00-14:00"}, 422),
        ("run_at before year 1 in UTC", "POST", "/api/jobs",
         {"task": "t", "run_at": "0001-01-01T00:00:00+14:00"}, 422),
        ("a 4,400-digit job id", "GET", "/api/jobs/" + "9" * 4400, None, 422),
        ("a 4,400-digit job id to cancel", "POST", f"/api/jobs/{'9' * 4400}/cancel", None, 422),
        ("a 4,400-digit after", "GET", "/api/jobs?after=" + "9" * 4400, None, 422),
        ("a 4,400-digit claim limit", "POST", "/api/queues/default/claim",
         b'{"limit": ' + b"9" * 4400 + b"}", 400),
        # leases past the server's bounds
        ("a ten-year heartbeat", "POST", f"{job}/heartbeat",
         {"claim_id": claim_id, "extend_seconds": 10 * 365 * 86400}, 422),
        ("a ten-year batch heartbeat", "POST", "/api/batch/heartbeat",
         {"items": [{"job_id": job_id, "claim_id": claim_id}], "extend_seconds": 3e8}, 422),
        ("a ten-year claim by id", "POST", f"/api/jobs/{job_id + 1}/claim",
         {"lease_seconds": 3e8}, 422),
        # names that hide what they are
        ("a direction override in a task", "POST", "/api/jobs", {"task": "a\u202eb"}, 422),
        ("a C1 control in a queue", "POST", "/api/jobs", {"task": "t", "queue": "a\x85"}, 422),
        ("a direction mark in a key query", "GET", "/api/jobs?key=a%E2%80%8Fb", None, 422),
        ("a direction isolate in a worker", "POST", "/api/queues/default/claim",
         {"worker": "w\u2066"}, 422),
        ("an unknown include", "GET", "/api/jobs?include=payload,claim_id", None, 422),
        ("a malformed flow-control body", "PUT", "/api/queues/default/limits",
         b'{"max_running": ', 400),
        ("limits of the wrong type", "PUT", "/api/queues/default/limits",
         {"max_running": "5"}, 422),
        ("a schedule with a control character", "PUT", "/api/schedules/s",
         {"task": "t", "queue": "q", "spec": "a\nb"}, 422),
    ]  # fmt: skip


def _send(client: TestClient, method: str, url: str, body: Any) -> Any:
    if isinstance(body, bytes):
        return client.request(method, url, content=body, headers=JSON)
    if isinstance(body, tuple):
        text, media_type = body
        return client.request(method, url, content=text, headers={"Content-Type": media_type})
    return client.request(method, url, json=body)


def test_every_bad_request_gets_a_4xx_json_error_and_changes_nothing(
    client: TestClient, queue: conveyor.Queue
) -> None:
    queue.enqueue_many([{"task": "t", "key": f"k{n}"} for n in range(3)])
    claim = queue.claim(limit=1)
    job_id = claim.jobs[0].id
    before = snapshot(queue)
    wrong = []
    for name, method, url, body, expected in _cases(job_id, claim.id):
        response = _send(client, method, url, body)
        try:
            error = response.json()["error"]
            shaped = isinstance(error["code"], str) and isinstance(error["message"], str)
        except (ValueError, KeyError, TypeError):
            shaped = False
        if response.status_code != expected or not shaped:
            wrong.append(f"{name}: {response.status_code} {response.text[:200]}")
    assert wrong == []
    assert snapshot(queue) == before


def test_batches_leave_out_unknown_claims_without_changing_anything(
    client: TestClient, queue: conveyor.Queue
) -> None:
    queue.enqueue("t")
    claim = queue.claim()
    job_id = claim.jobs[0].id
    before = snapshot(queue)
    for path, item in [
        ("/api/batch/complete", {"job_id": job_id, "claim_id": SQL}),
        ("/api/batch/fail", {"job_id": job_id, "claim_id": "nope", "error": "e"}),
        ("/api/batch/heartbeat", {"job_id": job_id, "claim_id": "nope"}),
        ("/api/batch/complete", {"job_id": 424242, "claim_id": claim.id}),
    ]:
        response = client.post(path, json={"items": [item]})
        assert (response.status_code, response.json()) == (200, {"jobs": [], "truncated": False})
    assert snapshot(queue) == before


def test_sql_looking_text_is_stored_as_text(client: TestClient, queue: conveyor.Queue) -> None:
    body = {"task": SQL, "queue": SQL, "key": SQL, "payload": {SQL: SQL}}
    job = client.post("/api/jobs", json=body).json()
    assert (job["task"], job["queue"], job["key"], job["payload"]) == (SQL, SQL, SQL, {SQL: SQL})
    assert (
        client.get("/api/jobs/latest", params={"key": SQL, "queue": SQL}).json()["id"] == job["id"]
    )
    assert queue.stats().pending == 1


def _operations(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    spec = client.get("/openapi.json").json()
    return [
        (method.upper(), path, operation)
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
    ]


def _fill(path: str, **values: str) -> str:
    defaults = {"job_id": "1", "queue": "default", "claim_id": "c0ffee", "name": "n"}
    return re.sub(r"{(\w+)}", lambda m: {**defaults, **values}[m.group(1)], path)


def test_every_route_refuses_malformed_and_hostile_input(
    client: TestClient, queue: conveyor.Queue
) -> None:
    """Generated from the OpenAPI document, so a new route is covered the day it is
    added: every body that is not JSON, not an object or has an unknown field, every
    path parameter that no id or name can be, every number query that is not one."""
    queue.enqueue_many([{"task": "t", "key": f"k{n}"} for n in range(3)])
    queue.claim(limit=1)
    before = snapshot(queue)
    hostile_paths = {"job_id": ["0", "9" * 4400], "queue": ["a%0Ab", "a%E2%80%AEb"],
                     "claim_id": ["a%0Ab"], "name": ["a%0Ab", "a%C2%85b"]}  # fmt: skip
    requests: list[tuple[str, str, str, Any, set[int]]] = []
    for method, path, operation in _operations(client):
        if "requestBody" in operation:
            url = _fill(path)
            requests += [
                ("not JSON", method, url, b'{"task": ', {400}),
                ("not an object", method, url, b"[]", {422}),
                ("an unknown field", method, url, {"surely_unknown": 1}, {422}),
                ("JSON too deep", method, url, b"[" * 200 + b"]" * 200, {422}),
            ]
        for name, values in hostile_paths.items():
            if "{" + name + "}" in path:
                body = {} if "requestBody" in operation else None
                requests += [(f"{name}={v[:20]}", method, _fill(path, **{name: v}), body, {422})
                             for v in values]  # fmt: skip
        for parameter in operation.get("parameters", []):
            kind = parameter.get("schema", {}).get("type") or [
                s.get("type") for s in parameter.get("schema", {}).get("anyOf", [])
            ]
            if parameter["in"] == "query" and ("integer" in kind or "number" in kind):
                url = f"{_fill(path)}?{parameter['name']}=lots"
                body = {} if "requestBody" in operation else None
                requests.append((f"{parameter['name']}=lots", method, url, body, {422}))
    wrong = []
    for name, method, url, body, expected in requests:
        response = _send(client, method, url, body)
        try:
            error = response.json()["error"]
            shaped = isinstance(error["code"], str) and isinstance(error["message"], str)
        except (ValueError, KeyError, TypeError):
            shaped = False
        if response.status_code not in expected or not shaped:
            wrong.append(
                f"{method} {url[:60]} ({name}): {response.status_code} {response.text[:150]}"
            )
    assert len(requests) > 140  # every route, several ways
    assert wrong == []
    assert snapshot(queue) == before
