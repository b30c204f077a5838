"""What tracing costs an enqueue: the same single-job enqueues into SQLite without the
OpenTelemetry hooks, with the instrumentor installed but no SDK (a no-op tracer), and
with the SDK recording every span into memory. Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.tracing_cost --jobs 2000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import conveyor


def _rate(q: conveyor.Queue, jobs: int, rounds: int) -> tuple[float, float]:
    """Median and best enqueues per second over ``rounds`` runs of ``jobs`` enqueues."""
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(jobs):
            q.enqueue("bench.noop", {"i": i})
        rates.append(jobs / (time.perf_counter() - start))
    return statistics.median(rates), max(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import NoOpTracerProvider

    from conveyor.integrations.opentelemetry import ConveyorInstrumentor

    recording = TracerProvider()
    recording.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    instrumentor = ConveyorInstrumentor()
    setups: list[tuple[str, Callable[[], None]]] = [
        ("not instrumented", instrumentor.uninstrument),
        (
            "instrumented, no SDK",
            lambda: instrumentor.instrument(tracer_provider=NoOpTracerProvider()),
        ),
        ("instrumented, SDK", lambda: instrumentor.instrument(tracer_provider=recording)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        q = conveyor.connect(f"sqlite:///{Path(tmp) / 'bench.db'}?synchronous=normal")
        _rate(q, 200, 1)  # warm up
        print(f"{args.jobs} enqueues x {args.rounds} rounds, SQLite (synchronous=normal)")
        baseline = None
        for label, setup in setups:
            setup()
            median, best = _rate(q, args.jobs, args.rounds)
            baseline = baseline or median
            cost_us = (1 / median - 1 / baseline) * 1e6
            print(
                f"  {label:22} {median:9.0f} jobs/s (best {best:.0f}),"
                f" {cost_us:+7.1f} us per enqueue"
            )
        instrumentor.uninstrument()
        q.close()


if __name__ == "__main__":
    main()
