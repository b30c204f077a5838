"""The counts that claims and endings write themselves on SQLite.

The row trigger that keeps ``conveyor_counts`` fired for every row whose status an
UPDATE set, and SQLite runs a trigger's program for each such row, even one its
``WHEN`` skips: on the claim path that was a tenth or more of the time the write lock
is held per job (``benchmarks/lock_parts.py``). Since migration 0018 it fires only for
an UPDATE whose ``SET`` names ``key`` (``key = conveyor_jobs.key``, which changes
nothing): every statement that changes a state does so, except the two every job makes
on its way through a worker, a claim (pending to running) and an ending that completes
a running job. Those operations run here: their statement, then one INSERT of the
counts per batch, grouped by queue and task, and one of the throughput chart's
completions, in the same transaction. Their guards let only jobs in one state through
(``machine``: ``claim``, ``claim_job``, ``complete``, ``ack``), so the rows returned
say every change made. On a database one migration behind, whose trigger still counts
every row, the count statements write nothing (they read the migration's row in the
same transaction)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

from conveyor.drivers.base import Handler, Session
from conveyor.drivers.operations import Operation
from conveyor.drivers.values import Row
from conveyor.job import Status

_PENDING, _RUNNING, _COMPLETED = Status.PENDING.value, Status.RUNNING.value, Status.COMPLETED.value


def count_moves(session: Session, rows: list[Row], was: str, now: str) -> None:
    """``rows`` (with their queue and task) went from ``was`` to ``now``."""
    jobs = Counter((row["queue"], row["task"]) for row in rows)
    moves = [[queue, state, task, n * sign]
             for (queue, task), n in jobs.items()
             for state, sign in ((was, -1), (now, 1))]  # fmt: skip
    session.execute("count_moves", {"moves": json.dumps(moves)})
    if now == _COMPLETED:
        done: Counter[str] = Counter()
        for (queue, _task), n in jobs.items():
            done[queue] += n
        session.execute("count_completions", {"completed": json.dumps(list(done.items()))})


def _moving(was: str, now: str) -> Handler:
    """An operation whose guard lets only jobs in ``was`` through to ``now``."""

    def run(session: Session, op: Operation[list[Row]]) -> list[Row]:
        rows = session.all(op.op, op.params())
        if rows:
            count_moves(session, rows, was, now)
        return rows

    return run


HANDLERS: Mapping[str, Handler] = {
    **dict.fromkeys(("claim_jobs", "claim_ids"), _moving(_PENDING, _RUNNING)),
    **dict.fromkeys(("ack_claim", "complete_jobs"), _moving(_RUNNING, _COMPLETED)),
}
