"""Telling subscribers that their job finished: the dispatcher, callbacks, webhooks."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import conveyor
from conveyor import App, Context
from conveyor.job import Job, Status
from conveyor.maintenance import Dispatcher
from conveyor.notify import (
    WEBHOOK_QUEUE,
    WEBHOOK_TASK,
    CallbackNotifier,
    Redelivery,
    WebhookNotifier,
)
from tests.worker.conftest import burst


class Told:
    def __init__(self) -> None:
        self.calls: list[tuple[int, str, str]] = []

    def __call__(self, job: Job, subscriber: str) -> None:
        self.calls.append((job.id, str(job.status), subscriber))


def test_every_subscriber_of_a_finished_job_is_told_once(q: conveyor.Queue) -> None:
    told = Told()
    dispatcher = Dispatcher(q, CallbackNotifier(told))
    job = q.enqueue("fetch", key="url", subscriber="alice")
    q.enqueue("fetch", key="url", subscriber="bob")  # joins the running job
    other = q.enqueue("fetch", subscriber="carol")
    assert dispatcher.run_once() == 0  # nothing final yet
    claim = q.claim(limit=2)
    q.complete(job.id, claim.id, {"ok": True})
    q.cancel(other.id)
    assert dispatcher.run_once() == 3
    assert sorted(told.calls) == [
        (job.id, "completed", "alice"), (job.id, "completed", "bob"),
        (other.id, "cancelled", "carol"),
    ]  # fmt: skip
    assert dispatcher.run_once() == 0
    q.retry(job.id)  # finishing again is news again
    q.complete(job.id, q.claim(limit=1).id)
    assert dispatcher.run_once() == 2


def test_a_failed_delivery_is_retried_after_a_back_off_not_marked_told(
    q: conveyor.Queue,
) -> None:
    calls: list[str] = []

    def closed_once(job: Job, subscriber: str) -> None:
        calls.append(subscriber)
        if subscriber == "a" and calls.count("a") == 1:
            raise RuntimeError("direct messages closed")

    job = q.enqueue("t", key="k", subscriber="a")
    q.enqueue("t", key="k", subscriber="b")
    q.cancel(job.id)
    notifier = CallbackNotifier(closed_once, redelivery=Redelivery(base=0.2, max_attempts=3))
    dispatcher = Dispatcher(q, notifier)
    assert dispatcher.run_once() == 1  # b told; a's failure does not stall b
    assert dispatcher.run_once() == 0  # a is backing off
    time.sleep(0.3)
    assert dispatcher.run_once() == 1 and calls == ["a", "b", "a"]  # told once, later
    assert dispatcher.run_once() == 0


def test_a_delivery_that_keeps_failing_is_given_up(q: conveyor.Queue) -> None:
    calls: list[str] = []

    def broken(job: Job, subscriber: str) -> None:
        calls.append(subscriber)
        raise RuntimeError("no")

    q.enqueue("t", subscriber="a")
    q.cancel(q.jobs()[0].id)
    redelivery = Redelivery(base=0.01, max_attempts=3)
    dispatcher = Dispatcher(q, CallbackNotifier(broken, redelivery=redelivery))
    for _ in range(5):
        assert dispatcher.run_once() == 0
        time.sleep(0.1)  # longer than any back-off here (0.01, 0.02)
    assert calls == ["a", "a", "a"]  # three failed deliveries, then given up
    assert q.take_notifications() == []


def test_a_worker_tells_subscribers_through_the_apps_notifier(q: conveyor.Queue) -> None:
    told = Told()
    app = App(q, notifier=CallbackNotifier(told))

    @app.task
    def work(ctx: Context) -> str:
        return "done"

    job = work.using(subscriber="chat:42").enqueue()
    burst(app)
    assert told.calls == [(job.id, "completed", "chat:42")]


class _Receiver(BaseHTTPRequestHandler):
    answers: list[int] = []
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        status = self.answers.pop(0) if self.answers else 200
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"answers": [], "received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    server.shutdown()
    server.server_close()


def test_webhook_deliveries_are_jobs_retried_until_the_receiver_accepts(
    q: conveyor.Queue, receiver: tuple[str, type[_Receiver]]
) -> None:
    url, handler = receiver
    handler.answers = [503, 500]  # two failures, then 200
    app = App(q, notifier=WebhookNotifier(secret="s3cret", backoff=conveyor.Fixed(0)))

    @app.task
    def work(ctx: Context) -> dict[str, int]:
        return {"answer": 42}

    job = work.using(subscriber=url).enqueue()
    burst(app)
    deliveries = q.jobs(queue=WEBHOOK_QUEUE)
    assert len(deliveries) == 1
    delivery = deliveries[0]
    assert (delivery.task, delivery.status, delivery.attempts) == (
        WEBHOOK_TASK,
        Status.COMPLETED,
        3,
    )
    assert len(handler.received) == 3
    headers, body = handler.received[-1]
    sent = json.loads(body)
    assert sent["event"] == "job.finished" and sent["job"]["id"] == job.id
    assert sent["job"]["result"] == {"answer": 42} and sent["job"]["status"] == "completed"
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["X-Conveyor-Signature"] == f"sha256={expected}"


def test_a_webhook_refused_with_a_client_error_is_not_retried(
    q: conveyor.Queue, receiver: tuple[str, type[_Receiver]]
) -> None:
    url, handler = receiver
    handler.answers = [404]
    app = App(q, notifier=WebhookNotifier(backoff=conveyor.Fixed(0)))
    app.task(name="work")(lambda ctx: 1).using(subscriber=url).enqueue()
    burst(app)
    delivery = q.jobs(queue=WEBHOOK_QUEUE)[0]
    assert delivery.status == Status.FAILED and delivery.attempts == 1
    assert "HTTP 404" in (delivery.error or "")


def test_announcing_the_same_finish_twice_enqueues_one_delivery(q: conveyor.Queue) -> None:
    notifier = WebhookNotifier()
    App(q, notifier=notifier)
    job = q.enqueue("t", subscriber="https://example.invalid/hook")
    q.cancel(job.id)
    finished = q.get(job.id)
    assert finished is not None
    notifier.notify(finished, ["https://example.invalid/hook", "not-a-url"])
    notifier.notify(finished, ["https://example.invalid/hook"])  # a second worker's pass
    assert len(q.jobs(queue=WEBHOOK_QUEUE)) == 1


def test_the_same_webhook_notifier_can_be_attached_again(q: conveyor.Queue) -> None:
    notifier = WebhookNotifier()
    app = App(q, notifier=notifier)
    app.use_notifier(notifier)
    assert app.get_task(WEBHOOK_TASK) is not None
    assert WEBHOOK_QUEUE in app.queues
