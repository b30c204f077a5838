"""Chaos at a larger scale than the test suite's 5,000 jobs: worker processes SIGKILLed
about every 500 ms and restarted, one SIGSTOPped past its lease, and on PostgreSQL
their connections terminated, while they work through the backlog; then an audit that
every job was completed exactly once. The harness lives in ``tests/worker/chaos.py``.

    python -m benchmarks.chaos --backend postgresql --jobs 20000
"""

from tests.worker.chaos import main

if __name__ == "__main__":
    main(default_jobs=20_000)
