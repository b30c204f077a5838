"""The metadata sync (Hardcover queue) spec: batches of 100 with a processing id, the
previous batch acknowledged by the next request, admin resets and cleanup, the edge cases
it lists, and three concurrent clients over 1,000 books with no book twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conveyor.maintenance import RetentionPruner
from examples.metadata_sync import client as sync_client
from examples.metadata_sync.app import QUEUE, Library, create_api
from tests.examples.conftest import ENV, conflicting, wait_until


@pytest.fixture
def library(db_url: str) -> Iterator[Library]:
    lib = Library(db_url)
    yield lib
    lib.close()


@pytest.fixture
def api(library: Library) -> Iterator[TestClient]:
    with TestClient(create_api(library)) as client:
        yield client


def add_books(api: TestClient, n: int, prefix: str = "Book") -> list[dict[str, Any]]:
    books = []
    for i in range(n):
        answer = api.post("/api/books", json={"title": f"{prefix} {i}"})
        assert answer.status_code == 201, answer.text
        books.append(answer.json())
    return books


def insert_directly(library: Library, n: int) -> list[str]:
    """Books written by something other than this API (an import, a migration)."""
    ids = [str(uuid.uuid4()) for _ in range(n)]
    now = datetime.now(UTC).isoformat()
    with library.db.transaction() as tx:
        for i, book_id in enumerate(ids):
            tx.execute(
                "INSERT INTO books (id, title, created_at) VALUES (:id, :t, :now)",
                {"id": book_id, "t": f"Imported {i}", "now": f"{now}-{i:06d}"},
            )
    return ids


def test_batches_of_100_and_the_previous_one_acknowledged(
    api: TestClient, library: Library
) -> None:
    books = add_books(api, 230)
    first = api.get("/api/missing/hardcover").json()
    assert [b["id"] for b in first["books"]] == [b["id"] for b in books[:100]]  # FIFO
    assert set(first["books"][0]) == {"id", "title", "hardcoverId", "createdAt"}
    assert first["remainingUnclaimed"] == 130
    second = api.get(
        "/api/missing/hardcover", params={"previousProcessingId": first["processingId"]}
    ).json()
    assert [b["id"] for b in second["books"]] == [b["id"] for b in books[100:200]]
    assert second["processingId"] != first["processingId"] and second["remainingUnclaimed"] == 30
    stats = library.q.stats(QUEUE)
    assert stats.completed == 100 and stats.running == 100  # the first batch left the queue
    third = api.get(
        "/api/missing/hardcover", params={"previousProcessingId": second["processingId"]}
    ).json()
    assert len(third["books"]) == 30 and third["remainingUnclaimed"] == 0
    # Nothing left: no books, but still a new processing id and a count of 0.
    empty = api.get(
        "/api/missing/hardcover", params={"previousProcessingId": third["processingId"]}
    ).json()
    assert empty["books"] == [] and empty["remainingUnclaimed"] == 0
    assert empty["processingId"] not in {first["processingId"], third["processingId"]}
    assert library.q.stats(QUEUE).completed == 230


def test_an_unknown_previous_processing_id_affects_nothing(
    api: TestClient, library: Library
) -> None:
    add_books(api, 150)
    held = api.get("/api/missing/hardcover").json()
    nobody = api.get("/api/missing/hardcover", params={"previousProcessingId": "no-such-id"})
    assert nobody.status_code == 200
    assert len(nobody.json()["books"]) == 50  # claiming went on
    assert library.q.stats(QUEUE).running == 150  # the held batch was not touched
    assert len(held["books"]) == 100
    too_long = api.get("/api/missing/hardcover", params={"previousProcessingId": "x" * 500})
    assert too_long.status_code == 422 and too_long.json()["error"]["code"] == "validation_error"
    assert library.q.stats(QUEUE).running == 150


def test_admins_reset_old_claims_and_one_claim_by_id_of_this_queue_only(
    api: TestClient, library: Library
) -> None:
    add_books(api, 250)
    other = library.q.enqueue("mail.send", queue="mail")  # another queue, same database
    library.q.claim("mail")
    a = api.get("/api/missing/hardcover").json()
    b = api.get("/api/missing/hardcover").json()
    assert api.post("/api/admin/hardcover-queue/reset", params={"olderThan": 60}).json() == {
        "resetCount": 0  # both claims are younger than an hour
    }
    freed = api.delete(f"/api/admin/hardcover-queue/claims/{a['processingId']}")
    assert freed.json() == {"resetCount": 100}
    assert api.delete("/api/admin/hardcover-queue/claims/unknown").json() == {"resetCount": 0}
    assert api.post("/api/admin/hardcover-queue/reset", params={"olderThan": 0}).json() == {
        "resetCount": 100  # b's batch; the mail job is left running
    }
    assert library.q.get(other.id).status == "running"  # type: ignore[union-attr]
    again = api.get("/api/missing/hardcover").json()
    assert again["books"][0]["id"] == a["books"][0]["id"]  # reset books are claimable again
    assert len(b["books"]) == 100
    for bad in ({}, {"olderThan": -1}, {"olderThan": "soon"}):
        refused = api.post("/api/admin/hardcover-queue/reset", params=bad)
        assert refused.status_code == 422 and "olderThan" in refused.json()["error"]["message"]


def test_a_book_that_gets_its_id_leaves_the_queue_whatever_its_state(
    api: TestClient, library: Library
) -> None:
    books = add_books(api, 3)
    claimed = api.get("/api/missing/hardcover").json()  # all three are now claimed
    assert (
        api.patch(f"/api/books/{books[0]['id']}", json={"hardcoverId": "hc-1"}).json()[
            "hardcoverId"
        ]
        == "hc-1"
    )
    job = library.q.latest(books[0]["id"], queue=QUEUE)
    assert job is not None and job.status == "completed" and job.result == {"hardcoverId": "hc-1"}
    later = api.post("/api/books", json={"title": "Pending one"}).json()
    api.patch(f"/api/books/{later['id']}", json={"hardcoverId": "hc-2"})  # never claimed
    assert library.q.latest(later["id"], queue=QUEUE).status == "completed"  # type: ignore[union-attr]
    # The client's acknowledgement still works; only the two others were left to it.
    nxt = api.get(
        "/api/missing/hardcover", params={"previousProcessingId": claimed["processingId"]}
    ).json()
    assert nxt["books"] == [] and library.q.stats(QUEUE).completed == 4
    # An id taken back: the book needs syncing again.
    api.patch(f"/api/books/{later['id']}", json={"hardcoverId": None})
    assert [b["id"] for b in api.get("/api/missing/hardcover").json()["books"]] == [later["id"]]
    assert api.patch("/api/books/nope", json={"hardcoverId": "x"}).status_code == 404
    assert api.patch(f"/api/books/{later['id']}", json={}).status_code == 422
    assert api.patch(f"/api/books/{later['id']}", json={"hardcoverId": ""}).status_code == 422
    assert api.post("/api/books", json={"title": "   "}).status_code == 422
    oops = api.post("/api/books", content=b"{oops", headers={"Content-Type": "application/json"})
    assert oops.status_code == 400 and oops.json()["error"]["code"] == "malformed_json"


def test_a_patch_rolled_back_by_a_deadlock_runs_again_and_commits_once(
    api: TestClient, library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On MySQL, a PATCH's transaction (the book's row, then its job by key) can meet a
    # client's claim and be chosen to break a deadlock: the database rolls it all back
    # and conveyor raises TransactionConflict. The first two tries fail so here.
    book = add_books(api, 1)[0]
    api.get("/api/missing/hardcover")  # the book's job is claimed by a client
    tries = conflicting(monkeypatch, library.q, "complete_by_key", 2)
    answer = api.patch(f"/api/books/{book['id']}", json={"hardcoverId": "hc-7"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["hardcoverId"] == "hc-7" and tries == [book["id"]] * 3
    job = library.q.latest(book["id"], queue=QUEUE)
    assert job is not None and job.status == "completed" and job.result == {"hardcoverId": "hc-7"}
    # Always refused: the client hears a 503 and nothing was stored.
    other = add_books(api, 1, prefix="Other")[0]
    tries = conflicting(monkeypatch, library.q, "complete_by_key", 99)
    refused = api.patch(f"/api/books/{other['id']}", json={"hardcoverId": "hc-8"})
    assert refused.status_code == 503 and len(tries) == 5
    assert api.get(f"/api/books/{other['id']}").json()["hardcoverId"] is None
    assert library.q.latest(other["id"], queue=QUEUE).status == "pending"  # type: ignore[union-attr]


def test_a_new_book_rolled_back_by_a_deadlock_is_added_once_on_the_next_try(
    api: TestClient, library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each refusal comes after the book's INSERT, in the same transaction.
    tries = conflicting(monkeypatch, library.q, "enqueue", 2)
    book = add_books(api, 1)[0]
    assert len(tries) == 3
    with library.db.transaction(write=False) as tx:
        assert tx.one("SELECT count(*) AS n FROM books")["n"] == 1  # type: ignore[index]
    assert [job.key for job in library.q.jobs(queue=QUEUE)] == [book["id"]]


def test_the_client_sends_a_request_again_after_a_503_and_gives_up_after_its_tries(
    api: TestClient, library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_books(api, 3)
    tries = conflicting(monkeypatch, library.q, "claim", 1)
    # A 503 (Retry-After: 1), then a 200.
    answer = sync_client.send(api, "GET", "/api/missing/hardcover")
    assert answer.status_code == 200 and len(answer.json()["books"]) == 3 and len(tries) == 2
    tries = conflicting(monkeypatch, library.q, "claim", 10)
    monkeypatch.setattr(sync_client, "UNAVAILABLE_TRIES", 2)
    answer = sync_client.send(api, "GET", "/api/missing/hardcover")
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
    assert len(tries) == 2  # two tries, then the 503 is the caller's
    assert library.q.stats(QUEUE).running == 3  # the refused claims took nothing


def test_the_client_pauses_as_long_as_the_server_asks_within_a_cap() -> None:
    pause = sync_client._pause
    assert pause("3") == 3.0 and pause("0.5") == 0.5
    assert pause(None) == 1.0 and pause("Wed, 21 Oct 2026 07:28:00 GMT") == 1.0
    assert pause("86400") == sync_client.LONGEST_PAUSE and pause("-5") == 0.0


def test_a_new_book_and_its_queue_entry_commit_together(library: Library) -> None:
    real = library._enqueue

    def enqueue_then_fail(tx: Any, book_id: str) -> None:
        real(tx, book_id)
        raise RuntimeError("the application failed after queueing")

    library._enqueue = enqueue_then_fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        library.add_book("Never Saved")
    library._enqueue = real  # type: ignore[method-assign]
    assert library.q.stats(QUEUE).total == 0
    with library.db.transaction(write=False) as tx:
        assert tx.one("SELECT count(*) AS n FROM books")["n"] == 0  # type: ignore[index]
    book = library.add_book("Saved")
    assert library.q.latest(book["id"], queue=QUEUE) is not None


def test_start_up_queues_every_book_lacking_an_id_once(library: Library) -> None:
    ids = insert_directly(library, 120)
    with library.db.transaction() as tx:
        tx.execute("UPDATE books SET hardcover_id = 'hc' WHERE id = :id", {"id": ids[0]})
    for _ in range(2):  # two start-ups: the second finds every book queued already
        with TestClient(create_api(library)) as client:
            first = client.get("/api/missing/hardcover").json()
            client.delete(f"/api/admin/hardcover-queue/claims/{first['processingId']}")
    assert library.q.stats(QUEUE).pending == 119
    assert library.q.latest(ids[0], queue=QUEUE) is None


def test_cleanup_completes_the_entries_of_books_that_have_their_id(
    api: TestClient, library: Library
) -> None:
    books = add_books(api, 5)
    api.get("/api/missing/hardcover", params={})  # all claimed; cleanup ignores claims
    with library.db.transaction() as tx:  # ids set behind the API's back
        for book in books[:3]:
            tx.execute("UPDATE books SET hardcover_id = 'hc' WHERE id = :id", {"id": book["id"]})
    assert api.post("/api/admin/hardcover-queue/cleanup").json() == {"removedCount": 3}
    assert api.post("/api/admin/hardcover-queue/cleanup").json() == {"removedCount": 0}
    assert library.q.stats(QUEUE).running == 2


def _client(url: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "examples.metadata_sync", "client", "--url", url, *args],
        cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _books_done(output: str) -> list[str]:
    return [json.loads(line)["book"] for line in output.splitlines() if '"book"' in line]


@pytest.mark.slow
def test_three_clients_over_1000_books_never_get_the_same_book(
    db_url: str, tmp_path: Path, start_server: Any
) -> None:
    library = Library(db_url)
    ids = insert_directly(library, 1000)  # queued by the server's start-up
    server = start_server("metadata_sync", db_url, workers=0)
    # Each lookup takes 10 ms, as a catalogue's would, so the clients' batches overlap.
    clients = [_client(server.url, tmp_path, "--delay", "0.01") for _ in range(3)]
    outputs = [c.communicate(timeout=240) for c in clients]
    assert all(c.returncode == 0 for c in clients), [err for _, err in outputs]
    per_client = [_books_done(out) for out, _ in outputs]
    done = [book for books in per_client for book in books]
    assert len(done) == len(set(done)) == 1000 and set(done) == set(ids)
    assert all(per_client), ("every client got work", [len(p) for p in per_client])
    for job in library.q.jobs(queue=QUEUE, limit=1000):
        assert job.status == "completed" and job.attempts == 1  # claimed by one client, once
    with library.db.transaction(write=False) as tx:
        assert tx.one("SELECT count(*) AS n FROM books WHERE hardcover_id IS NULL")["n"] == 0  # type: ignore[index]
    library.close()


@pytest.mark.slow
def test_a_client_killed_mid_batch_resumes_it_without_reprocessing(
    db_url: str, tmp_path: Path, start_server: Any
) -> None:
    library = Library(db_url)
    insert_directly(library, 250)
    server = start_server("metadata_sync", db_url, workers=0)
    state = tmp_path / "client-state.json"
    lines: list[str] = []
    first = _client(server.url, tmp_path, "--state", str(state), "--delay", "0.01")
    assert first.stdout is not None
    while len(lines) < 130:  # into its second batch
        line = first.stdout.readline()
        assert line, first.stderr.read() if first.stderr else "the client stopped"
        lines.append(line)
    first.send_signal(signal.SIGKILL)
    first.wait()
    lines += first.stdout.read().splitlines()
    assert library.q.stats(QUEUE).running > 0  # the rest of its batch stays claimed
    second = _client(server.url, tmp_path, "--state", str(state))
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    summary = json.loads(out.splitlines()[-1])["done"]
    assert 0 < summary["resumed"] <= 70  # it finished the batch it held
    done = _books_done("\n".join(lines) + "\n" + out)
    assert len(done) == len(set(done))  # no book twice
    jobs = library.q.jobs(queue=QUEUE, limit=1000)
    assert len(jobs) == 250 and all(j.status == "completed" and j.attempts == 1 for j in jobs)
    with library.db.transaction(write=False) as tx:
        assert tx.one("SELECT count(*) AS n FROM books WHERE hardcover_id IS NULL")["n"] == 0  # type: ignore[index]
    wait_until(lambda: server.proc.poll() is None)
    library.close()


def test_the_demo_runs_from_another_directory(db_url: str, tmp_path: Path) -> None:
    from tests.examples.conftest import run_module

    done = run_module("metadata_sync", "--db", db_url, "--books", "300", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["looked_up_twice"] == 0 and out["books_looked_up"] == 300
    assert out["reset_by_processing_id"] == 100 and out["remaining_after_it_got_its_id"] == 0
    assert out["queue"]["pending"] == 0 and out["queue"]["completed"] == 301


def test_a_restart_does_not_hand_out_again_books_acknowledged_without_a_match(
    db_url: str,
) -> None:
    first = Library(db_url)
    with TestClient(create_api(first)) as api:
        add_books(api, 150)
        batch = api.get("/api/missing/hardcover").json()
        batch = api.get(
            "/api/missing/hardcover", params={"previousProcessingId": batch["processingId"]}
        ).json()  # the first 100 acknowledged, no match found for any
        done = api.get(
            "/api/missing/hardcover", params={"previousProcessingId": batch["processingId"]}
        ).json()
        assert done["books"] == [] and done["remainingUnclaimed"] == 0
    first.close()
    restarted = Library(db_url)  # the server starts again
    try:
        with TestClient(create_api(restarted)) as api:
            again = api.get("/api/missing/hardcover").json()
            assert again["books"] == [] and again["remainingUnclaimed"] == 0
            # A book whose id is cleared joins the queue again, restart or not.
            book = add_books(api, 1, "Late")[0]
            api.patch(f"/api/books/{book['id']}", json={"hardcoverId": "hc-1"})
            api.patch(f"/api/books/{book['id']}", json={"hardcoverId": None})
            claimed = api.get("/api/missing/hardcover").json()["books"]
            assert [b["id"] for b in claimed] == [book["id"]]
    finally:
        restarted.close()


def test_books_acknowledged_without_a_match_are_not_handed_out_after_a_prune(
    db_url: str,
) -> None:
    first = Library(db_url)
    assert {p.status for p in first.q.retention_policies() if p.queue == QUEUE} == {
        "completed", "failed", "cancelled",
    }  # fmt: skip
    first.q.set_retention("completed", 0, queue=QUEUE, retire_keys=True)  # prune now
    with TestClient(create_api(first)) as api:
        add_books(api, 30)
        batch = api.get("/api/missing/hardcover").json()
        done = api.get(
            "/api/missing/hardcover", params={"previousProcessingId": batch["processingId"]}
        ).json()  # acknowledged, no match found for any
        assert done["books"] == []
    assert RetentionPruner(first.q, pause=0).run_once() == 30
    assert first.q.stats(QUEUE).completed == 0
    first.close()
    restarted = Library(db_url)  # start-up queues books without an id never queued
    try:
        with TestClient(create_api(restarted)) as api:
            again = api.get("/api/missing/hardcover").json()
            assert again["books"] == [] and again["remainingUnclaimed"] == 0
    finally:
        restarted.close()


def test_the_processing_id_is_a_canonical_uuid(api: TestClient, library: Library) -> None:
    add_books(api, 3)
    batch = api.get("/api/missing/hardcover").json()
    pid = batch["processingId"]
    assert str(uuid.UUID(pid)) == pid  # 8-4-4-4-12, lower case
    released = api.delete(f"/api/admin/hardcover-queue/claims/{pid}").json()
    assert released == {"resetCount": 3}
    batch = api.get("/api/missing/hardcover").json()
    acked = api.get(
        "/api/missing/hardcover", params={"previousProcessingId": batch["processingId"]}
    ).json()
    assert acked["books"] == [] and library.q.stats(QUEUE).completed == 3
    unknown = api.get("/api/missing/hardcover", params={"previousProcessingId": "not-a-uuid"})
    assert unknown.status_code == 200 and unknown.json()["books"] == []


def test_request_bodies_are_capped(api: TestClient) -> None:
    answer = api.post(
        "/api/books",
        content=json.dumps({"title": "x" * 100_000}),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:  # no declared length: counted as it arrives
        yield b'{"title": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    streamed = api.post(
        "/api/books", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert streamed.status_code == 413 and "error" in streamed.json()


def test_a_nul_character_in_text_is_a_422(api: TestClient) -> None:
    for answer in (
        api.post("/api/books", json={"title": "Du\x00ne"}),
        api.patch(f"/api/books/{add_books(api, 1)[0]['id']}", json={"hardcoverId": "hc\x00"}),
        api.get("/api/books/a%00b"),
        api.get("/api/missing/hardcover", params={"previousProcessingId": "a\x00"}),
    ):
        assert answer.status_code == 422, answer.text
        assert "NUL" in answer.json()["error"]["message"]
