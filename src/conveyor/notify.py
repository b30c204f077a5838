"""Telling a job's subscribers that it finished.

A *notifier* has one method, ``notify(job, subscribers)``. Workers whose app has one
run a dispatcher (``conveyor.maintenance.notifications``) that finds final jobs with
subscribers not yet told, calls the notifier, then records that they were told.

- ``CallbackNotifier(fn)`` calls ``fn(job, subscriber)`` in the worker process; a
  subscriber whose call raised is offered again later, after a back-off
  (``Redelivery``), and only that subscriber.
- ``WebhookNotifier()`` turns each ``http(s)://`` subscriber into a delivery *job*
  (task ``conveyor.webhook``) that POSTs the finished job as JSON. Deliveries are durable
  and retried with backoff like any job, and a delivery is enqueued at most once per
  finish of a job, however many workers announce it.

    app = conveyor.App(url, notifier=WebhookNotifier(secret="s3cret"))
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from conveyor.control import Retry, Terminal
from conveyor.job import Job
from conveyor.retry import Backoff, BackoffPolicy
from conveyor.task.registered import Task, TaskHost

if TYPE_CHECKING:
    from conveyor.task.context import Context

log = logging.getLogger("conveyor.notify")

WEBHOOK_TASK = "conveyor.webhook"
WEBHOOK_QUEUE = "conveyor.webhooks"
# Statuses a receiver may retry on; any other non-2xx answer fails the delivery for good.
_TRANSIENT = frozenset({408, 425, 429})
# How long a finished delivery keeps answering for its key, so a second announcement of
# the same finish does not POST twice.
_DEDUPE_WINDOW = timedelta(days=30)

Post = Callable[[str, bytes, dict[str, str], float], int]


@runtime_checkable
class Notifier(Protocol):
    def notify(self, job: Job, subscribers: Sequence[str]) -> None:
        """Tell ``subscribers`` that ``job`` reached a final state. Raise
        ``DeliveryFailed`` naming the subscribers not told: they are offered again after
        a back-off (the notifier's ``redelivery``, else ``Redelivery()``). Any other
        exception counts as all of them not told."""


@dataclass(frozen=True)
class Redelivery:
    """When a failed delivery is offered again: after ``base`` seconds, doubling per
    failure up to ``cap``; after ``max_attempts`` failures it is given up (counted as
    told, its last error kept)."""

    base: float = 5.0
    cap: float = 3600.0
    max_attempts: int = 10


class DeliveryFailed(Exception):
    """Raised by a notifier: these subscribers (``{subscriber: why}``) were not told;
    the others of the call were."""

    def __init__(self, failed: Mapping[str, str]) -> None:
        self.failed = dict(failed)
        super().__init__(f"{len(self.failed)} subscriber(s) not told")


class CallbackNotifier:
    """Calls ``callback(job, subscriber)`` for each subscriber, in the worker process. A
    call that raises is that subscriber's failed delivery: tried again per
    ``redelivery``."""

    def __init__(
        self, callback: Callable[[Job, str], None], *, redelivery: Redelivery | None = None
    ) -> None:
        self.callback = callback
        self.redelivery = redelivery or Redelivery()

    def notify(self, job: Job, subscribers: Sequence[str]) -> None:
        failed: dict[str, str] = {}
        for subscriber in subscribers:
            try:
                self.callback(job, subscriber)
            except Exception as exc:
                failed[subscriber] = f"{type(exc).__name__}: {exc}"
        if failed:
            raise DeliveryFailed(failed)


class WebhookNotifier:
    """POSTs ``{"event": "job.finished", "job": {...}}`` to each ``http(s)://``
    subscriber, as a retried job of its own. ``secret``: sign each body with
    HMAC-SHA256, sent as ``X-Conveyor-Signature: sha256=<hex>``. Subscribers that are not
    URLs are left to other notifiers. Only URLs you trust should become subscribers:
    the worker will connect to them."""

    def __init__(
        self,
        *,
        queue: str = WEBHOOK_QUEUE,
        max_attempts: int = 8,
        backoff: BackoffPolicy | None = None,
        timeout: float = 10.0,
        secret: str | None = None,
        post: Post | None = None,
    ) -> None:
        self.queue = queue
        self.max_attempts = max_attempts
        self.backoff = backoff or Backoff(base=5.0, cap=3600.0)
        self.timeout = timeout
        self.secret = secret
        self._post = post or http_post
        self._app: TaskHost | None = None

    def attach(self, app: TaskHost) -> None:
        """Register the delivery task on ``app`` (``App(notifier=...)`` calls this)."""
        self._app = app
        app.add(
            Task(
                app,
                self.deliver,
                name=WEBHOOK_TASK,
                queue=self.queue,
                max_attempts=self.max_attempts,
                backoff=self.backoff,
            )
        )

    def notify(self, job: Job, subscribers: Sequence[str]) -> None:
        if self._app is None:
            raise RuntimeError("WebhookNotifier: pass it to App(notifier=...) first")
        finished = job.finished_at.isoformat() if job.finished_at else "?"
        for url in subscribers:
            if not url.startswith(("http://", "https://")):
                continue
            self._app.queue.enqueue(
                WEBHOOK_TASK,
                {"url": url, "job_id": job.id},
                queue=self.queue,
                key=f"{job.id}@{finished}:{url}",
                max_attempts=self.max_attempts,
                cache_ttl=_DEDUPE_WINDOW,
                on_failed="return",
            )

    def deliver(self, ctx: Context, url: str, job_id: int) -> dict[str, Any]:
        """The delivery task: POST the job as it is now to ``url``."""
        job = ctx.queue.get(job_id)
        if job is None:
            raise Terminal(f"job {job_id} no longer exists; nothing to deliver")
        body = json.dumps({"event": "job.finished", "job": job.to_dict()}).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "conveyor-webhook",
            "X-Conveyor-Job": str(job_id),
            "X-Conveyor-Delivery": str(ctx.job.id),
        }
        if self.secret is not None:
            digest = hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
            headers["X-Conveyor-Signature"] = f"sha256={digest}"
        status = self._post(url, body, headers, self.timeout)
        if 200 <= status < 300:
            return {"status": status}
        if status in _TRANSIENT or status >= 500:
            raise Retry(f"{url} answered HTTP {status}")
        raise Terminal(f"{url} answered HTTP {status}")


def http_post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST and return the status code; connection failures raise (and are retried).
    Uses httpx when it is installed, else the standard library."""
    try:
        import httpx
    except ImportError:
        return _urllib_post(url, body, headers, timeout)
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        return client.post(url, content=body, headers=headers).status_code


def _urllib_post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
