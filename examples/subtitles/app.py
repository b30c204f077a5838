"""A video subtitle queue: ``pending → processing → completed / failed``, retries up to
``max_retries`` with back-off, a manual retry that resets attempts, crash recovery at
start-up, reconciliation ("a subtitle exists → completed") and counts per status.

The application keeps ``videos`` and ``subtitles``; a video's queue state is its job in
the ``subtitles`` queue, keyed by the video id, added in the transaction that inserts the
video. The spec's statuses are conveyor's, renamed: ``running`` is ``processing``.

The transcriber is a stand-in whose result the video id decides: an id containing
``fail`` fails every attempt (a retryable error), ``bad`` fails for good (no audio),
``slow`` takes a while; any other gets a small subtitle."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query, Response
from pydantic import BaseModel, Field

import conveyor
from examples._common import first_line
from examples._db import AppDatabase
from examples._web import ApiError, Workers, install_errors

QUEUE = "subtitles"
TASK = "subtitles.transcribe"
STATUS_NAMES = {
    conveyor.Status.PENDING: "pending",
    conveyor.Status.RUNNING: "processing",
    conveyor.Status.COMPLETED: "completed",
    conveyor.Status.FAILED: "failed",
    conveyor.Status.CANCELLED: "failed",
}
Statuses = Literal["pending", "processing", "completed", "failed"]
MAX_ID = 200
MAX_SUBTITLE = 1_000_000
MAX_CHANNEL_VIDEOS = 10_000  # a listing reads each video's state: keep a channel bounded

TABLES = """
CREATE TABLE IF NOT EXISTS videos (
    video_id   TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL,
    title      TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS videos_channel ON videos (channel_id, video_id);
CREATE TABLE IF NOT EXISTS subtitles (
    video_id   TEXT PRIMARY KEY REFERENCES videos (video_id),
    content    TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class Settings:
    max_retries: int = 3  # attempts before a video is failed
    retry_delay: float = 5.0  # the first back-off (then doubling)
    slow_seconds: float = 5.0  # how long a "slow" video takes
    reconcile_interval: float = 60.0  # seconds between reconciliations


class Subtitles:
    """The videos, their subtitles and their queue, in one database."""

    def __init__(self, url: str, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.q = conveyor.connect(url)
        self.db = AppDatabase(url)
        self.db.create(sqlite=TABLES, postgresql=TABLES)
        self.app = conveyor.App(self.q)

        @self.app.task(
            name=TASK,
            queue=QUEUE,
            max_attempts=self.settings.max_retries,
            backoff=conveyor.Backoff(base=self.settings.retry_delay, jitter=0),
        )
        def transcribe(ctx: conveyor.Context, video_id: str, title: str) -> dict[str, str]:
            return self.transcribe(video_id, title)

    def close(self) -> None:
        self.db.close()
        self.q.close()

    # -- the stand-in transcriber -------------------------------------------------------
    def transcribe(self, video_id: str, title: str) -> dict[str, str]:
        if "bad" in video_id:
            raise conveyor.Terminal(f"video {video_id} has no audio track")
        if "fail" in video_id:
            raise TimeoutError("the transcriber timed out")  # retryable
        if "slow" in video_id:
            time.sleep(self.settings.slow_seconds)
        content = f"1\n00:00:00,000 --> 00:00:02,000\n{title}\n"
        self._store(video_id, content, "transcriber")
        return {"subtitle": "transcribed"}

    def _store(self, video_id: str, content: str, source: str) -> None:
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO subtitles (video_id, content, source, created_at)"
                " VALUES (:id, :content, :source, :now) ON CONFLICT (video_id) DO UPDATE"
                " SET content = excluded.content, source = excluded.source",
                {"id": video_id, "content": content, "source": source,
                 "now": datetime.now(UTC).isoformat()},
            )  # fmt: skip

    # -- videos ---------------------------------------------------------------------------
    def add_video(self, channel_id: str, video_id: str, title: str) -> tuple[dict[str, Any], bool]:
        """A new video starts pending; adding one again changes nothing. Returns the
        video and whether it was new."""
        with self.db.transaction() as tx:
            inserted = tx.one(
                "INSERT INTO videos (video_id, channel_id, title, created_at)"
                " VALUES (:id, :channel, :title, :now)"
                " ON CONFLICT (video_id) DO NOTHING RETURNING video_id",
                {"id": video_id, "channel": channel_id, "title": title,
                 "now": datetime.now(UTC).isoformat()},
            )  # fmt: skip
            if inserted:
                self.q.enqueue(
                    TASK, {"video_id": video_id, "title": title}, queue=QUEUE, key=video_id,
                    on_completed="return", on_failed="return", conn=tx.conn,
                )  # fmt: skip
        video = self.video(video_id)
        assert video is not None
        if video["channel_id"] != channel_id:
            raise ApiError(409, f"video {video_id!r} belongs to channel {video['channel_id']!r}")
        return video, inserted is not None

    def video(self, video_id: str) -> dict[str, Any] | None:
        with self.db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM videos WHERE video_id = :id", {"id": video_id})
        return None if row is None else self._view(row)

    def _view(self, row: dict[str, Any], job: conveyor.Job | None = None) -> dict[str, Any]:
        """The video as the API shows it, from ``job`` or else the key's latest job."""
        job = job or self.q.latest(row["video_id"], queue=QUEUE)
        status = "pending" if job is None else STATUS_NAMES[job.status]
        done = job is not None and job.status == conveyor.Status.COMPLETED
        return {
            "video_id": row["video_id"],
            "channel_id": row["channel_id"],
            "title": row["title"],
            "status": status,
            "attempts": 0 if job is None else job.attempts,
            "last_error": None if job is None else first_line(job.error),
            "created_at": row["created_at"],
            "completed_at": job.finished_at.isoformat()
            if job and done and job.finished_at
            else None,
        }

    def channel(
        self, channel_id: str, status: str | None, limit: int, after: str
    ) -> dict[str, Any]:
        """The channel's videos (of ``status``), a page at a time, and its counts."""
        with self.db.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT * FROM videos WHERE channel_id = :channel ORDER BY video_id LIMIT :n",
                {"channel": channel_id, "n": MAX_CHANNEL_VIDEOS},
            )
        views = [self._view(row) for row in rows]
        counts = dict.fromkeys(("pending", "processing", "completed", "failed"), 0)
        for view in views:
            counts[view["status"]] += 1
        listed = [v for v in views if (status is None or v["status"] == status)]
        page = [v for v in listed if v["video_id"] > after][:limit]
        return {"videos": page, "counts": counts}

    def retry(self, video_id: str) -> dict[str, Any]:
        """A failed video back to pending with attempts 0 (the operator's button)."""
        with self.db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM videos WHERE video_id = :id", {"id": video_id})
        if row is None:
            raise ApiError(404, f"no video {video_id!r}")
        job = self.q.latest(video_id, queue=QUEUE)
        if job is None or job.status != conveyor.Status.FAILED:
            status = "pending" if job is None else STATUS_NAMES[job.status]
            raise ApiError(409, f"video {video_id!r} is {status}: only a failed one is retried")
        # The key's failed job is re-opened (attempts 0) in one guarded step; had it
        # changed meanwhile, the job comes back as it now is. The answer shows the job
        # as that step left it (a worker may claim it the next instant).
        reopened = self.q.enqueue(
            TASK, {"video_id": video_id, "title": row["title"]}, queue=QUEUE, key=video_id,
            on_failed="retry", on_completed="return",
        )  # fmt: skip
        return self._view(row, reopened)

    def put_subtitle(self, video_id: str, content: str) -> None:
        if self.video(video_id) is None:
            raise ApiError(404, f"no video {video_id!r}")
        self._store(video_id, content, "manual")

    # -- recovery -------------------------------------------------------------------------
    def recover_crashed_run(self) -> int:
        """Start-up: videos left processing by a run that died go back to pending (this
        server is the one working the queue)."""
        return self.q.reset_claims(0, queue=QUEUE)

    def reconcile(self) -> int:
        """Every video with a subtitle is completed, whatever the queue says (failed
        ones too). Returns how many changed."""
        completed = 0
        after = ""
        while True:
            with self.db.transaction(write=False) as tx:
                rows = tx.all(
                    "SELECT video_id FROM subtitles WHERE video_id > :after"
                    " ORDER BY video_id LIMIT 500",
                    {"after": after},
                )
            if not rows:
                return completed
            for row in rows:
                completed += self.q.complete_by_key(
                    row["video_id"], queue=QUEUE, include_failed=True,
                    result={"subtitle": "found"},
                )  # fmt: skip
            after = rows[-1]["video_id"]


class Reconciler:
    """Reconciliation on a timer, on a thread of the server."""

    def __init__(self, subtitles: Subtitles, interval: float) -> None:
        self.subtitles = subtitles
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reconcile", daemon=True)

    def start(self) -> None:
        if self.interval > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.subtitles.reconcile()
            except conveyor.ConveyorError as exc:  # the database is away: next time
                import logging

                logging.getLogger("examples.subtitles").warning("reconcile failed: %s", exc)


# -- the HTTP API -------------------------------------------------------------------------
Id = Annotated[str, Path(min_length=1, max_length=MAX_ID, pattern=r"^[A-Za-z0-9_.:-]+$")]


class NewVideo(BaseModel):
    video_id: str = Field(min_length=1, max_length=MAX_ID, pattern=r"^[A-Za-z0-9_.:-]+$")
    title: str = Field(min_length=1, max_length=500)


class Subtitle(BaseModel):
    content: str = Field(min_length=1, max_length=MAX_SUBTITLE)


def create_api(subtitles: Subtitles, *, workers: int = 2) -> FastAPI:
    runner = Workers(subtitles.app, concurrency=workers, lease=30)
    timer = Reconciler(subtitles, subtitles.settings.reconcile_interval)

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        subtitles.recover_crashed_run()
        subtitles.reconcile()
        runner.start()
        timer.start()
        yield
        timer.stop()
        runner.stop()

    api = FastAPI(title="subtitles", lifespan=lifespan)
    install_errors(api)

    @api.post("/channels/{channel_id}/videos")
    def add_video(channel_id: Id, body: NewVideo, response: Response) -> dict[str, Any]:
        video, new = subtitles.add_video(channel_id, body.video_id, body.title)
        response.status_code = 201 if new else 200
        return video

    @api.get("/channels/{channel_id}/videos")
    def list_videos(
        channel_id: Id,
        status: Statuses | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        after: Annotated[str, Query(max_length=MAX_ID)] = "",
    ) -> dict[str, Any]:
        return subtitles.channel(channel_id, status, limit, after)

    @api.get("/videos/{video_id}")
    def get_video(video_id: Id) -> dict[str, Any]:
        video = subtitles.video(video_id)
        if video is None:
            raise ApiError(404, f"no video {video_id!r}")
        return video

    @api.post("/videos/{video_id}/retry")
    def retry(video_id: Id) -> dict[str, Any]:
        return subtitles.retry(video_id)

    @api.put("/videos/{video_id}/subtitle")
    def put_subtitle(video_id: Id, body: Subtitle) -> dict[str, Any]:
        subtitles.put_subtitle(video_id, body.content)
        return {"video_id": video_id, "subtitle": True}

    @api.post("/reconcile")
    def reconcile() -> dict[str, int]:
        return {"completed": subtitles.reconcile()}

    @api.get("/healthz", include_in_schema=False)
    def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    return api
