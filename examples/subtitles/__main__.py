"""Run the subtitle queue: add videos, recover from a crash, reconcile, work, retry."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from examples._common import parser, report, work_until_idle
from examples.subtitles import app as subtitles


def main(argv: list[str] | None = None) -> int:
    p = parser("subtitles", "A video subtitle queue with retries and crash recovery.")
    p.add_argument("--videos", type=int, default=20)
    p.add_argument("--out", default="subtitles-out", help="where .srt files are written")
    args = p.parse_args(argv)
    subtitles.SUBTITLES = Path(args.out)
    app = subtitles.app
    app.bind(args.db)
    q = app.queue

    subtitles.add_videos(q, {n: f"Video number {n}" for n in range(1, args.videos + 1)})
    # A worker that died mid-job left it running: its lease runs out and recover()
    # puts it back (a real worker's rescuer does this on its own, every few seconds).
    crashed = q.claim(subtitles.QUEUE, lease=0.01, worker="crashed-worker")
    # A subtitle made by hand for video 2 completes its job without running it.
    (subtitles.SUBTITLES / "2.srt").parent.mkdir(parents=True, exist_ok=True)
    (subtitles.SUBTITLES / "2.srt").write_text("1\n00:00:00,000 --> 00:00:01,000\nhand-made\n")
    reconciled = subtitles.reconcile(q)
    time.sleep(0.05)
    recovered = q.recover()
    work_until_idle(app, subtitles.QUEUE)

    first_pass = subtitles.counts(q)
    failed = q.jobs(queue=subtitles.QUEUE, status="failed", limit=1000)
    for job in failed:  # the operator's "retry" button: attempts start again from zero
        q.retry(job.id)
    work_until_idle(app, subtitles.QUEUE)
    report(
        {
            "videos": args.videos,
            "crashed_claim": len(crashed.jobs),
            "recovered": recovered,
            "reconciled": reconciled,
            "first_pass": first_pass,
            "manually_retried": len(failed),
            "final": subtitles.counts(q),
            "errors": sorted({j.error for j in q.jobs(queue="subtitles", status="failed")}),
        },
        args.json,
    )
    app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
