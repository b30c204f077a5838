"""What a claim costs as a SQLite backlog grows: time, CPU and pages written.

    python benchmarks/claim_pages.py [--rounds 200] [--sizes 1000,100000,1000000]

At each backlog size (pending jobs, filled by ``enqueue_ids``): the p50 of the default
``claim(limit=1)`` + ``complete`` at ``synchronous=FULL`` (each a durable commit), the
same with ``synchronous=OFF`` (the CPU and page-cache work alone, no fsync), and how many
pages each round adds to the WAL (what the commit writes and fsyncs). When the last two
stay flat as the backlog grows, the claim does O(batch) work and what moves the durable
figure is the disk.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import conveyor
from conveyor.cli import bench as workloads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--sizes", default="1000,100000,1000000")
    args = parser.parse_args(argv)
    rounds = args.rounds
    with (
        tempfile.TemporaryDirectory(prefix="conveyor-bench-") as folder,
        conveyor.connect(f"sqlite:///{Path(folder) / 'pages.db'}") as q,
    ):
        conn = q.driver._conn  # type: ignore[attr-defined]
        pending = 0
        for size in (int(s) for s in args.sizes.split(",")):
            if size > pending:
                workloads.enqueue_bulk(q, size - pending, queue="b", ids=True)
                pending = size
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # count every page written
            durable = workloads.claim_complete(q, rounds, queue="b", count_remaining=True)
            pages = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1] / rounds
            conn.execute("PRAGMA wal_autocheckpoint = 1000")
            conn.execute("PRAGMA synchronous = OFF")
            cpu = workloads.claim_complete(q, rounds, queue="b", count_remaining=True)
            conn.execute("PRAGMA synchronous = FULL")
            pending -= 2 * rounds
            print(f"{size:>10,} pending: p50 {durable.p50:.3f} ms durable,"
                  f" {cpu.p50:.3f} ms with synchronous=OFF,"
                  f" {pages:.1f} WAL pages per claim + complete", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
