"""The systems a benchmark run compares. Each offers ``enqueue_one(n) -> Latency``,
``bulk(n) -> seconds`` (``None`` when it has no batch API), ``drain(n) -> seconds``; every
call starts from a database of its own and verifies that each job ran exactly once."""
