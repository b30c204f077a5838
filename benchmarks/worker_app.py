"""The app the worker benchmarks run: one no-op task. The database comes from
``conveyor worker --db``."""

from __future__ import annotations

import conveyor

app = conveyor.App()


@app.task(name="bench.noop", queue="bench")
def noop(ctx: conveyor.Context, i: int) -> None:
    """Does nothing: the benchmark measures the queue, not the work."""
