"""What flow control costs a claim: throughput and latency with and without limits.

    python benchmarks/flow.py                    # both databases, 3 runs (a few minutes)
    python benchmarks/flow.py --quick            # small sizes, one run
    python benchmarks/flow.py --backends sqlite --jobs 20000 --runs 5
    python benchmarks/flow.py --backlog 100000   # also: one claim of 100 behind a backlog

Each configuration drains the same backlog through ``claim(limit=100)`` +
``complete_many`` (jobs/s through the claims alone, and through the whole loop; every
job verified to run once), then claims jobs one at a time (p50 of the claim), on a fresh
database. Limits are set high enough never
to hold a job back, so the figures show what checking them costs, not what they block.
"No limits" and "limits on other queues" must match: a queue without settings claims
through the plain statement whatever other queues have. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from benchmarks.harness import PG_URL, machine, postgres_available
from conveyor import Rate
from conveyor.cli.bench import Latency, scratch_queue, verify_once

QUEUE = "bench"
GROUPS = 10
NEVER = 1_000_000  # a cap or a rate no benchmark reaches


def _other_queues(q: conveyor.Queue) -> None:
    q.pause("paused-elsewhere")
    q.set_limits("capped-elsewhere", max_running=1, rate="5/1s")


def _cap(q: conveyor.Queue) -> None:
    q.set_limits(QUEUE, max_running=NEVER)


def _rate(q: conveyor.Queue) -> None:
    q.set_limits(QUEUE, rate=Rate(NEVER, per=1.0))


def _group_cap(q: conveyor.Queue) -> None:
    q.set_limits(QUEUE, group_max_running=NEVER)


def _everything(q: conveyor.Queue) -> None:
    q.set_limits(QUEUE, max_running=NEVER, group_max_running=NEVER,
                 rate=Rate(NEVER, per=1.0), group_rate=Rate(NEVER, per=1.0))  # fmt: skip


CONFIGS: dict[str, Callable[[conveyor.Queue], None] | None] = {
    "no limits": None,
    "limits on other queues": _other_queues,
    "max_running": _cap,
    "rate": _rate,
    "group_max_running": _group_cap,
    "all four": _everything,
}


@dataclass
class Result:
    backend: str
    config: str
    claimed_per_s: list[float] = field(default_factory=list)  # in claim calls only
    drained_per_s: list[float] = field(default_factory=list)  # claims and completions
    p50_ms: list[float] = field(default_factory=list)  # one claim of one job


def load(q: conveyor.Queue, n: int) -> None:
    """``n`` jobs numbered 0..n-1 (what ``drain`` verifies), spread over groups."""
    for start in range(0, n, 1000):
        items = [{"task": "bench.noop", "payload": {"i": i}, "group": f"g{i % GROUPS}"}
                 for i in range(start, min(n, start + 1000))]  # fmt: skip
        q.enqueue_ids(items, queue=QUEUE)


def drain(q: conveyor.Queue, jobs: int) -> tuple[float, float]:
    """Claim 100 at a time and complete them until none is left: jobs/s through the
    claims alone, and through the whole loop."""
    seen: list[int] = []
    completed, in_claims = 0, 0.0
    started = time.perf_counter()
    while True:
        before = time.perf_counter()
        claim = q.claim(QUEUE, limit=100, count_remaining=False)
        in_claims += time.perf_counter() - before
        if not claim.jobs:
            break
        completed += len(q.complete_many([(j.id, claim.id, None) for j in claim.jobs]))
        seen.extend(j.payload["i"] for j in claim.jobs)
    took = time.perf_counter() - started
    verify_once(seen, jobs, completed, what="flow drain")
    return jobs / in_claims, jobs / took


def claim_one(q: conveyor.Queue, rounds: int) -> Latency:
    """Claims of one job each (timed), each completed afterwards (not timed)."""
    took = []
    for _ in range(rounds):
        before = time.perf_counter()
        claim = q.claim(QUEUE, limit=1, count_remaining=False)
        took.append(time.perf_counter() - before)
        [job] = claim.jobs
        q.complete(job.id, claim.id)
    return Latency.of(took)


def measure(url: str | None, config: str, jobs: int, rounds: int, result: Result) -> None:
    with scratch_queue(url) as q:
        setup = CONFIGS[config]
        if setup is not None:
            setup(q)
        load(q, jobs)
        claimed, drained = drain(q, jobs)
        load(q, rounds)
        latency = claim_one(q, rounds)
    result.claimed_per_s.append(claimed)
    result.drained_per_s.append(drained)
    result.p50_ms.append(latency.p50)


def behind_backlog(url: str | None, config: str, backlog: int, rounds: int = 20) -> float:
    """p50 ms of ``claim(limit=100)`` (each batch completed, untimed) with ``backlog``
    jobs pending: a claim's cost must not grow with the backlog."""
    with scratch_queue(url) as q:
        setup = CONFIGS[config]
        if setup is not None:
            setup(q)
        load(q, backlog)
        took = []
        for _ in range(rounds):
            before = time.perf_counter()
            claim = q.claim(QUEUE, limit=100, count_remaining=False)
            took.append(time.perf_counter() - before)
            q.complete_many([(j.id, claim.id, None) for j in claim.jobs])
    return Latency.of(took).p50


def run(backends: list[str], jobs: int, rounds: int, runs: int, pg_url: str) -> list[Result]:
    results = {(b, c): Result(b, c) for b in backends for c in CONFIGS}
    for n in range(runs):
        for backend in backends:
            url = None if backend == "sqlite" else pg_url
            for config in CONFIGS:  # interleaved, so drift spreads over all of them
                started = time.perf_counter()
                result = results[backend, config]
                measure(url, config, jobs, rounds, result)
                print(f"  run {n + 1}/{runs} {backend:<10} {config:<22} claims "
                      f"{result.claimed_per_s[-1]:>7.0f} jobs/s, drain "
                      f"{result.drained_per_s[-1]:>6.0f} jobs/s, one claim p50 "
                      f"{result.p50_ms[-1]:.2f} ms ({time.perf_counter() - started:.1f}s)",
                      file=sys.stderr, flush=True)  # fmt: skip
    return list(results.values())


def table(results: list[Result]) -> str:
    """Medians, with the spread of the runs ((max - min) / median) in brackets."""
    lines = [
        "| backend | limits set | claims: jobs/s | vs none | drain: jobs/s | one claim p50 ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    base = {r.backend: statistics.median(r.claimed_per_s) for r in results
            if r.config == "no limits"}  # fmt: skip
    for r in results:
        claimed = statistics.median(r.claimed_per_s)
        lines.append(
            f"| {r.backend} | {r.config} | {claimed:,.0f} {_spread(r.claimed_per_s)} "
            f"| {claimed / base[r.backend]:.2f} "
            f"| {statistics.median(r.drained_per_s):,.0f} {_spread(r.drained_per_s)} "
            f"| {statistics.median(r.p50_ms):.2f} {_spread(r.p50_ms)} |"
        )
    return "\n".join(lines)


def _spread(values: list[float]) -> str:
    middle = statistics.median(values)
    return f"({(max(values) - min(values)) / middle:.0%})" if len(values) > 1 and middle else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--jobs", type=int, default=10_000, help="backlog drained per figure")
    parser.add_argument("--rounds", type=int, default=300, help="single claims for the p50")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 jobs, 100 rounds, 1 run")
    parser.add_argument("--backlog", type=int, default=0,
                        help="also time claims of 100 behind this many pending jobs")  # fmt: skip
    parser.add_argument("--pg", default=PG_URL, help="PostgreSQL server (a schema per figure)")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.rounds, args.runs = 2_000, 100, 1
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if "postgresql" in backends and (problem := postgres_available(args.pg)):
        print(f"skipping PostgreSQL: {problem}", file=sys.stderr)
        backends.remove("postgresql")
    facts = machine()
    print(f"flow control: {args.jobs} jobs drained, {args.rounds} single claims, "
          f"median of {args.runs} run(s); {facts['cpu']}, {facts['cores']} cores, "
          f"load {facts['load_at_start']}")  # fmt: skip
    print(table(run(backends, args.jobs, args.rounds, args.runs, args.pg)))
    if args.backlog:
        print(f"\n| backend | limits set | claim of 100 behind {args.backlog:,} pending: p50 ms |")
        print("|---|---|---:|")
        for backend in backends:
            url = None if backend == "sqlite" else args.pg
            for config in ("no limits", "max_running", "all four"):
                p50 = behind_backlog(url, config, args.backlog)
                print(f"| {backend} | {config} | {p50:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
