"""The rescuer, the pruner and the maintainer that runs them (both databases)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import conveyor
from conveyor.job import Status
from conveyor.maintenance import Maintainer, Pruner, Rescuer, Retention
from tests.worker.procs import wait_for


def test_the_rescuer_returns_expired_jobs_to_pending_or_fails_them(q: conveyor.Queue) -> None:
    again = q.enqueue("t", max_attempts=2)
    spent = q.enqueue("t", max_attempts=1)
    alive = q.enqueue("t")
    q.claim(limit=2, lease=0.05)
    q.claim(limit=1, lease=60)
    time.sleep(0.2)
    assert Rescuer(q).run_once() == 2
    assert q.get(again.id).status == Status.PENDING  # type: ignore[union-attr]
    failed = q.get(spent.id)
    assert failed and failed.status == Status.FAILED and "lease expired" in (failed.error or "")
    assert q.get(alive.id).status == Status.RUNNING  # type: ignore[union-attr]
    assert Rescuer(q).run_once() == 0


def test_a_rescuer_given_queues_recovers_only_those(q: conveyor.Queue) -> None:
    mine, theirs = q.enqueue("t", queue="mine"), q.enqueue("t", queue="theirs")
    q.claim("mine", lease=0.05)
    q.claim("theirs", lease=0.05)
    time.sleep(0.2)
    assert Rescuer(q, ["mine"]).run_once() == 1
    assert [j.id for j in q.jobs(status="running")] == [theirs.id]  # not its business
    assert q.jobs(status="pending")[0].id == mine.id


def test_many_rescuers_at_once_recover_each_job_exactly_once(
    q: conveyor.Queue, db_url: str
) -> None:
    q.enqueue_many([{"task": "t", "max_attempts": 5} for _ in range(60)])
    q.claim(limit=60, lease=0.05)
    time.sleep(0.2)
    queues = [conveyor.connect(db_url) for _ in range(6)]  # six workers, six connections
    counts: list[int] = []
    gate = threading.Barrier(len(queues))

    def rescue(queue: conveyor.Queue) -> None:
        gate.wait()
        counts.append(sum(Rescuer(queue).run_once() for _ in range(3)))

    threads = [threading.Thread(target=rescue, args=(x,)) for x in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for x in queues:
        x.close()
    assert sum(counts) == 60
    stats = q.stats()
    assert stats.pending == 60 and stats.running == 0
    assert {j.attempts for j in q.jobs(limit=100)} == {1}


def test_the_pruner_keeps_each_status_for_its_own_retention(q: conveyor.Queue) -> None:
    done, failed, cancelled, pending = (q.enqueue("t", max_attempts=1) for _ in range(4))
    claim = q.claim(limit=2)
    q.complete(done.id, claim.id)
    q.fail(failed.id, claim.id, "boom", retryable=False)
    q.cancel(cancelled.id)
    time.sleep(0.05)
    pruner = Pruner(q, Retention(completed=0, failed=None, cancelled=timedelta(hours=1)))
    assert pruner.run_once() == 1
    assert q.get(done.id) is None
    assert all(q.get(j.id) for j in (failed, cancelled, pending))


def test_the_maintainer_runs_services_on_their_interval_and_early_when_poked(
    tmp_path: Path,
) -> None:
    class Counter:
        name = "counter"

        def __init__(self) -> None:
            self.runs = 0

        def run_once(self) -> int:
            self.runs += 1
            return 0

    counter = Counter()
    maintainer = Maintainer(min_gap=0.01)
    maintainer.add(counter, interval=3600)
    maintainer.start()
    try:
        assert wait_for(lambda: counter.runs == 1, 5)  # a first pass at start
        maintainer.poke("counter")
        assert wait_for(lambda: counter.runs == 2, 5)
    finally:
        maintainer.stop()


def test_a_worker_rescues_only_its_own_queues(q: conveyor.Queue) -> None:
    from tests.worker.conftest import burst

    app = conveyor.App(q)

    @app.task(queue="mine")
    def noop(ctx: conveyor.Context) -> None:
        return None

    stuck = q.enqueue("other.task", queue="theirs")
    q.claim("theirs", lease=0.05)  # another kind of worker, with leases of its own
    lost = q.enqueue(noop.name, queue="mine")
    q.claim("mine", lease=0.05)
    time.sleep(0.2)
    burst(app, rescue_interval=0.05)
    assert q.get(lost.id).status == Status.COMPLETED  # type: ignore[union-attr]
    # (a list, unlike a read of the job, does not recover what it shows)
    assert [j.id for j in q.jobs(status="running")] == [stuck.id]
