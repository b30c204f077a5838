"""``python -m examples.subtitles [serve | worker]``.

serve   the API, with its workers in the same process; at start-up, videos left
        processing by a run that died (their lease expired) go back to pending, then
        reconciliation runs
worker  workers only (more processes on the same database)
(none)  the scripted demo: a run that died mid-video, retries, a video that fails for
        good and then gets a subtitle by hand, a manual retry, a video added twice
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

from examples._common import report
from examples._web import add_demo_command, add_serve_options, background_server, serve
from examples.subtitles.app import QUEUE, Settings, Subtitles, create_api


def _settings_options(parser: argparse.ArgumentParser) -> None:
    d = Settings()
    parser.add_argument(
        "--max-retries",
        type=int,
        default=d.max_retries,
        help=f"attempts before a video is failed (default {d.max_retries})",
    )
    parser.add_argument(
        "--retry-delay",
        type=float,
        default=d.retry_delay,
        help=f"seconds before the first retry, then doubling ({d.retry_delay:g})",
    )
    parser.add_argument(
        "--slow-seconds",
        type=float,
        default=d.slow_seconds,
        help="how long the stand-in transcriber takes for a 'slow' video",
    )
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=d.lease,
        help=f"a run that died is recovered this long after its last heartbeat ({d.lease:g})",
    )
    parser.add_argument("--reconcile-interval", type=float, default=d.reconcile_interval,
                        help="seconds between reconciliations (0: only at start-up and on "
                        "POST /reconcile)")  # fmt: skip


def _settings(args: argparse.Namespace) -> Settings:
    if args.max_retries < 1:
        raise SystemExit("error: --max-retries: expected 1 or more")
    for name in ("retry_delay", "slow_seconds", "reconcile_interval"):
        if getattr(args, name) < 0:
            raise SystemExit(f"error: --{name.replace('_', '-')}: expected 0 or more")
    if not 1 <= args.lease_seconds <= 86_400:
        raise SystemExit("error: --lease-seconds: expected 1 to 86400")
    return Settings(
        max_retries=args.max_retries, retry_delay=args.retry_delay,
        slow_seconds=args.slow_seconds, reconcile_interval=args.reconcile_interval,
        lease=args.lease_seconds,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.subtitles", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    commands = parser.add_subparsers(dest="command")
    serving = commands.add_parser("serve", help="serve the API and run its workers")
    add_serve_options(serving, "subtitles")
    _settings_options(serving)
    working = commands.add_parser("worker", help="run workers only")
    working.add_argument("--db", default="sqlite:///subtitles.db", help="database URL")
    working.add_argument("--workers", type=int, default=2, help="tasks run at once")
    _settings_options(working)
    add_demo_command(parser, commands)
    args = parser.parse_args(argv)
    if args.command == "serve":
        subtitles = Subtitles(args.db, _settings(args))
        try:
            return serve(create_api(subtitles, workers=args.workers), args)
        finally:
            subtitles.close()
    if args.command == "worker":
        if args.workers < 1:
            raise SystemExit("error: --workers: expected 1 or more")
        subtitles = Subtitles(args.db, _settings(args))
        try:
            subtitles.app.run_worker(concurrency=args.workers, lease=subtitles.settings.lease)
        finally:
            subtitles.close()
        return 0
    return run_demo(args)


def run_demo(args: argparse.Namespace) -> int:
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'subtitles.db'}"
    subtitles = Subtitles(url, Settings(retry_delay=0.1, slow_seconds=0.3))
    ids = [f"v{n:02d}" for n in range(1, 10)] + ["fail-10", "bad-11", "slow-12"]
    for video_id in ids:
        subtitles.add_video("demo", video_id, f"Video {video_id}")
    died = subtitles.q.claim(QUEUE, worker="a-run-that-died", lease=0.5)  # then it died
    time.sleep(0.6)  # its lease runs out: start-up recovers it
    with background_server(create_api(subtitles, workers=3)) as url:
        http = httpx.Client(base_url=url, timeout=30)
        listing = "/channels/demo/videos"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            counts = http.get(listing).json()["counts"]
            if counts["pending"] == counts["processing"] == 0:
                break
            time.sleep(0.1)
        first_pass = http.get(listing).json()["counts"]
        failed_videos = http.get(listing, params={"status": "failed"}).json()["videos"]
        failed = {v["video_id"]: v["last_error"] for v in failed_videos}
        http.put(
            "/videos/bad-11/subtitle", json={"content": "1\n00:00:00,000 --> 00:00:01,000\nhi\n"}
        )
        reconciled = http.post("/reconcile").json()
        retried = http.post("/videos/fail-10/retry").json()
        again = http.post(f"{listing}", json={"video_id": "v01", "title": "Added again"})
    report(
        {
            "videos": len(ids),
            "left_processing_by_a_run_that_died": [j.key for j in died.jobs],
            "first_pass": first_pass,
            "failed": failed,
            "reconcile_after_a_manual_subtitle": reconciled,
            "manual_retry": {k: retried[k] for k in ("status", "attempts", "last_error")},
            "added_twice": f"HTTP {again.status_code}, still {again.json()['status']}",
            "final": subtitles.channel("demo", None, 100, "")["counts"],
        },
        args.json,
    )
    subtitles.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
