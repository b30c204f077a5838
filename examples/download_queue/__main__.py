"""Enqueue downloads, work them strictly in order, and measure the latency budget:
enqueue < 10 ms, take < 5 ms, < 10 MB of overhead."""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import conveyor
from examples._common import parser, report
from examples.download_queue.app import DownloadQueue, download


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("download_queue", "A FIFO download queue with latency limits.")
    p.add_argument("--jobs", type=int, default=200)
    args = p.parse_args(argv)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with conveyor.connect(args.db) as q, tempfile.TemporaryDirectory() as out:
        downloads = DownloadQueue(q)
        enqueue_s, take_s, ids = [], [], []
        for n in range(args.jobs):
            url = f"https://video.example/{'broken' if n % 50 == 7 else 'ok'}/{n}"
            started = time.perf_counter()
            ids.append(downloads.enqueue(message_id=n + 1, url=url))
            enqueue_s.append(time.perf_counter() - started)
        peeked = downloads.peek()
        order, retries = [], 0
        while True:
            started = time.perf_counter()
            job = downloads.take()
            take_s.append(time.perf_counter() - started)
            if job is None:
                break
            order.append(job.id)
            try:
                downloads.mark_completed(job, download(job.url, Path(out)))
            except OSError as exc:
                retries += downloads.mark_failed(job, str(exc))
        stats = downloads.stats()
    first_takes = list(dict.fromkeys(order))  # each job's first turn, in the order taken
    report(
        {
            "jobs": args.jobs,
            "peeked_first": peeked.id == ids[0] if peeked else False,
            "fifo": first_takes == sorted(first_takes) == ids,
            "taken": len(order),
            "retries": retries,
            "stats": stats,
            "enqueue_latency": _ms(enqueue_s),
            "take_latency": _ms(take_s),
            "max_rss_growth_mb": round(
                (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024, 2
            ),
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
