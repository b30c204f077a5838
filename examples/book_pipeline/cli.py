"""``python -m examples.book_pipeline [serve]`` (``__main__`` checks the extra first).

serve   the admin API and the book page (GET /admin/books/{book_id}), with the workers
        in the same process
(none)  the scripted demo: a bulk upload with a corrupt page and a rate-limited one,
        a second job refused while the first runs, an extraction that fails half-way
        and is resumed after its last completed page, and finalization
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from examples._common import report
from examples._web import add_demo_command, add_serve_options, background_server, serve
from examples.book_pipeline.app import Pipeline, create_api
from examples.book_pipeline.jobs import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.book_pipeline", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    commands = parser.add_subparsers(dest="command")
    serving = commands.add_parser("serve", help="serve the API and run its workers")
    add_serve_options(serving, "book_pipeline")
    d = Settings()
    serving.add_argument(
        "--stale-after",
        type=float,
        default=d.stale_after,
        help="seconds without a heartbeat before a job is failed on poll",
    )
    serving.add_argument(
        "--retry-base",
        type=float,
        default=d.retry_base,
        help="a page's retries wait this long, then doubling (2: 2-4-8-16 s)",
    )
    serving.add_argument(
        "--page-attempts",
        type=int,
        default=d.page_attempts,
        help="attempts at a rate-limited page before it is failed",
    )
    serving.add_argument(
        "--slow-seconds",
        type=float,
        default=d.slow_seconds,
        help="how long the stand-in OCR takes for a 'slow' page",
    )
    serving.add_argument("--poll-ms", type=int, default=d.poll_ms,
                         help="how often the book page polls its job")  # fmt: skip
    add_demo_command(parser, commands)
    args = parser.parse_args(argv)
    if args.command == "serve":
        if args.stale_after <= 0 or args.retry_base < 0 or args.slow_seconds < 0:
            raise SystemExit(
                "error: --stale-after must be > 0, --retry-base and --slow-seconds >= 0"
            )
        if not 1 <= args.page_attempts <= 20 or not 100 <= args.poll_ms <= 60_000:
            raise SystemExit("error: --page-attempts: 1 to 20; --poll-ms: 100 to 60000")
        settings = Settings(
            stale_after=args.stale_after, retry_base=args.retry_base,
            page_attempts=args.page_attempts, slow_seconds=args.slow_seconds,
            poll_ms=args.poll_ms,
        )  # fmt: skip
        pipeline = Pipeline(args.db, settings)
        try:
            return serve(create_api(pipeline, workers=args.workers), args, "detail")
        finally:
            pipeline.close()
    return run_demo(args)


def run_demo(args: argparse.Namespace) -> int:
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'book_pipeline.db'}"
    pipeline = Pipeline(url, Settings(retry_base=0.05, slow_seconds=0.2))
    with background_server(create_api(pipeline, workers=2)) as url:
        http = httpx.Client(base_url=url, timeout=60)
        book = http.post("/admin/books", json={"title": "Physics, Grade 9"}).json()["book_id"]
        base = f"/admin/books/{book}"
        contents = {n: f"page {n} about motion".encode() for n in range(1, 13)}
        contents[3] = b"fail: a torn scan"
        contents[5] = b"flaky: a busy moment"
        contents[7] = b"slow: a big scan"
        contents[9] = b"crash: the connection drops here"
        files = [("images", (f"scan_{n:03d}.png", io.BytesIO(data), "image/png"))
                 for n, data in contents.items()]  # fmt: skip
        upload = http.post(f"{base}/pages/bulk", files=files).json()
        refused = http.post(f"{base}/generate-guidelines", json={})

        def finished(kind: str) -> dict[str, Any]:
            while True:
                job: dict[str, Any] = http.get(
                    f"{base}/jobs/latest", params={"job_type": kind}
                ).json()
                if job["status"] in ("completed", "failed"):
                    return job
                time.sleep(0.05)

        ocr = finished("ocr_batch")
        first = http.post(f"{base}/generate-guidelines", json={}).json()
        extraction = finished("extraction")
        resumed = http.post(f"{base}/generate-guidelines", json={"resume": True}).json()
        second = finished("extraction")
        final = http.post(f"{base}/finalize").json()
        finalization = finished("finalization")
    report(
        {
            "uploaded": upload["pages_uploaded"],
            "second_job_while_ocr_runs": f"HTTP {refused.status_code}: " + refused.json()["detail"],
            "ocr": f"{ocr['completed_items']} read, {ocr['failed_items']} failed",
            "ocr_errors": ocr["progress_detail"],
            "extraction": f"{first['message']}: {extraction['status']} at page "
            f"{extraction['current_item']}: {extraction['error_message']}",
            "resume": resumed["message"],
            "after_resume": f"{second['status']}: {second['completed_items']} pages, "
            f"{second['failed_items']} without text",
            "finalization": f"job {final['job_id']} {finalization['status']}",
        },
        args.json,
    )
    pipeline.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
