"""What the demo enqueues: a reproducible mix of jobs for the five demo systems."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from conveyor.demo import tasks
from conveyor.queue import Queue

# Each system's queue: its share of the jobs, its name and what it shows, for the view.
FAMILIES: dict[str, tuple[float, str, str]] = {
    "demo.metadata": (0.15, "metadata sync", "batches; catalogue timeouts retried"),
    "demo.fetch": (0.25, "chat-bot fetch", "a job per URL; repeats subscribe"),
    "demo.subtitles": (0.20, "subtitles", "busy model → backoff; 3 tries max"),
    "demo.books": (0.10, "book OCR", "page progress; resumes at checkpoint"),
    "demo.downloads": (0.30, "downloads", "FIFO; some scheduled for later"),
}
MAX_JOBS = 10_000


@dataclass
class Planned:
    task: str
    kwargs: dict[str, Any]
    key: str | None = None
    subscribers: list[str] = field(default_factory=list)
    delay: float = 0.0


def plan(jobs: int, *, seed: int = 7) -> list[Planned]:
    """About ``jobs`` jobs (at least one per system), the same for the same seed."""
    rng = random.Random(seed)
    counts = {name: max(1, round(jobs * share)) for name, (share, _, _) in FAMILIES.items()}
    out: list[Planned] = []
    for n in range(counts["demo.metadata"]):
        first = 1000 + n * 100
        out.append(Planned(tasks.sync_metadata.name, {
            "books": list(range(first, first + rng.randint(20, 100))),
            "timeouts": rng.choice([0, 0, 0, 1, 2]),
        }))  # fmt: skip
    for n in range(counts["demo.fetch"]):
        url = f"https://fics.example/s/{n}/{rng.choice(_WORDS)}-{rng.choice(_WORDS)}"
        askers = [f"chat:{rng.randint(100, 999)}" for _ in range(rng.choice([1, 1, 2, 3]))]
        out.append(Planned(tasks.fetch_story.name, {"url": url, "missing": rng.random() < 0.15},
                           key=url, subscribers=askers))  # fmt: skip
    for n in range(counts["demo.subtitles"]):
        busy = rng.choices([0, 1, 2, 3], weights=[50, 30, 12, 8])[0]
        out.append(Planned(tasks.generate_subtitles.name, {"video": f"episode-{n:03d}.mkv",
                                                           "busy": busy}))  # fmt: skip
    for n in range(counts["demo.books"]):
        pages = rng.randint(12, 40)
        out.append(Planned(tasks.read_book.name, {
            "book": f"book-{n:03d}",
            "pages": pages,
            "unreadable": sorted(rng.sample(range(1, pages + 1), rng.randint(0, 2))),
            "jam_at": rng.randint(2, pages - 1) if rng.random() < 0.4 else None,
        }, key=f"book-{n:03d}"))  # fmt: skip
    for n in range(counts["demo.downloads"]):
        delay = 4.0 if rng.random() < 0.1 else 0.0
        out.append(Planned(tasks.download.name, {"url": f"https://media.example/f/{n:04d}.mp4"},
                           delay=delay))  # fmt: skip
    rng.shuffle(out)
    return out


def enqueue(q: Queue, planned: list[Planned], *, pace: float) -> list[int]:
    """Enqueue the plan; returns the distinct job ids (repeat requests for a key share a
    job, and add their subscriber to it)."""
    app = tasks.app
    now = q.now() if any(p.delay for p in planned) else None
    ids: dict[int, None] = {}
    for item in planned:
        task = app.tasks[item.task]
        run_at = now + timedelta(seconds=item.delay * pace) if now and item.delay else None
        for subscriber in item.subscribers or [None]:  # type: ignore[list-item]
            job = task.using(key=item.key, subscriber=subscriber, run_at=run_at).enqueue(
                **item.kwargs
            )
            ids[job.id] = None
    return list(ids)


_WORDS = ["harbour", "lantern", "winter", "orchard", "comet", "atlas", "ember", "tide",
          "meadow", "signal", "quartz", "hollow"]  # fmt: skip
