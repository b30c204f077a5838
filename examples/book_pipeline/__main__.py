"""Process a book, kill the worker half-way, watch the job resume from its checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn

from examples._common import parser, report
from examples.book_pipeline import app as pipeline

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    p = parser("book_pipeline", "Book processing with progress, heartbeats and resume.")
    p.add_argument("--pages", type=int, default=300)
    p.add_argument("--role", choices=["demo", "worker"], default="demo")
    args = p.parse_args(argv)
    pipeline.app.bind(args.db)
    if args.role == "worker":  # a worker process, killed by the demo below
        pipeline.app.run_worker(concurrency=1, lease=1.0)
        return 0

    q = pipeline.app.queue
    book = "dune.pdf"
    job = pipeline.start(book, args.pages)
    try:
        pipeline.start(book, args.pages)
        refused = "no"
    except pipeline.BookBusy as exc:
        refused = f"yes: {exc}"
    broken = pipeline.start("scan.corrupt", 10)

    # A worker in another process gets a third of the way, then dies without a word.
    child = subprocess.Popen(
        [sys.executable, "-m", "examples.book_pipeline", "--db", args.db, "--role", "worker"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    while (q.get(job.id).progress.checkpoint or 0) < args.pages // 3:  # type: ignore[union-attr]
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait()
    killed_at = q.get(job.id).progress.checkpoint  # type: ignore[union-attr]

    # Its lease runs out within a second; the next poll notices and requeues the job.
    seen = pipeline.poll(q, book)
    while seen is not None and seen.status == "running":
        time.sleep(0.2)
        seen = pipeline.poll(q, book)

    worker = threading.Thread(
        target=pipeline.app.run_worker,
        kwargs={"burst": False, "concurrency": 2, "lease": 5, "install_signals": False},
        daemon=True,
    )
    worker.start()
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[current]}")
    ) as bar:
        shown = bar.add_task(book, total=args.pages, current="")
        while True:
            current = pipeline.poll(q, book)
            assert current is not None
            done = (current.progress.completed or 0) + (current.progress.failed or 0)
            bar.update(shown, completed=done, current=current.progress.current or "")
            if current.is_final:
                break
            time.sleep(0.1)
    final = q.wait(job.id, timeout=60)
    report(
        {
            "status": str(final.status),
            "second_start_refused": refused,
            "killed_after_page": killed_at,
            "runs": final.progress.detail["runs"],
            "pages": f"{final.progress.completed} read, {final.progress.failed} unreadable",
            "attempts": final.attempts,
            "corrupt_book": f"{q.wait(broken.id, timeout=30).status}: {q.get(broken.id).error}",  # type: ignore[union-attr]
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
