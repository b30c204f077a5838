"""Where a worker's time goes: one in-process ``Worker`` draining no-op jobs, beside the
``claim(ack=)`` API loop on the same database (the ceiling the worker is measured
against), optionally under pyinstrument.

    python -m benchmarks.profile_worker --backend sqlite --jobs 20000
    python -m benchmarks.profile_worker --backend postgresql --profile
    python -m benchmarks.profile_worker --backend mariadb --profile
    python -m benchmarks.profile_worker --async-task   # the same with an async def task

For the real multi-process figures, see ``benchmarks/workers.py`` (``run.py --only
workers``); a whole ``conveyor worker`` process can also be sampled with
``py-spy record -o worker.svg -- python -m conveyor worker --burst ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.harness import pg_database
from conveyor.cli.bench import drain_acked, enqueue_bulk

QUEUE = "bench"
PG_URL = "postgresql://root@127.0.0.1:5432/test"
MARIADB_URL = "mysql://root@127.0.0.1:3306/test"


def _app(url: str, *, is_async: bool) -> conveyor.App:
    app = conveyor.App(url)
    if is_async:

        @app.task(name="bench.noop", queue=QUEUE)
        async def noop_async(ctx: conveyor.Context, i: int) -> None:
            """Does nothing."""

    else:

        @app.task(name="bench.noop", queue=QUEUE)
        def noop(ctx: conveyor.Context, i: int) -> None:
            """Does nothing."""

    return app


@contextlib.contextmanager
def database(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{Path(folder) / 'conveyor.db'}"
    elif backend == "mariadb":
        from conveyor.drivers.mysql.dialect import scratch_database

        with scratch_database(MARIADB_URL, f"conveyor_profile_{uuid.uuid4().hex[:10]}") as url:
            yield url
    else:
        with pg_database(PG_URL) as url:
            yield url


def worker_drain(url: str, n: int, args: argparse.Namespace) -> tuple[float, float]:
    app = _app(url, is_async=args.async_task)
    enqueue_bulk(app.queue, n, queue=QUEUE)
    options = {} if args.prefetch is None else {"prefetch": args.prefetch}
    worker = conveyor.Worker(
        app, concurrency=args.concurrency, burst=True, install_signals=False, **options
    )
    profiler = None
    if args.profile:
        from pyinstrument import Profiler  # optional: the bench extra

        profiler = Profiler(interval=0.0005, async_mode="disabled")
        profiler.start()
    started, cpu = time.perf_counter(), time.process_time()
    stats = worker.run()
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    if profiler is not None:
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False, show_all=False))
    if stats.completed != n:
        raise SystemExit(f"worker completed {stats.completed} of {n}")
    counts = app.queue.stats(QUEUE)
    if counts.completed != n or counts.pending or counts.running:
        raise SystemExit(f"worker drain: expected {n} completed, got {counts}")
    app.queue.close()
    return n / took, cpu / n


def api_drain(url: str, n: int) -> tuple[float, float]:
    with conveyor.connect(url) as q:
        enqueue_bulk(q, n, queue=QUEUE)
        cpu = time.process_time()
        took = drain_acked(q, n, queue=QUEUE)
        return n / took, (time.process_time() - cpu) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "mariadb"), default="sqlite")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--prefetch", type=int, default=None)
    parser.add_argument("--async-task", action="store_true")
    parser.add_argument("--profile", action="store_true", help="print a pyinstrument profile")
    args = parser.parse_args()
    with database(args.backend) as url:
        api, api_cpu = api_drain(url, args.jobs)
    with database(args.backend) as url:
        rate, cpu = worker_drain(url, args.jobs, args)
    kind = "async" if args.async_task else "sync"
    # The CPU is this process's, every thread's (SQLite's work included: it runs here).
    print(
        f"{args.backend}: claim(ack=) loop {api:,.0f} jobs/s, {api_cpu * 1e6:.1f} µs of CPU "
        f"per job; one worker ({kind}, concurrency {args.concurrency}) {rate:,.0f} jobs/s "
        f"= {rate / api:.0%}, {cpu * 1e6:.1f} µs of CPU per job"
    )


if __name__ == "__main__":
    main()
