"""A video subtitle queue: ``pending → processing → completed / failed``, retries up to
``max_retries`` with back-off, a manual retry that resets attempts, crash recovery,
reconciliation ("a subtitle exists → completed") and counts per status.

The application keeps ``videos`` and ``subtitles``. Each video has a job in the
``subtitles`` queue, keyed by the video id, added in the transaction that inserts the
video; conveyor claims, retries and recovers it. The video's row keeps the application's
own record of its state (``status``, ``attempts``, ``last_error``, ``completed_at``),
written by the task as it starts, fails and finishes — a completion in the transaction
that stores the subtitle — so listing and counting a channel are one query each, and a
completed video stays completed after conveyor's history is pruned.

The transcriber is a stand-in whose result the video id decides: an id containing
``fail`` fails every attempt (a retryable error), ``bad`` fails for good (no audio),
``slow`` takes a while; any other gets a small subtitle."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query, Response
from pydantic import BaseModel, Field
from starlette.types import ASGIApp

import conveyor
from examples._common import declare_retention, user_message
from examples._db import AppDatabase, Tx
from examples._web import ApiError, BodyLimit, NoNul, Workers, install_errors

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
MAX_BODY = 4 * 1024 * 1024  # a subtitle of 1,000,000 characters, JSON-escaped
# The queue's history is pruned after these; the video ids stay taken (retired keys),
# so a video's job reads as it ended even after its row is gone.
RETENTION = {
    "completed": timedelta(days=7),
    "failed": timedelta(days=30),
    "cancelled": timedelta(days=7),
}

TABLES = """
CREATE TABLE IF NOT EXISTS videos (
    video_id     TEXT PRIMARY KEY,
    channel_id   TEXT NOT NULL,
    title        TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    completed_at TEXT
);
CREATE INDEX IF NOT EXISTS videos_channel ON videos (channel_id, video_id);
CREATE INDEX IF NOT EXISTS videos_channel_status ON videos (channel_id, status, video_id);
CREATE TABLE IF NOT EXISTS subtitles (
    video_id   TEXT PRIMARY KEY REFERENCES videos (video_id),
    content    TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""


# MySQL indexes text of a bounded length only.
MYSQL_TABLES = f"""
CREATE TABLE IF NOT EXISTS videos (
    video_id     VARCHAR({MAX_ID}) PRIMARY KEY,
    channel_id   VARCHAR({MAX_ID}) NOT NULL,
    title        TEXT NOT NULL,
    created_at   VARCHAR(40) NOT NULL,
    status       VARCHAR(20) NOT NULL DEFAULT 'pending',
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT,
    completed_at VARCHAR(40),
    INDEX videos_channel (channel_id, video_id),
    INDEX videos_channel_status (channel_id, status, video_id)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE TABLE IF NOT EXISTS subtitles (
    video_id   VARCHAR({MAX_ID}) PRIMARY KEY,
    content    LONGTEXT NOT NULL,
    source     VARCHAR(20) NOT NULL,
    created_at VARCHAR(40) NOT NULL,
    FOREIGN KEY (video_id) REFERENCES videos (video_id)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
"""


UPGRADE = (
    "status TEXT NOT NULL DEFAULT 'pending'",
    "attempts INTEGER NOT NULL DEFAULT 0",
    "last_error TEXT",
    "completed_at TEXT",
)


@dataclass(frozen=True)
class Settings:
    max_retries: int = 3  # attempts before a video is failed
    retry_delay: float = 5.0  # the first back-off (then doubling)
    slow_seconds: float = 5.0  # how long a "slow" video takes
    reconcile_interval: float = 60.0  # seconds between reconciliations
    lease: float = 30.0  # a claim's lease: a run that died is recovered after this long


class Subtitles:
    """The videos, their subtitles and their queue, in one database."""

    def __init__(self, url: str, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.q = conveyor.connect(url)
        declare_retention(self.q, QUEUE, RETENTION, retire_keys=True)
        self.db = AppDatabase(url)
        self._upgrade()
        self.db.create(sqlite=TABLES, postgresql=TABLES, mysql=MYSQL_TABLES)
        self.app = conveyor.App(self.q)

        @self.app.task(
            name=TASK,
            queue=QUEUE,
            max_attempts=self.settings.max_retries,
            backoff=conveyor.Backoff(base=self.settings.retry_delay, jitter=0),
        )
        def transcribe(ctx: conveyor.Context, video_id: str, title: str) -> dict[str, str]:
            return self.run(ctx, video_id, title)

    def close(self) -> None:
        self.db.close()
        self.q.close()

    def _upgrade(self) -> None:
        """A database of the version that kept no state in ``videos``: add the columns,
        and take each video's state from its job once."""
        try:
            with self.db.transaction(write=False) as tx:
                cur = tx.conn.cursor()
                cur.execute("SELECT * FROM videos WHERE 1 = 0")
                columns = {d[0] for d in cur.description}
        except Exception:
            return  # no table yet: created next
        if "status" in columns:
            return
        with self.db.transaction() as tx:
            for column in UPGRADE:
                tx.execute(f"ALTER TABLE videos ADD COLUMN {column}")
            ids = [r["video_id"] for r in tx.all("SELECT video_id FROM videos")]
        for video_id in ids:
            job = self.q.latest(video_id, queue=QUEUE)
            if job is None:
                continue
            with self.db.transaction() as tx:
                tx.execute(
                    "UPDATE videos SET status = :status, attempts = :attempts,"
                    " last_error = :error, completed_at = :done WHERE video_id = :id",
                    {"id": video_id, "status": STATUS_NAMES[job.status],
                     "attempts": job.attempts, "error": user_message(job.error),
                     "done": job.finished_at.isoformat()
                     if job.status == conveyor.Status.COMPLETED and job.finished_at else None},
                )  # fmt: skip

    # -- the task -------------------------------------------------------------------------
    def run(self, ctx: conveyor.Context, video_id: str, title: str) -> dict[str, str]:
        """One attempt at a video, recorded in its row: ``processing`` as it starts,
        ``completed`` with the subtitle, else ``pending`` (a retry follows) or
        ``failed``. A video completed meanwhile (reconciled) is left alone."""
        started = self.db.retried(
            lambda tx: tx.execute(
                "UPDATE videos SET status = 'processing', attempts = :attempt"
                " WHERE video_id = :id AND status <> 'completed'",
                {"id": video_id, "attempt": ctx.attempt},
            )
        )
        if not started:
            return {"subtitle": "completed before this run"}
        try:
            content = self.transcribe(video_id, title)
        except Exception as exc:
            final = isinstance(exc, conveyor.Terminal) or ctx.attempt >= ctx.job.max_attempts
            params = {"id": video_id, "status": "failed" if final else "pending",
                      "error": str(exc).split("\n", 1)[0] or type(exc).__name__}  # fmt: skip
            self.db.retried(
                lambda tx: tx.execute(
                    "UPDATE videos SET status = :status, last_error = :error"
                    " WHERE video_id = :id AND status = 'processing'",
                    params,
                )
            )
            raise
        stored = self._complete(video_id, content, "transcriber")
        return {"subtitle": "transcribed" if stored else "kept the one found meanwhile"}

    # -- the stand-in transcriber -------------------------------------------------------
    def transcribe(self, video_id: str, title: str) -> str:
        if "bad" in video_id:
            raise conveyor.Terminal(f"video {video_id} has no audio track")
        if "fail" in video_id:
            raise TimeoutError("the transcriber timed out")  # retryable
        if "slow" in video_id:
            time.sleep(self.settings.slow_seconds)
        return f"1\n00:00:00,000 --> 00:00:02,000\n{title}\n"

    def _complete(self, video_id: str, content: str, source: str) -> bool:
        """Store the transcriber's subtitle and complete the video, in one transaction.
        A subtitle already there (the operator's) wins: this one is dropped. Returns
        whether it was stored."""
        insert = (
            "INSERT INTO subtitles (video_id, content, source, created_at)"
            " VALUES (:id, :content, :source, :now)"
        )
        params = {"id": video_id, "content": content, "source": source, "now": _now()}

        def store(tx: Tx) -> bool:
            if tx.dialect == "mysql":
                stored = tx.insert_new(insert, params)
            else:
                stored = tx.execute(insert + " ON CONFLICT (video_id) DO NOTHING", params) > 0
            self._mark_completed(tx, video_id)
            return stored

        return self.db.retried(store)

    @staticmethod
    def _mark_completed(tx: Tx, video_id: str) -> int:
        return tx.execute(
            "UPDATE videos SET status = 'completed', last_error = NULL, completed_at = :now"
            " WHERE video_id = :id AND status <> 'completed'",
            {"id": video_id, "now": _now()},
        )

    # -- videos ---------------------------------------------------------------------------
    def add_video(self, channel_id: str, video_id: str, title: str) -> tuple[dict[str, Any], bool]:
        """A new video starts pending; adding one again changes nothing. Returns the
        video and whether it was new."""
        insert = (
            "INSERT INTO videos (video_id, channel_id, title, created_at)"
            " VALUES (:id, :channel, :title, :now)"
        )
        params = {"id": video_id, "channel": channel_id, "title": title, "now": _now()}

        def add(tx: Tx) -> bool:
            if tx.dialect == "mysql":
                inserted = tx.insert_new(insert, params)
            else:
                returned = tx.one(
                    insert + " ON CONFLICT (video_id) DO NOTHING RETURNING video_id", params
                )
                inserted = returned is not None
            if inserted:
                self.q.enqueue(
                    TASK, {"video_id": video_id, "title": title}, queue=QUEUE, key=video_id,
                    on_completed="return", on_failed="return", conn=tx.conn,
                )  # fmt: skip
            return inserted

        inserted = self.db.retried(add)
        video = self.video(video_id)
        assert video is not None
        if video["channel_id"] != channel_id:
            raise ApiError(409, f"video {video_id!r} belongs to channel {video['channel_id']!r}")
        return video, inserted

    def video(self, video_id: str) -> dict[str, Any] | None:
        with self.db.transaction(write=False) as tx:
            row = tx.one(f"SELECT {FIELDS} FROM videos WHERE video_id = :id", {"id": video_id})
        if row is not None and row["status"] == "processing":
            row = self._settle(video_id) or row  # its run may have died: the queue knows
        return row

    def channel(
        self, channel_id: str, status: str | None, limit: int, after: str
    ) -> dict[str, Any]:
        """The channel's videos (of ``status``), a page at a time, and its counts: two
        queries, whatever the channel's size."""
        where = "channel_id = :channel AND video_id > :after"
        if status is not None:
            where += " AND status = :status"
        params = {"channel": channel_id, "after": after, "status": status, "n": limit}
        with self.db.transaction(write=False) as tx:
            page = tx.all(
                f"SELECT {FIELDS} FROM videos WHERE {where} ORDER BY video_id LIMIT :n", params
            )
            rows = tx.all(
                "SELECT status, count(*) AS n FROM videos WHERE channel_id = :channel"
                " GROUP BY status",
                {"channel": channel_id},
            )
        counts = dict.fromkeys(("pending", "processing", "completed", "failed"), 0)
        for row in rows:
            counts[row["status"]] = int(row["n"])
        return {"videos": page, "counts": counts}

    def retry(self, video_id: str) -> dict[str, Any]:
        """A failed video back to pending with attempts 0 (the operator's button)."""

        def reopen(tx: Tx) -> None:
            row = tx.one("SELECT title, status FROM videos WHERE video_id = :id", {"id": video_id})
            if row is None:
                raise ApiError(404, f"no video {video_id!r}")
            if row["status"] != "failed":
                raise ApiError(
                    409, f"video {video_id!r} is {row['status']}: only a failed one is retried"
                )
            # The key's failed job is re-opened (attempts 0) — or, if it was pruned, a new
            # one added — in the transaction that resets the video's row.
            self.q.enqueue(
                TASK, {"video_id": video_id, "title": row["title"]}, queue=QUEUE,
                key=video_id, on_failed="retry", on_completed="return", conn=tx.conn,
            )  # fmt: skip
            tx.execute(
                "UPDATE videos SET status = 'pending', attempts = 0, last_error = NULL"
                " WHERE video_id = :id",
                {"id": video_id},
            )

        self.db.retried(reopen)
        video = self.video(video_id)
        assert video is not None
        return video

    def put_subtitle(self, video_id: str, content: str) -> None:
        """The operator's subtitle: stored (replacing any), reconciliation completes the
        video; a transcriber finishing later keeps it."""
        with self.db.transaction() as tx:
            if tx.one("SELECT 1 AS x FROM videos WHERE video_id = :id", {"id": video_id}) is None:
                raise ApiError(404, f"no video {video_id!r}")
            upsert = (
                " ON DUPLICATE KEY UPDATE content = VALUES(content), source = VALUES(source)"
                if tx.dialect == "mysql"
                else " ON CONFLICT (video_id) DO UPDATE"
                " SET content = excluded.content, source = excluded.source"
            )
            tx.execute(
                "INSERT INTO subtitles (video_id, content, source, created_at)"
                " VALUES (:id, :content, 'manual', :now)" + upsert,
                {"id": video_id, "content": content, "now": _now()},
            )

    def subtitle(self, video_id: str) -> dict[str, Any] | None:
        with self.db.transaction(write=False) as tx:
            return tx.one(
                "SELECT content, source FROM subtitles WHERE video_id = :id", {"id": video_id}
            )

    # -- recovery -------------------------------------------------------------------------
    def recover(self) -> int:
        """Start-up: claims whose lease expired (their run died) are recovered — back to
        pending, or failed with their attempts spent — and the videos' rows follow.
        Live claims, of workers in other processes, are left alone."""
        recovered = self.q.recover(queue=QUEUE)
        self.settle_processing()
        return recovered

    def settle_processing(self) -> int:
        """Videos whose row says ``processing`` while their job is no longer running (a
        run that died, its lease recovered) take the job's state. Returns how many."""
        changed = 0
        after = ""
        while True:
            with self.db.transaction(write=False) as tx:
                rows = tx.all(
                    "SELECT video_id FROM videos WHERE status = 'processing'"
                    " AND video_id > :after ORDER BY video_id LIMIT 500",
                    {"after": after},
                )
            if not rows:
                return changed
            for row in rows:
                changed += self._settle(row["video_id"]) is not None
            after = rows[-1]["video_id"]

    def _settle(self, video_id: str) -> dict[str, Any] | None:
        """A ``processing`` video whose job is not running takes the job's state; returns
        the video as changed, or None when nothing changed."""
        job = self.q.latest(video_id, queue=QUEUE)  # an expired lease is recovered here
        if job is None or job.status == conveyor.Status.RUNNING:
            return None
        status = STATUS_NAMES[job.status]
        with self.db.transaction() as tx:
            if status == "completed":
                changed = self._mark_completed(tx, video_id)
            else:
                changed = tx.execute(
                    "UPDATE videos SET status = :status, attempts = :attempts,"
                    " last_error = :error WHERE video_id = :id AND status = 'processing'",
                    {"id": video_id, "status": status, "attempts": job.attempts,
                     "error": user_message(job.error)},
                )  # fmt: skip
            row = tx.one(f"SELECT {FIELDS} FROM videos WHERE video_id = :id", {"id": video_id})
        return row if changed else None

    def reconcile(self) -> int:
        """Every video with a subtitle is completed, whatever the queue says (failed
        ones too), its job in the same transaction. Returns how many changed."""
        completed = 0
        after = ""
        while True:
            with self.db.transaction(write=False) as tx:
                rows = tx.all(
                    "SELECT s.video_id FROM subtitles s JOIN videos v ON v.video_id = s.video_id"
                    " WHERE v.status <> 'completed' AND s.video_id > :after"
                    " ORDER BY s.video_id LIMIT 500",
                    {"after": after},
                )
            if not rows:
                return completed
            for row in rows:
                completed += self.db.retried(partial(self._reconcile_one, row["video_id"]))
            after = rows[-1]["video_id"]

    def _reconcile_one(self, video_id: str, tx: Tx) -> bool:
        """The video completed and its job with it; False when it was already."""
        if not self._mark_completed(tx, video_id):
            return False
        self.q.complete_by_key(
            video_id, queue=QUEUE, include_failed=True, result={"subtitle": "found"},
            conn=tx.conn,
        )  # fmt: skip
        return True


def _now() -> str:
    return datetime.now(UTC).isoformat()


FIELDS = "video_id, channel_id, title, status, attempts, last_error, created_at, completed_at"


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
                self.subtitles.recover()  # expired leases only: never a live claim
                self.subtitles.reconcile()
            except conveyor.ConveyorError as exc:  # the database is away: next time
                import logging

                logging.getLogger("examples.subtitles").warning("reconcile failed: %s", exc)


# -- the HTTP API -------------------------------------------------------------------------
Id = Annotated[str, Path(min_length=1, max_length=MAX_ID, pattern=r"^[A-Za-z0-9_.:-]+$")]


class NewVideo(BaseModel):
    video_id: str = Field(min_length=1, max_length=MAX_ID, pattern=r"^[A-Za-z0-9_.:-]+$")
    title: Annotated[str, Field(min_length=1, max_length=500), NoNul]


class Subtitle(BaseModel):
    content: Annotated[str, Field(min_length=1, max_length=MAX_SUBTITLE), NoNul]


def create_api(subtitles: Subtitles, *, workers: int = 2) -> ASGIApp:
    runner = Workers(subtitles.app, concurrency=workers, lease=subtitles.settings.lease)
    timer = Reconciler(subtitles, subtitles.settings.reconcile_interval)

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        subtitles.recover()
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

    return BodyLimit(api, MAX_BODY)
