"""``python -m examples.download_queue``: the bot's download loop on ``DownloadQueue``.

URLs are queued as messages arrive; a worker takes the oldest, downloads it, marks it
completed with the file's path or failed with the error, and retries a failed one up to
three times. The downloader is a stand-in: a URL containing ``broken`` always fails,
``flaky`` fails once. Latency and memory are measured by ``benchmarks/download_queue.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from collections import Counter
from pathlib import Path

from examples._common import report
from examples.download_queue.queue import DownloadQueue, QueueStats


class Downloader:
    """The stand-in for yt-dlp."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.tries: Counter[str] = Counter()

    def download(self, url: str) -> str:
        self.tries[url] += 1
        if "broken" in url:
            raise OSError("HTTP Error 403: Forbidden")
        if "flaky" in url and self.tries[url] == 1:
            raise OSError("connection reset by peer")
        path = self.folder / f"{hashlib.sha256(url.encode()).hexdigest()[:12]}.mp4"
        path.write_bytes(b"\x00" * 16)
        return str(path)


def work(queue: DownloadQueue, downloader: Downloader) -> tuple[list[int], int]:
    """The bot's worker loop, until nothing is queued: returns the jobs in the order they
    were taken, and how many retries were queued."""
    taken, retries = [], 0
    while (job := queue.dequeue()) is not None:
        if not queue.mark_in_progress(job.job_id):
            continue  # another worker took it first
        taken.append(job.job_id)
        try:
            queue.mark_completed(job.job_id, downloader.download(job.url))
        except OSError as exc:
            queue.mark_failed(job.job_id, str(exc))
            retries += queue.retry_job(job.job_id)
    return taken, retries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.download_queue", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--db", help="database or conveyor server URL (default: a temporary SQLite file)"
    )
    parser.add_argument("--token", help="the conveyor server's token, for an http(s) URL")
    parser.add_argument("--jobs", type=int, default=20, help="messages to queue (default 20)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="downloads-"))
    url = args.db or f"sqlite:///{folder / 'bot.db'}"
    with DownloadQueue(url, token=args.token) as queue:
        ids = []
        for n in range(1, args.jobs + 1):
            kind = "broken" if n % 10 == 7 else "flaky" if n % 10 == 3 else "ok"
            ids.append(queue.enqueue(message_id=n, url=f"https://video.example/{kind}/{n}"))
        peeked = queue.dequeue()
        taken, retries = work(queue, Downloader(folder))
        stats: QueueStats = queue.get_stats()
        failed = [queue.get(i) for i in ids if (j := queue.get(i)) and j.status == "Failed"]
    first_runs = list(dict.fromkeys(taken))
    report(
        {
            "queued": len(ids),
            "peeked_the_oldest": peeked is not None and peeked.job_id == ids[0],
            "taken_in_fifo_order": first_runs == sorted(first_runs) and set(first_runs) == set(ids),
            "runs": len(taken),
            "retries_queued": retries,
            "failed_for_good": [
                f"{j.url}: {j.error_message} after {j.retry_count} retries" for j in failed if j
            ],
            "stats": stats,
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
