"""The fetch queue spec: several users and one URL, cached results, errors and asking
again, URL normalisation and validation, and every subscriber told once — even when a
message could not be delivered the first time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conveyor.maintenance import RetentionPruner
from examples.fetch_queue.app import QUEUE, FetchBot, Settings, create_api
from examples.fetch_queue.urls import InvalidUrl, normalise
from tests.examples.conftest import run_module, wait_until

FAST = Settings(retry_delay=0.05, slow_seconds=0.5, redelivery_delay=0.1)


@pytest.fixture
def open_bot(db_url: str) -> Iterator[Callable[..., tuple[FetchBot, TestClient]]]:
    """``open_bot(settings)``: the API with two workers in this process."""
    opened: list[tuple[FetchBot, TestClient]] = []

    def open_one(settings: Settings = FAST) -> tuple[FetchBot, TestClient]:
        bot = FetchBot(db_url, settings)
        client = TestClient(create_api(bot, workers=2))
        client.__enter__()
        opened.append((bot, client))
        return bot, client

    yield open_one
    for bot, client in opened:
        client.__exit__(None, None, None)
        bot.close()


def inbox(api: Any, user: str) -> list[dict[str, Any]]:
    answer = api.get(f"/users/{user}/messages")
    assert answer.status_code == 200
    messages: list[dict[str, Any]] = answer.json()["messages"]
    return messages


def test_three_users_at_once_share_one_fetch_and_each_is_told_once(
    db_url: str, start_server: Any
) -> None:
    server = start_server("fetch_queue", db_url, "--slow-seconds", "1", workers=2)
    variants = [
        "https://fics.example/works/7/slow",
        "HTTP://Fics.Example/works/7/slow/",
        "https://fics.example/works/7/slow?utm_source=discord#chapter-2",
    ]
    replies: dict[str, dict[str, Any]] = {}

    def ask(user: str, url: str) -> None:
        with server.client() as http:
            answer = http.post("/fetch", json={"fic_url": url, "requested_by": user})
            assert answer.status_code == 202, answer.text
            replies[user] = answer.json()

    askers = [threading.Thread(target=ask, args=(f"user{n}", u)) for n, u in enumerate(variants)]
    for t in askers:
        t.start()
    for t in askers:
        t.join()
    assert len({r["job_id"] for r in replies.values()}) == 1  # one job for three askers
    assert {r["status"] for r in replies.values()} <= {"pending", "processing"}
    with server.client() as http:
        for user in replies:
            [message] = wait_until(lambda u=user: inbox(http, u), timeout=30)
            assert message["status"] == "done" and message["fic_url"].endswith("/works/7/slow")
        later = http.post("/fetch", json={"fic_url": variants[0], "requested_by": "late"}).json()
        assert later["status"] == "done" and later["result"]["title"] == "Story slow"
        assert later["job_id"] == replies["user0"]["job_id"]  # the cached result
        time.sleep(1.2)  # a dispatcher pass or more: nobody is told twice
        assert [len(inbox(http, u)) for u in replies] == [1, 1, 1]
        assert inbox(http, "late") == []  # answered at once, nothing to tell later
    import conveyor

    with conveyor.connect(db_url) as q:
        [job] = q.jobs(queue=QUEUE)
        assert job.attempts == 1 and sorted(q.subscribers(job.id)) == ["user0", "user1", "user2"]


def test_a_user_asking_during_the_fetch_is_subscribed(open_bot: Any) -> None:
    bot, api = open_bot(Settings(slow_seconds=2.0))  # long enough to ask during it
    first = api.post(
        "/fetch", json={"fic_url": "https://fics.example/works/1/slow", "requested_by": "ada"}
    )
    wait_until(lambda: bot.q.stats(QUEUE).running == 1)
    second = api.post(
        "/fetch", json={"fic_url": "https://fics.example/works/1/slow", "requested_by": "bob"}
    )
    assert second.status_code == 202 and second.json()["status"] == "processing"
    assert second.json()["job_id"] == first.json()["job_id"]
    assert [m["status"] for m in wait_until(lambda: inbox(api, "bob"))] == ["done"]
    assert len(inbox(api, "ada")) == 1


def test_a_cached_result_answers_for_its_time_then_is_fetched_again(open_bot: Any) -> None:
    bot, api = open_bot(Settings(cache_ttl=1.0, retry_delay=0.05))
    url = "https://fics.example/works/42"
    first = api.post("/fetch", json={"fic_url": url, "requested_by": "ada"}).json()
    wait_until(lambda: inbox(api, "ada"))
    cached = api.post("/fetch", json={"fic_url": url, "requested_by": "bob"}).json()
    assert cached["status"] == "done" and cached["job_id"] == first["job_id"]
    assert cached["result"] == bot.q.get(first["job_id"]).result  # type: ignore[union-attr]
    time.sleep(1.1)
    fresh = api.post("/fetch", json={"fic_url": url, "requested_by": "bob"}).json()
    assert fresh["status"] == "pending" and fresh["job_id"] != first["job_id"]


def test_the_queue_declares_its_retention_and_a_pruned_fetch_is_fetched_again(
    open_bot: Any, db_url: str
) -> None:
    bot, api = open_bot(Settings(cache_ttl=3 * 86400.0, retry_delay=0.05))
    declared = {p.status: p for p in bot.q.retention_policies() if p.queue == QUEUE}
    assert {s: p.keep_seconds for s, p in declared.items()} == {
        "completed": 3 * 86400.0,  # as long as a result answers (--cache-ttl), at least a day
        "failed": 7 * 86400.0,
        "cancelled": 86400.0,
    }
    assert not any(p.retire_keys for p in declared.values())
    FetchBot(db_url, FAST).close()  # another server starts: the policies stay as they are
    assert {p.keep_seconds for p in bot.q.retention_policies() if p.status == "completed"} == {
        3 * 86400.0
    }
    # An operator prunes completed fetches at once; failed ones stay.
    bot.q.set_retention("completed", 0, queue=QUEUE)
    url, broken = "https://fics.example/works/43", "https://fics.example/works/44/missing"
    first = api.post("/fetch", json={"fic_url": url, "requested_by": "ada"}).json()
    failed = api.post("/fetch", json={"fic_url": broken, "requested_by": "ada"}).json()
    wait_until(lambda: len(inbox(api, "ada")) == 2)
    time.sleep(0.05)
    # A pass skips a job whose row another transaction holds at that moment (the
    # dispatcher's, marking the delivery done): it is pruned by a later pass.
    pruner, pruned = RetentionPruner(bot.q, pause=0), []
    wait_until(lambda: pruned.append(pruner.run_once()) or sum(pruned) >= 1)
    assert sum(pruned) == 1
    assert bot.q.get(first["job_id"]) is None
    # The URL's key is not retired: asking again fetches it afresh, and answers.
    fresh = api.post("/fetch", json={"fic_url": url, "requested_by": "bob"})
    assert fresh.status_code == 202 and fresh.json()["job_id"] != first["job_id"]
    assert [m["status"] for m in wait_until(lambda: inbox(api, "bob"))] == ["done"]
    again = api.post("/fetch", json={"fic_url": broken, "requested_by": "bob"}).json()
    assert again["status"] == "error" and again["job_id"] == failed["job_id"]


def test_an_error_is_reported_and_retry_asks_again(open_bot: Any) -> None:
    bot, api = open_bot()
    url = "https://fics.example/works/9/missing"
    first = api.post("/fetch", json={"fic_url": url, "requested_by": "ada"}).json()
    [told] = wait_until(lambda: inbox(api, "ada"))
    assert told["status"] == "error" and "404" in told["text"]
    again = api.post("/fetch", json={"fic_url": url, "requested_by": "bob"})
    assert again.status_code == 200 and again.json()["status"] == "error"
    assert "404" in again.json()["error_message"] and '"retry": true' in again.json()["message"]
    assert bot.q.get(first["job_id"]).attempts == 1  # type: ignore[union-attr]  # no retry
    retried = api.post("/fetch", json={"fic_url": url, "requested_by": "bob", "retry": True}).json()
    assert retried["status"] == "pending" and retried["job_id"] == first["job_id"]
    [told_bob] = wait_until(lambda: inbox(api, "bob"))
    assert told_bob["status"] == "error"
    # ada asked before and is told again of the new attempt's end
    assert len(wait_until(lambda: len(inbox(api, "ada")) == 2 and inbox(api, "ada"))) == 2


def test_a_flaky_fetch_is_retried_and_its_askers_told_once(open_bot: Any) -> None:
    bot, api = open_bot()
    reply = api.post(
        "/fetch", json={"fic_url": "https://fics.example/works/5/flaky", "requested_by": "ada"}
    )
    [told] = wait_until(lambda: inbox(api, "ada"))
    assert told["status"] == "done"
    job = bot.q.get(reply.json()["job_id"])
    assert job is not None and job.attempts == 2 and job.error is None
    assert [e.error for e in job.errors] == ["Retry: the site timed out"]
    time.sleep(1.2)
    assert len(inbox(api, "ada")) == 1


def test_a_failed_message_is_delivered_later_not_dropped(open_bot: Any) -> None:
    _, api = open_bot()
    url = "https://fics.example/works/6/slow"
    api.post("/fetch", json={"fic_url": url, "requested_by": "flaky-bob"})
    ada = api.post("/fetch", json={"fic_url": url, "requested_by": "ada"}).json()
    [told] = wait_until(lambda: inbox(api, "flaky-bob"), timeout=30)
    assert told["status"] == "done"
    time.sleep(1.2)
    assert len(inbox(api, "flaky-bob")) == 1  # told once, after the failed first try
    # ada is told too, unless the fetch had ended before she asked (then she had the result)
    assert len(inbox(api, "ada")) == (0 if ada["status"] == "done" else 1)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://fics.example/works/1", "https://fics.example/works/1"),
        ("HTTP://FICS.Example/works/1/", "https://fics.example/works/1"),
        (
            "https://fics.example:443/works/1?utm_source=x&utm_medium=y",
            "https://fics.example/works/1",
        ),
        ("https://fics.example/works/1?fbclid=abc#chapter-3", "https://fics.example/works/1"),
        (
            "https://fics.example/works/1?view=full&a=1",
            "https://fics.example/works/1?a=1&view=full",
        ),
        ("  https://fics.example:8443/works/1  ", "https://fics.example:8443/works/1"),
        ("https://bücher.example/werk", "https://xn--bcher-kva.example/werk"),
    ],
)
def test_urls_are_normalised(given: str, expected: str) -> None:
    assert normalise(given) == expected


@pytest.mark.parametrize(
    "bad",
    ["ftp://fics.example/1", "fics.example/works/1", "https://", "https://localhost/x",
     "https://127.0.0.1/x", "https://[::1]/x", "https://user:pw@fics.example/1",
     "https://fics.example:99999/1", "https://fics.example/a b", "https://-bad-.example/1",
     "https://fics.example/" + "x" * 3000, "javascript:alert(1)"],
)  # fmt: skip
def test_bad_urls_are_refused(bad: str) -> None:
    with pytest.raises(InvalidUrl):
        normalise(bad)


def test_bad_requests_are_refused_before_anything_is_queued(open_bot: Any) -> None:
    bot, api = open_bot()
    for body in (
        {"fic_url": "ftp://fics.example/1", "requested_by": "ada"},
        {"fic_url": "https://127.0.0.1/admin", "requested_by": "ada"},
        {"fic_url": "https://fics.example/1", "requested_by": ""},
        {"fic_url": "https://fics.example/1", "requested_by": "a\nb"},
        {"fic_url": "https://fics.example/1"},
        {"fic_url": "x" * 5000, "requested_by": "ada"},
        {"fic_url": "https://fics.example/1", "requested_by": "ada", "retry": "maybe"},
    ):
        answer = api.post("/fetch", json=body)
        assert answer.status_code == 422, body
        assert set(answer.json()["error"]) == {"code", "message"}
    assert bot.q.stats(QUEUE).total == 0
    assert inbox(api, "nobody") == []
    assert api.get("/users/ada/messages", params={"limit": 0}).status_code == 422


def test_the_demo_runs_from_another_directory(db_url: str, tmp_path: Path) -> None:
    done = run_module("fetch_queue", "--db", db_url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    [told] = out["messages"]["flaky-linus"]  # told once, after a failed first message
    assert told.startswith("Story slow by")
    assert out["replies"]["edsger asks for nonsense"].startswith("HTTP 422")
    assert out["replies"]["edsger asks for the story later"].startswith("done")


def test_answers_use_the_designs_names_and_timestamps(open_bot: Any) -> None:
    _, api = open_bot()
    url = "https://fics.example/works/11"
    first = api.post("/fetch", json={"fic_url": url, "requested_by": "ada"})
    assert first.status_code == 202
    body = first.json()
    assert body["status"] == "pending" and body["fic_url"] == url
    assert {"job_id", "fic_url", "status", "message", "created_at", "updated_at", "started_at",
            "completed_at"} <= set(body)  # fmt: skip
    assert not {"url", "user", "error"} & set(body)
    assert body["created_at"] and body["completed_at"] is None
    wait_until(lambda: inbox(api, "ada"))
    done = api.post("/fetch", json={"fic_url": url, "requested_by": "bob"}).json()
    assert done["status"] == "done" and done["started_at"] and done["completed_at"]
    assert done["created_at"] == body["created_at"] and done["completed_at"] >= done["started_at"]
    [message] = inbox(api, "ada")
    assert message["fic_url"] == url and "url" not in message
    assert api.get("/users/ada/messages").json()["requested_by"] == "ada"
    old = api.post("/fetch", json={"url": url, "user": "cy"})
    assert old.status_code == 422


def test_errors_and_messages_show_the_message_without_a_class_name(open_bot: Any) -> None:
    _, api = open_bot()
    url = "https://fics.example/works/12/missing"
    api.post("/fetch", json={"fic_url": url, "requested_by": "ada"})
    [told] = wait_until(lambda: inbox(api, "ada"))
    assert told["text"] == f"could not fetch {url}: the site answered 404 Not Found"
    again = api.post("/fetch", json={"fic_url": url, "requested_by": "ada"}).json()
    assert again["error_message"] == "the site answered 404 Not Found"


def test_request_bodies_are_capped(open_bot: Any) -> None:
    bot, api = open_bot()
    huge = api.post(
        "/fetch",
        content=json.dumps({"fic_url": "https://fics.example/1", "requested_by": "x" * 100_000}),
        headers={"Content-Type": "application/json"},
    )
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "payload_too_large"
    assert bot.q.stats(QUEUE).total == 0


def test_a_nul_character_in_a_user_name_is_a_422(open_bot: Any) -> None:
    _, api = open_bot()
    answer = api.get("/users/a%00b/messages")
    assert answer.status_code == 422 and "NUL" in answer.json()["error"]["message"]
    asked = api.post("/fetch", json={"fic_url": "https://fics.example/1", "requested_by": "a\x00"})
    assert asked.status_code == 422


@pytest.mark.slow
def test_a_fetch_left_by_a_crashed_server_is_pending_again_after_its_short_lease(
    db_url: str, start_server: Any
) -> None:
    url = "https://fics.example/works/13/slow"
    first = start_server(
        "fetch_queue", db_url, "--slow-seconds", "60", "--lease-seconds", "2", workers=1
    )
    with first.client() as http:
        http.post("/fetch", json={"fic_url": url, "requested_by": "ada"})
        wait_until(
            lambda: (
                http.post("/fetch", json={"fic_url": url, "requested_by": "ada"}).json()["status"]
                == "processing"
            )
        )
    first.kill()  # mid-fetch
    time.sleep(2.5)  # past its lease (it heartbeat every 2/3 s while it lived)
    second = start_server("fetch_queue", db_url, workers=0)
    with second.client() as http:
        again = http.post("/fetch", json={"fic_url": url, "requested_by": "bob"}).json()
        assert again["status"] == "pending" and again["started_at"] is not None
    assert Settings().lease == 10.0  # by default: at most 10 s, not 30 s
