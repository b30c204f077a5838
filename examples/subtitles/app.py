"""A video subtitle queue: pending → processing → completed / failed, retries with
backoff, a manual retry that resets attempts, crash recovery and reconciliation.

The transcriber is a stand-in: it writes a small .srt file, times out on some videos
the first time (a retryable error) and finds no audio track on others (terminal)."""

from __future__ import annotations

import re
from pathlib import Path

import conveyor

app = conveyor.App()
QUEUE = "subtitles"
SUBTITLES = Path("subtitles-out")


def video_key(video_id: int) -> str:
    return f"video-{video_id}"


@app.task(
    name="subtitles.generate",
    queue=QUEUE,
    max_attempts=3,
    backoff=conveyor.Backoff(base=0.1, jitter=0),
)
def generate(ctx: conveyor.Context, video_id: int, title: str) -> dict[str, str]:
    if video_id % 7 == 0:
        raise conveyor.Terminal(f"video {video_id} has no audio track")
    if video_id % 5 == 0 and ctx.attempt == 1:
        raise TimeoutError("transcriber timed out")  # retryable: tried again after backoff
    path = SUBTITLES / f"{video_id}.srt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"1\n00:00:00,000 --> 00:00:02,000\n{title}\n", encoding="utf-8")
    return {"path": str(path)}


def add_videos(q: conveyor.Queue, titles: dict[int, str]) -> None:
    """New videos start pending; adding one twice changes nothing (the key dedupes)."""
    for video_id, title in titles.items():
        generate.using(key=video_key(video_id)).enqueue(video_id=video_id, title=title)


def reconcile(q: conveyor.Queue) -> int:
    """A subtitle file on disk means the video is done, whatever the queue says."""
    done = 0
    for path in SUBTITLES.glob("*.srt"):
        match = re.fullmatch(r"(\d+)\.srt", path.name)
        if match:
            done += q.complete_by_key(
                video_key(int(match.group(1))), queue=QUEUE, result={"path": str(path)}
            )
    return done


def counts(q: conveyor.Queue) -> dict[str, int]:
    stats = q.stats(QUEUE)
    return {
        "pending": stats.pending,
        "processing": stats.running,
        "completed": stats.completed,
        "failed": stats.failed,
    }
