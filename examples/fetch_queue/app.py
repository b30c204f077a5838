"""A chat bot's fetch queue: one job per URL however many people ask, every asker told
when it finishes, results cached for a while, errors reported with a way to retry.

The fan-fiction site is a stand-in: a dictionary of pages, slow to answer, with a broken
link among them."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import conveyor
from conveyor.notify import CallbackNotifier

QUEUE = "fics"
CACHE_TTL = timedelta(hours=6)
SITE = {
    "https://fics.example/works/1": {"title": "The Long Way Round", "words": 81_233},
    "https://fics.example/works/2": {"title": "Small Hours", "words": 4_021},
}
fetches: Counter[str] = Counter()  # how often the site was really asked, per URL
inbox: list[tuple[str, str]] = []  # (user, message) the bot sent
_lock = threading.Lock()


def deliver(job: conveyor.Job, user: str) -> None:
    """The notifier: in the real bot, a direct message on the chat platform."""
    if job.status == conveyor.Status.COMPLETED:
        message = f"{job.result['title']} ({job.result['words']} words)"
    else:
        message = f"could not fetch {job.payload['url']}: {job.error}"
    with _lock:
        inbox.append((user, message))


app = conveyor.App(notifier=CallbackNotifier(deliver))


@app.task(name="fics.fetch", queue=QUEUE, max_attempts=2, timeout=30)
def fetch(ctx: conveyor.Context, url: str) -> dict[str, object]:
    with _lock:
        fetches[url] += 1
    time.sleep(0.2)  # the site is slow: this is why requests pile up on one job
    page = SITE.get(url)
    if page is None:
        raise conveyor.Terminal("the site answered 404")
    return page


def request(url: str, user: str, *, retry_failed: bool = False) -> str:
    """What the bot answers the moment someone asks for a URL."""
    job = fetch.using(
        key=url,
        subscriber=user,
        cache_ttl=CACHE_TTL,
        on_failed="retry" if retry_failed else "return",
    ).enqueue(url=url)
    if job.status == conveyor.Status.COMPLETED:
        return f"cached: {job.result['title']}"
    if job.status == conveyor.Status.FAILED:
        return f"failed earlier ({job.error}); ask again with retry"
    if job.deduplicated:
        return f"already fetching (job {job.id}); you will be told when it is done"
    return f"fetching (job {job.id}); you will be told when it is done"
