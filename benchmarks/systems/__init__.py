"""The systems a benchmark run compares on enqueue one and bulk enqueue. Each offers
``enqueue_one(n, warmup) -> Timed`` (timed by ``harness.time_calls``) and
``bulk(n) -> seconds`` (``None`` when it has no batch API); conveyor and the floors also
``drain(n) -> seconds`` (one-process API loops). Every call starts from a database of its
own; ``benchmarks.isolated`` runs each in a fresh process. The drains with worker
processes, peers included, are in ``benchmarks.drains``."""
