"""The consumer loops of the peers that ship no consumer, as their docs show them.

    python -m benchmarks.peer_loops litequeue /path/lq.db
    python -m benchmarks.peer_loops persist-queue /path/pq

litequeue: ``pop()`` (one commit marks the message locked) then ``done()`` (a second
commit), at ``synchronous=FULL`` (it sets NORMAL itself). persist-queue
(``SQLiteAckQueue``, WAL, SQLite's default ``synchronous=FULL``): ``get()`` then
``ack()``, a commit each. Each job is ``benchmarks.drain_apps.log_job``. And
``pgqueuer FACTORY BATCH``: what ``pgq run --mode drain`` runs (see ``pgqueuer_run``).
"""

from __future__ import annotations

import json
import sys

from benchmarks.drain_apps import log_job


def litequeue(db: str) -> None:
    from litequeue import LiteQueue  # type: ignore[import-untyped]

    # Its connection waits 5 s for the write lock (sqlite3's default): with 4 processes
    # on a busy machine one of them can wait longer and fail with "database is locked".
    # 30 s, conveyor's default, as a user running several processes would set it.
    q = LiteQueue(db, timeout=30)
    q.conn.execute("PRAGMA synchronous = FULL")
    while (message := q.pop()) is not None:
        log_job(json.loads(message.data)["i"])
        q.done(message.message_id)
    q.close()


def persist_queue(db: str) -> None:
    from persistqueue import Empty, SQLiteAckQueue

    q = SQLiteAckQueue(db)
    while True:
        try:
            item = q.get(block=False)
        except Empty:
            break
        log_job(item["i"])
        q.ack(item)
    q.close()


def pgqueuer_run(factory: str, batch_size: str) -> None:
    """``pgq run FACTORY --mode drain --batch-size B``: the function that command runs,
    called directly because this pgqueuer's command line fails on its own log-level
    option (it hands a string where its logging set-up expects the enum)."""
    from pgqueuer.adapters.cli import cli
    from pgqueuer.core.logconfig import LogLevel
    from pgqueuer.domain.types import QueueExecutionMode

    cli.run(factory_fn=factory, factory_args=[], dequeue_timeout=1.0,
            batch_size=int(batch_size), heartbeat_timeout=30.0, restart_delay=5.0,
            restart_on_failure=False, log_level=LogLevel.WARNING,
            mode=QueueExecutionMode.drain, max_concurrent_tasks=None,
            shutdown_on_listener_failure=False)  # fmt: skip


if __name__ == "__main__":
    loops = {"litequeue": litequeue, "persist-queue": persist_queue, "pgqueuer": pgqueuer_run}
    loops[sys.argv[1]](*sys.argv[2:])
