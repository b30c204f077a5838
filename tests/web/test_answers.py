"""What answers carry: claim ids only to their holder, lists without payloads unless
asked, a byte budget on answers with many jobs, and every lease within bounds."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from conveyor.client import RemoteQueue
from conveyor.web import Limits, create_app
from conveyor.web.answers import claim_ref
from tests.web.conftest import ROLES, TOKENS, bearer, snapshot

WORKER = bearer("worker")
BIG = "x" * 50_000
CLAIM_ID = re.compile(r"[0-9a-f]{32}")


def _claimed(q: conveyor.Queue, n: int = 1, **enqueue: Any) -> conveyor.Claim:
    q.enqueue_many([{"task": "t", "payload": {"n": i}, **enqueue} for i in range(n)])
    return q.claim(limit=n, lease=300)


# -- claim ids ----------------------------------------------------------------------------
def test_no_role_reads_a_claim_id(client: TestClient, queue: conveyor.Queue) -> None:
    claim = _claimed(queue, 2, key=None)
    running = claim.jobs[0]
    done = queue.complete(claim.jobs[1].id, claim.id, {"ok": True})  # a final job keeps it
    reads = {
        "get": lambda h: [client.get(f"/api/jobs/{running.id}", headers=h).json()],
        "get final": lambda h: [client.get(f"/api/jobs/{done.id}", headers=h).json()],
        "list": lambda h: client.get("/api/jobs", headers=h).json()["jobs"],
        "wait": lambda h: [
            client.get(f"/api/jobs/{done.id}/wait", params={"timeout": 0}, headers=h).json()
        ],
    }
    for role in ROLES:
        for name, read in reads.items():
            for job in read(bearer(role)):
                assert job["claim_id"] is None, (role, name)
                assert job["claim_ref"] == claim_ref(claim.id), (role, name)
                assert claim.id not in json.dumps(job), (role, name)


def test_the_claimant_sees_its_own_claim_id(client: TestClient) -> None:
    client.post("/api/jobs", json={"task": "t"})
    claim = client.post("/api/queues/default/claim", json={}, headers=WORKER).json()
    assert CLAIM_ID.fullmatch(claim["claim_id"])
    [job] = claim["jobs"]
    assert job["claim_id"] == claim["claim_id"]
    assert job["claim_ref"] == claim_ref(claim["claim_id"])
    body = {"claim_id": claim["claim_id"]}
    beat = client.post(f"/api/jobs/{job['id']}/heartbeat", json=body, headers=WORKER).json()
    assert beat["claim_id"] == claim["claim_id"]  # it named the claim itself
    items = {"items": [{"job_id": job["id"], "claim_id": claim["claim_id"]}]}
    [held] = client.post("/api/batch/heartbeat", json=items, headers=WORKER).json()["jobs"]
    assert held["claim_id"] == claim["claim_id"]


def test_an_enqueue_that_meets_a_running_job_does_not_reveal_its_claim(
    client: TestClient, queue: conveyor.Queue
) -> None:
    claim = _claimed(queue, 1, key="book-1")
    same = client.post("/api/jobs", json={"task": "t", "key": "book-1"}, headers=WORKER)
    assert same.status_code == 200
    assert same.json()["claim_id"] is None and claim.id not in same.text
    batch = client.post("/api/jobs/batch", json={"jobs": [{"task": "t", "key": "book-1"}]},
                        headers=WORKER)  # fmt: skip
    assert claim.id not in batch.text


def test_no_refusal_names_a_claim_id(client: TestClient, queue: conveyor.Queue) -> None:
    first = _claimed(queue, 1)
    job_id = first.jobs[0].id
    queue.release(first.id)
    second = queue.claim()
    reports = [
        ("complete", {}),
        ("fail", {"error": "e"}),
        ("heartbeat", {}),
        ("progress", {"total": 1}),
        ("snooze", {"delay_seconds": 1}),
    ]
    answers = [
        client.post(
            f"/api/jobs/{job_id}/{verb}", json={"claim_id": first.id, **body}, headers=WORKER
        )
        for verb, body in reports
    ]
    assert {a.status_code for a in answers} == {409}
    for answer in answers:
        assert first.id not in answer.text and second.id not in answer.text


def test_a_remote_client_still_works_its_claims(remote: RemoteQueue) -> None:
    """Workers over HTTP hold the claim ids they were given; reads show none."""
    remote.enqueue("t", {"n": 1})
    claim = remote.claim(limit=1)
    assert claim.jobs[0].claim_id == claim.id
    assert remote.get(claim.jobs[0].id).claim_id is None  # type: ignore[union-attr]
    assert [j.id for j in remote.heartbeat_many([(claim.jobs[0].id, claim.id)])] == [
        claim.jobs[0].id
    ]
    assert remote.complete(claim.jobs[0].id, claim.id, 1).status == "completed"


# -- lists ----------------------------------------------------------------------------------
def test_lists_leave_out_payload_and_result_unless_asked(
    client: TestClient, queue: conveyor.Queue
) -> None:
    claim = _claimed(queue, 1)
    queue.complete(claim.jobs[0].id, claim.id, {"pages": 3})
    [job] = client.get("/api/jobs").json()["jobs"]
    assert "payload" not in job and "result" not in job
    [job] = client.get("/api/jobs", params={"include": "payload,result"}).json()["jobs"]
    assert (job["payload"], job["result"]) == ({"n": 0}, {"pages": 3})
    [job] = client.get("/api/jobs", params={"include": "result"}).json()["jobs"]
    assert "payload" not in job and job["result"] == {"pages": 3}
    one = client.get(f"/api/jobs/{job['id']}").json()  # one job: whole
    assert (one["payload"], one["result"]) == ({"n": 0}, {"pages": 3})
    refused = client.get("/api/jobs", params={"include": "payload,secrets"})
    assert refused.status_code == 422


def test_a_remote_client_reads_whole_jobs(remote: RemoteQueue, queue: conveyor.Queue) -> None:
    queue.enqueue("t", {"n": 7}, key="k")
    assert [j.payload for j in remote.jobs()] == [{"n": 7}]
    assert remote.latest("k").payload == {"n": 7}  # type: ignore[union-attr]


def _small_budget(db_url: str, max_bytes: int = 120_000) -> TestClient:
    app = create_app(db_url, tokens=TOKENS, limits=Limits(max_response_bytes=max_bytes))
    return TestClient(app, headers=bearer("admin"))


def test_a_list_stops_at_the_byte_budget_and_says_so(db_url: str) -> None:
    with _small_budget(db_url) as c:
        q: conveyor.Queue = c.app.state.conveyor.queue  # type: ignore[attr-defined]
        q.enqueue_many([{"task": "t", "payload": BIG} for _ in range(10)])
        page = c.get("/api/jobs", params={"include": "payload", "limit": 10})
        body = page.json()
        assert body["truncated"] is True
        assert 1 <= len(body["jobs"]) < 10
        assert len(page.content) <= 120_000
        # The next page starts after the last id shown, and together they hold them all.
        seen = [j["id"] for j in body["jobs"]]
        while body["truncated"]:
            body = c.get("/api/jobs", params={"include": "payload", "after": seen[-1]}).json()
            seen += [j["id"] for j in body["jobs"]]
        assert seen == [j.id for j in q.jobs()]
        slim = c.get("/api/jobs", params={"limit": 10}).json()  # no payloads: all fit
        assert (len(slim["jobs"]), slim["truncated"]) == (10, False)


def test_one_job_larger_than_the_budget_still_goes_out(db_url: str) -> None:
    with _small_budget(db_url, max_bytes=1000) as c:
        c.post("/api/jobs", json={"task": "t", "payload": BIG})
        body = c.get("/api/jobs", params={"include": "payload"}).json()
        assert len(body["jobs"]) == 1 and body["truncated"] is False


def test_a_claim_stops_at_the_byte_budget_and_gives_the_rest_back(db_url: str) -> None:
    with _small_budget(db_url) as c:
        q: conveyor.Queue = c.app.state.conveyor.queue  # type: ignore[attr-defined]
        q.enqueue_many([{"task": "t", "payload": BIG} for _ in range(10)])
        claim = c.post("/api/queues/default/claim", json={"limit": 10}).json()
        taken = [j["id"] for j in claim["jobs"]]
        assert claim["truncated"] is True and 1 <= len(taken) < 10
        assert claim["remaining"] == 10 - len(taken)
        stats = q.stats()
        assert (stats.running, stats.pending) == (len(taken), 10 - len(taken))
        for job in q.jobs(status="pending"):
            assert (job.attempts, job.claim_id) == (0, None)  # given back: no attempt spent
        # The claim's ack completes what it holds, not what it gave back.
        nxt = c.post("/api/queues/default/claim", json={"limit": 1, "ack": claim["claim_id"]})
        assert nxt.json()["acked"] == len(taken)


def test_notifications_stop_at_the_byte_budget(db_url: str) -> None:
    with _small_budget(db_url) as c:
        q: conveyor.Queue = c.app.state.conveyor.queue  # type: ignore[attr-defined]
        for n in range(6):
            job = q.enqueue("t", BIG, subscriber=f"s{n}")
            claim = q.claim()
            q.complete(job.id, claim.id)
        taken = c.post("/api/notifications/take", json={"limit": 6}).json()
        assert taken["truncated"] is True and 1 <= len(taken["notifications"]) < 6


def test_batch_writes_name_every_job_but_trim_past_the_budget(db_url: str) -> None:
    with _small_budget(db_url) as c:
        q: conveyor.Queue = c.app.state.conveyor.queue  # type: ignore[attr-defined]
        q.enqueue_many([{"task": "t", "payload": BIG} for _ in range(6)])
        claim = q.claim(limit=6)
        items = [{"job_id": j.id, "claim_id": claim.id} for j in claim.jobs]
        beat = c.post("/api/batch/heartbeat", json={"items": items}).json()
        assert beat["truncated"] is True
        assert [j["id"] for j in beat["jobs"]] == [j.id for j in claim.jobs]
        assert "payload" in beat["jobs"][0] and "payload" not in beat["jobs"][-1]


# -- leases -------------------------------------------------------------------------------
@pytest.mark.parametrize("seconds", [10 * 365 * 86400, 24 * 3600 + 1, 0.5])
def test_every_lease_a_request_asks_for_is_bounded(
    client: TestClient, queue: conveyor.Queue, seconds: float
) -> None:
    claim = _claimed(queue, 1)
    job = claim.jobs[0]
    before = snapshot(queue)
    item = {"job_id": job.id, "claim_id": claim.id}
    for path, body in [
        (f"/api/jobs/{job.id}/heartbeat", {"claim_id": claim.id, "extend_seconds": seconds}),
        ("/api/batch/heartbeat", {"items": [item], "extend_seconds": seconds}),
        ("/api/batch/renew", {"items": [item], "extend_seconds": seconds}),
        ("/api/queues/default/claim", {"lease_seconds": seconds}),
        ("/api/notifications/take", {"lease_seconds": seconds}),
    ]:
        response = client.post(path, json=body, headers=WORKER)
        assert response.status_code == 422, (path, response.text)
        assert "seconds" in response.json()["error"]["message"]
    queue.enqueue("t")
    pending = queue.jobs(status="pending")[0].id
    response = client.post(f"/api/jobs/{pending}/claim", json={"lease_seconds": seconds},
                           headers=WORKER)  # fmt: skip
    assert response.status_code == 422
    assert snapshot(queue)[1][:1] == before[1][:1]  # the held job's lease did not move


def test_a_lease_within_bounds_is_granted(client: TestClient, queue: conveyor.Queue) -> None:
    claim = _claimed(queue, 1)
    body = {"claim_id": claim.id, "extend_seconds": 24 * 3600}
    response = client.post(f"/api/jobs/{claim.jobs[0].id}/heartbeat", json=body, headers=WORKER)
    assert response.status_code == 200


# -- who claimed --------------------------------------------------------------------------
def test_a_claim_without_a_worker_name_records_the_callers_role(
    app: FastAPI, client: TestClient, queue: conveyor.Queue
) -> None:
    queue.enqueue_many([{"task": "t"}] * 2)
    claim = client.post("/api/queues/default/claim", json={}, headers=WORKER).json()
    assert claim["jobs"][0]["worker"] == "http:worker"
    one = queue.jobs(status="pending")[0].id
    by_id = client.post(f"/api/jobs/{one}/claim", json={}).json()  # the admin client
    assert by_id["jobs"][0]["worker"] == "http:admin"
    named = queue.enqueue("t")
    mine = client.post(f"/api/jobs/{named.id}/claim", json={"worker": "w7"}, headers=WORKER)
    assert mine.json()["jobs"][0]["worker"] == "w7"
