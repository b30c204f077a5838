"""A chat bot's fetch queue: one fetch per story URL however many people ask, every
asker told once when it ends, results cached for a while, errors reported with a way to
ask again.

``POST /fetch {fic_url, requested_by}`` answers at once with the job's state in the
design's words: ``pending``, ``processing`` (the user is subscribed to the running job),
``done`` (the cached result) or ``error`` (``{"retry": true}`` asks again), with the
job's timestamps. A worker fetches; when the
job ends, conveyor's dispatcher hands every subscriber to ``deliver``, which sends the
direct message (here: a row in ``messages``, what ``GET /users/{user}/messages`` shows).
A delivery that fails is offered again after a back-off, never dropped.

The fan-fiction site is a stand-in whose answer the URL decides: a path ending in
``/missing`` is a 404 (fails for good), ``/flaky`` times out once then answers, ``/slow``
takes a while. The chat platform is one too: a user whose name starts with ``flaky``
cannot be messaged the first time."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Path, Query, Response
from pydantic import BaseModel, Field
from starlette.types import ASGIApp

import conveyor
from conveyor.notify import CallbackNotifier, Redelivery
from examples._common import declare_retention, user_message
from examples._db import AppDatabase
from examples._web import ApiError, BodyLimit, NoNul, Workers, install_errors
from examples.fetch_queue.urls import MAX_URL, InvalidUrl, normalise

QUEUE = "fetches"
TASK = "fetch_queue.fetch"
MAX_USER = 100
MAX_BODY = 16 * 1024  # a URL of 2,048 characters and a user name, with room to spare
# A completed fetch is the cached result for ``cache_ttl``, kept at least a day; a failed
# one is what asking again answers (``error``, until ``"retry": true``) for a week, then a
# request fetches afresh. No keys are retired: once its job is gone, a URL is fetched again
# (a retired record has no result to answer with).
KEEP_COMPLETED = timedelta(days=1)
KEEP_FAILED = timedelta(days=7)

TABLES = {
    "sqlite": """
CREATE TABLE IF NOT EXISTS messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     TEXT NOT NULL,
    job_id      INTEGER NOT NULL,
    finished_at TEXT NOT NULL,
    url         TEXT NOT NULL,
    status      TEXT NOT NULL,
    text        TEXT NOT NULL,
    sent_at     TEXT NOT NULL,
    UNIQUE (user_id, job_id, finished_at)
)""",
    "postgresql": """
CREATE TABLE IF NOT EXISTS messages (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     TEXT NOT NULL,
    job_id      BIGINT NOT NULL,
    finished_at TEXT NOT NULL,
    url         TEXT NOT NULL,
    status      TEXT NOT NULL,
    text        TEXT NOT NULL,
    sent_at     TEXT NOT NULL,
    UNIQUE (user_id, job_id, finished_at)
)""",
    # MySQL indexes text of a bounded length only.
    "mysql": f"""
CREATE TABLE IF NOT EXISTS messages (
    id          BIGINT AUTO_INCREMENT PRIMARY KEY,
    user_id     VARCHAR({MAX_USER}) NOT NULL,
    job_id      BIGINT NOT NULL,
    finished_at VARCHAR(40) NOT NULL,
    url         TEXT NOT NULL,
    status      VARCHAR(20) NOT NULL,
    text        TEXT NOT NULL,
    sent_at     VARCHAR(40) NOT NULL,
    UNIQUE (user_id, job_id, finished_at)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin""",
}


@dataclass(frozen=True)
class Settings:
    cache_ttl: float = 6 * 3600.0  # how long a fetched result answers later requests
    retry_delay: float = 2.0  # the first back-off of a failed fetch (then doubling)
    max_attempts: int = 3
    slow_seconds: float = 2.0  # how long a /slow page takes
    redelivery_delay: float = 5.0  # the first back-off of a failed direct message
    # A fetch's lease, renewed by heartbeats (every third of it) while it runs: after a
    # crash, the fetch reads ``processing`` at most this long before it is recovered.
    lease: float = 10.0


def retention(settings: Settings) -> dict[str, timedelta | None]:
    """The ``fetches`` queue's retention: a completed fetch at least as long as it answers
    as the cached result."""
    completed = max(KEEP_COMPLETED, timedelta(seconds=settings.cache_ttl))
    return {"completed": completed, "failed": KEEP_FAILED, "cancelled": KEEP_COMPLETED}


class Site:
    """The stand-in fan-fiction site."""

    def __init__(self, slow_seconds: float) -> None:
        self.slow_seconds = slow_seconds

    def fetch(self, url: str, attempt: int) -> dict[str, Any]:
        path = urlsplit(url).path
        if path.endswith("/missing"):
            raise conveyor.Terminal("the site answered 404 Not Found")
        if path.endswith("/flaky") and attempt == 1:
            raise conveyor.Retry("the site timed out")
        if path.endswith("/slow"):
            time.sleep(self.slow_seconds)
        digest = int(hashlib.sha256(url.encode()).hexdigest(), 16)
        name = path.rsplit("/", 1)[-1] or "untitled"
        return {
            "url": url,
            "title": f"Story {name}",
            "author": f"author{digest % 1000}",
            "words": 1000 + digest % 200_000,
        }


class Chat:
    """The stand-in chat platform: a direct message is a row in ``messages``."""

    def __init__(self, db: AppDatabase) -> None:
        self.db = db
        self._tried: set[tuple[int, str, str]] = set()
        self._lock = threading.Lock()

    def deliver(self, job: conveyor.Job, user: str) -> None:
        finished = job.finished_at.isoformat() if job.finished_at else ""
        if user.startswith("flaky"):
            with self._lock:
                first = (job.id, finished, user) not in self._tried
                self._tried.add((job.id, finished, user))
            if first:
                raise ConnectionError(f"cannot open a direct message to {user} right now")
        url = job.payload["url"]
        if job.status == conveyor.Status.COMPLETED:
            status, text = "done", f"{job.result['title']} by {job.result['author']}"
        else:
            status = "error"
            text = f"could not fetch {url}: {user_message(job.error) or job.status}"
        with self.db.transaction() as tx:
            # Unique per finish of the job: a delivery offered twice is sent once.
            insert = (
                "INSERT INTO messages (user_id, job_id, finished_at, url, status, text, sent_at)"
                " VALUES (:user, :job, :finished, :url, :status, :text, :now)"
            )
            now = datetime.now(UTC).isoformat()
            params = {"user": user, "job": job.id, "finished": finished, "url": url,
                      "status": status, "text": text, "now": now}  # fmt: skip
            if tx.dialect == "mysql":
                tx.insert_new(insert, params)
            else:
                tx.execute(insert + " ON CONFLICT (user_id, job_id, finished_at) DO NOTHING",
                           params)  # fmt: skip

    def messages(self, user: str, limit: int) -> list[dict[str, Any]]:
        with self.db.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT job_id, url AS fic_url, status, text, sent_at FROM messages"
                " WHERE user_id = :user ORDER BY id LIMIT :limit",
                {"user": user, "limit": limit},
            )
        return rows


class FetchBot:
    """The queue, the site, the chat, and what the bot answers."""

    def __init__(self, url: str, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.q = conveyor.connect(url)
        declare_retention(self.q, QUEUE, retention(self.settings), retire_keys=False)
        self.db = AppDatabase(url)
        self.db.create(
            sqlite=TABLES["sqlite"], postgresql=TABLES["postgresql"], mysql=TABLES["mysql"]
        )
        self.site = Site(self.settings.slow_seconds)
        self.chat = Chat(self.db)
        redelivery = Redelivery(base=self.settings.redelivery_delay)
        self.app = conveyor.App(
            self.q, notifier=CallbackNotifier(self.chat.deliver, redelivery=redelivery)
        )

        @self.app.task(
            name=TASK,
            queue=QUEUE,
            max_attempts=self.settings.max_attempts,
            backoff=conveyor.Backoff(base=self.settings.retry_delay, jitter=0),
            timeout=60,
        )
        def fetch(ctx: conveyor.Context, url: str) -> dict[str, Any]:
            return self.site.fetch(url, ctx.attempt)

    def close(self) -> None:
        self.db.close()
        self.q.close()

    def request(self, url: str, user: str, *, retry: bool = False) -> dict[str, Any]:
        """What the bot answers the moment someone asks for a URL."""
        try:
            key = normalise(url)
        except InvalidUrl as exc:
            raise ApiError(422, str(exc), code="invalid_url") from None
        job = self.q.enqueue(
            TASK,
            {"url": key},
            queue=QUEUE,
            key=key,
            subscriber=user,
            cache_ttl=timedelta(seconds=self.settings.cache_ttl),
            on_failed="retry" if retry else "return",
        )
        return answer(job)


def answer(job: conveyor.Job) -> dict[str, Any]:
    """The job in the design's words: ``pending``, ``processing``, ``done`` or ``error``,
    with ``fic_url``, ``error_message`` and the job's timestamps."""
    out: dict[str, Any] = {
        "job_id": job.id,
        "fic_url": job.payload["url"],
        "created_at": job.created_at.isoformat(),
        "updated_at": job.updated_at.isoformat(),
        "started_at": _iso(job.started_at),
        "completed_at": _iso(job.finished_at) if job.is_final else None,
    }
    if job.status == conveyor.Status.PENDING:
        again = "retrying it" if job.deduplicated and job.attempts else "queued"
        return out | {"status": "pending",
                      "message": f"{again}; you will be told when it is done"}  # fmt: skip
    if job.status == conveyor.Status.RUNNING:
        message = "already being fetched; you will be told when it is done"
        return out | {"status": "processing", "message": message}
    if job.status == conveyor.Status.COMPLETED:
        return out | {"status": "done", "message": "fetched earlier", "result": job.result}
    return out | {
        "status": "error",
        "error_message": user_message(job.error) or f"the fetch was {job.status}",
        "message": 'fetching failed; send {"retry": true} to try again',
    }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


class FetchRequest(BaseModel):
    fic_url: str = Field(min_length=1, max_length=MAX_URL)
    requested_by: str = Field(min_length=1, max_length=MAX_USER, pattern=r"^[^\x00-\x1f\x7f]+$")
    retry: bool = False


User = Annotated[str, Path(min_length=1, max_length=MAX_USER), NoNul]


def create_api(bot: FetchBot, *, workers: int = 2) -> ASGIApp:
    runner = Workers(bot.app, concurrency=workers, lease=bot.settings.lease)

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        runner.start()
        yield
        runner.stop()

    api = FastAPI(title="fetch queue", lifespan=lifespan)
    install_errors(api)

    @api.post("/fetch")
    def fetch(body: FetchRequest, response: Response) -> dict[str, Any]:
        reply = bot.request(body.fic_url, body.requested_by, retry=body.retry)
        if reply["status"] in ("pending", "processing"):
            response.status_code = 202
        return reply

    @api.get("/users/{user}/messages")
    def messages(user: User, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
        return {"requested_by": user, "messages": bot.chat.messages(user, limit)}

    @api.get("/healthz", include_in_schema=False)
    def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    return BodyLimit(api, MAX_BODY)
