"""``conveyor bench``: how fast conveyor is on *your* database.

The workloads here measure conveyor alone, through the public ``Queue`` API, so they
run from any install. ``benchmarks/run.py`` in a source checkout reuses them and adds
the peers, the plain-SQL floor and the worker runtime (see docs/benchmarks.md).

Every workload checks its own outcome: a drain must complete each job exactly once,
or the run fails instead of printing a figure.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer

import conveyor
from conveyor.cli.base import app
from conveyor.config import parse_url
from conveyor.drivers.sqlite import writers
from conveyor.errors import ConveyorError, InvalidArgument
from conveyor.queue import Queue

NOOP_TASK = "bench.noop"
BULK_CHUNK = 1000


class VerificationFailed(ConveyorError):
    """A benchmark's jobs did not each run and complete exactly once."""


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of a list of durations, in milliseconds."""

    p50: float
    p99: float
    mean: float
    count: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        if not seconds:
            raise InvalidArgument("latency: expected at least one sample")
        ms = sorted(s * 1000.0 for s in seconds)
        return cls(percentile(ms, 50), percentile(ms, 99), statistics.fmean(ms), len(ms))


def percentile(ordered: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile of sorted values, interpolated between neighbours."""
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def payloads(n: int, start: int = 0) -> list[dict[str, Any]]:
    """``n`` no-op jobs, each carrying its own number so a drain can prove exactly-once."""
    return [{"task": NOOP_TASK, "payload": {"i": i}} for i in range(start, start + n)]


def enqueue_one(q: Queue, n: int, *, queue: str = "default") -> Latency:
    """``n`` enqueues, one durable commit each."""
    took = []
    for i in range(n):
        started = time.perf_counter()
        q.enqueue(NOOP_TASK, {"i": i}, queue=queue)
        took.append(time.perf_counter() - started)
    return Latency.of(took)


def enqueue_bulk(
    q: Queue, n: int, *, queue: str = "default", chunk: int = BULK_CHUNK, ids: bool = False
) -> float:
    """Seconds to enqueue ``n`` jobs with ``enqueue_many`` (``ids``: ``enqueue_ids``),
    ``chunk`` per transaction."""
    add = q.enqueue_ids if ids else q.enqueue_many
    started = time.perf_counter()
    for start in range(0, n, chunk):
        add(payloads(min(chunk, n - start), start), queue=queue)
    return time.perf_counter() - started


def drain(q: Queue, expected: int, *, queue: str = "default", limit: int = 100) -> float:
    """Seconds to claim and complete every pending job of ``queue`` in a tight loop of
    ``claim(limit)`` + ``complete_many``; verifies ``expected`` jobs completed once each."""
    seen: list[int] = []
    completed = 0
    worker = f"bench-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    while True:
        claim = q.claim(queue, limit=limit, worker=worker, count_remaining=False)
        if not claim.jobs:
            break
        done = q.complete_many([(job.id, claim.id, None) for job in claim.jobs])
        seen.extend(job.payload["i"] for job in claim.jobs)
        completed += len(done)
    took = time.perf_counter() - started
    verify_once(seen, expected, completed, what="drain")
    stats = q.stats(queue)
    if stats.pending or stats.running:
        raise VerificationFailed(
            f"drain: expected an empty queue, found {stats.pending} pending "
            f"and {stats.running} running"
        )
    return took


def drain_acked(q: Queue, expected: int, *, queue: str = "default", limit: int = 100) -> float:
    """Like ``drain``, but each claim acknowledges the previous one (``claim(ack=...)``):
    one transaction per batch completes the last batch and claims the next, the way the
    batch clients of the metadata-sync design work."""
    seen: list[int] = []
    completed = 0
    previous: str | None = None
    started = time.perf_counter()
    while True:
        claim = q.claim(queue, limit=limit, ack=previous, count_remaining=False)
        completed += claim.acked
        if not claim.jobs:
            break
        seen.extend(job.payload["i"] for job in claim.jobs)
        previous = claim.id
    took = time.perf_counter() - started
    verify_once(seen, expected, completed, what="acked drain")
    return took


def verify_once(seen: Sequence[int], expected: int, completed: int, *, what: str) -> None:
    """Every job number 0..expected-1 ran exactly once and was completed."""
    if len(seen) != expected or set(seen) != set(range(expected)):
        duplicates = len(seen) - len(set(seen))
        raise VerificationFailed(
            f"{what}: expected jobs 0..{expected - 1} to run once each, got {len(seen)} "
            f"runs of {len(set(seen))} distinct jobs ({duplicates} repeated)"
        )
    if completed != expected:
        raise VerificationFailed(f"{what}: expected {expected} completions, got {completed}")


def claim_complete(
    q: Queue, n: int, *, queue: str = "default", count_remaining: bool = False
) -> Latency:
    """Latency of ``n`` rounds of claiming one job and completing it, each one commit."""
    took = []
    for _ in range(n):
        started = time.perf_counter()
        claim = q.claim(queue, limit=1, count_remaining=count_remaining)
        if not claim.jobs:
            raise VerificationFailed(f"claim latency: the queue {queue!r} ran dry")
        job = claim.jobs[0]
        q.complete(job.id, claim.id)
        took.append(time.perf_counter() - started)
    return Latency.of(took)


# -- a database of its own --------------------------------------------------------------
@contextmanager
def scratch_queue(url: str | None = None) -> Iterator[Queue]:
    """A queue on an empty database beside ``url``, removed afterwards, so a benchmark
    never touches existing jobs: a new SQLite file in the same directory (the same disk),
    or a new PostgreSQL schema (MySQL database) on the same server. No URL: a temporary
    SQLite file."""
    if url is None:
        with (
            tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder,
            conveyor.connect(f"sqlite:///{Path(folder) / 'bench.db'}", use_env=False) as q,
        ):
            yield q
        return
    settings = parse_url(url)
    tag = uuid.uuid4().hex[:10]
    if settings.backend == "sqlite":
        if settings.target == ":memory:":
            raise InvalidArgument("bench: an in-memory database measures no durable commit")
        path = Path(settings.target).with_name(f"{Path(settings.target).name}.bench-{tag}")
        query = urlsplit(url).query
        try:
            with conveyor.connect(
                f"sqlite:///{path.resolve()}" + (f"?{query}" * bool(query)), use_env=False
            ) as q:
                yield q
        finally:
            for suffix in ("", "-wal", "-shm", writers.SUFFIX):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    if settings.backend == "mysql":
        from conveyor.drivers.mysql.dialect import scratch_database

        with (
            scratch_database(url, f"conveyor_bench_{tag}") as scratch,
            conveyor.connect(scratch) as q,
        ):
            yield q
        return
    with conveyor.connect(url, schema=f"conveyor_bench_{tag}", use_env=False) as q:
        try:
            yield q
        finally:
            q.drop_schema()


# -- the command ----------------------------------------------------------------------
@app.command()
def bench(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Measure beside this database: a new SQLite file in its "
            "directory, or a new PostgreSQL schema or MySQL database, removed afterwards. "
            "Default: a temporary SQLite file.",
        ),
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-n", min=100, max=1_000_000, help="Jobs per workload.")
    ] = 10_000,
    runs: Annotated[
        int, typer.Option("--runs", min=1, max=20, help="Repeat each workload; report the median.")
    ] = 3,
) -> None:
    """Measure enqueue, bulk enqueue, drain and claim latency (conveyor alone).

    For the comparison with other queues and the plain-SQL floor, run
    benchmarks/run.py from a source checkout (docs/benchmarks.md)."""
    from rich.console import Console
    from rich.table import Table

    single = min(jobs, 1000)
    ones: list[Latency] = []
    bulk: list[float] = []
    drained: list[float] = []
    acked: list[float] = []
    claims: list[Latency] = []
    with scratch_queue(db) as q:
        where = q.url
        for run in range(runs):
            queue = f"bench-{run}"
            ones.append(enqueue_one(q, single, queue=queue + "-one"))
            bulk.append(jobs / enqueue_bulk(q, jobs, queue=queue))
            drained.append(jobs / drain(q, jobs, queue=queue))
            enqueue_bulk(q, jobs, queue=queue + "-ack")
            acked.append(jobs / drain_acked(q, jobs, queue=queue + "-ack"))
            enqueue_bulk(q, single, queue=queue + "-claim")
            claims.append(claim_complete(q, single, queue=queue + "-claim"))
    table = Table(title=f"conveyor on {where} (median of {runs} runs)")
    table.add_column("workload")
    table.add_column("figure", justify="right")
    table.add_row(
        "enqueue one (a durable commit each), p50 / p99",
        f"{_median(x.p50 for x in ones):.3f} / {_median(x.p99 for x in ones):.3f} ms",
    )
    table.add_row(
        f"bulk enqueue (enqueue_many, {BULK_CHUNK} a transaction)", f"{_median(bulk):,.0f} jobs/s"
    )
    table.add_row("drain (claim 100 + complete_many)", f"{_median(drained):,.0f} jobs/s")
    table.add_row("drain (claim 100 with ack of the last batch)", f"{_median(acked):,.0f} jobs/s")
    table.add_row(
        "claim one + complete, p50 / p99",
        f"{_median(c.p50 for c in claims):.3f} / {_median(c.p99 for c in claims):.3f} ms",
    )
    Console().print(table)


def _median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))
