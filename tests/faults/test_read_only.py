"""A database that turns read-only while the queue is open: writes are refused with
``StorageReadOnly`` (HTTP 503 ``storage_read_only`` with ``Retry-After``), reads go on,
and writes go through again once the database accepts them. PostgreSQL and MariaDB on
servers of the test's own (``default_transaction_read_only``, ``read_only``); SQLite
through a connection that may only read."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

import conveyor
from tests.faults.restart import ServeProcess
from tests.faults.servers import ThrowawayMariaDB, ThrowawayPostgres
from tests.faults.storage import failing_disk
from tests.worker.procs import WorkerProcess, audit_runs, wait_for

TASK = "ro.work"


def _enqueued(q: conveyor.Queue) -> bool:
    try:
        q.enqueue(TASK, {"n": 1})
    except conveyor.StorageReadOnly:
        return False
    return True


def _accepted(base: str) -> bool:
    answer = httpx.post(f"{base}/api/jobs", json={"task": TASK}, timeout=30)
    return answer.status_code == 201


def _turns_read_only_and_back(
    url: str, tmp_path: Path, read_only: object, writable: object
) -> None:
    q = conveyor.connect(url)
    serve = ServeProcess(url, tmp_path)
    try:
        assert serve.ready(90)
        before = [q.enqueue(TASK, {"n": n}).id for n in range(5)]
        assert _accepted(serve.base)
        read_only()  # type: ignore[operator]

        # Pooled connections opened before the change are refused too.
        with pytest.raises(conveyor.StorageReadOnly):
            for _ in range(20):  # as many as the pool may hold
                q.enqueue(TASK, {"n": -1})
        answer = httpx.post(f"{serve.base}/api/jobs", json={"task": TASK}, timeout=30)
        for _ in range(20):
            if answer.status_code != 201:
                break
            answer = httpx.post(f"{serve.base}/api/jobs", json={"task": TASK}, timeout=30)
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "storage_read_only"
        assert answer.headers["Retry-After"] == "5"
        # Reads go on, and every job acknowledged before is there.
        assert all(q.get(job_id) is not None for job_id in before)
        assert httpx.get(f"{serve.base}/api/jobs", timeout=30).status_code == 200

        writable()  # type: ignore[operator]
        assert wait_for(lambda: _enqueued(q), 30, every=0.2)
        assert wait_for(lambda: _accepted(serve.base), 30, every=0.2)
    finally:
        serve.stop()
        q.close()
    assert "Traceback" not in serve.log()


@pytest.mark.slow
def test_postgresql_turned_read_only_refuses_writes_then_recovers(
    own_postgres: ThrowawayPostgres, tmp_path: Path
) -> None:
    _turns_read_only_and_back(
        own_postgres.url,
        tmp_path,
        lambda: own_postgres.set("default_transaction_read_only", "on"),
        lambda: own_postgres.set("default_transaction_read_only", "off"),
    )


@pytest.mark.slow
def test_mariadb_turned_read_only_refuses_writes_then_recovers(
    own_mariadb: ThrowawayMariaDB, tmp_path: Path
) -> None:
    # read_only binds users without the READ ONLY ADMIN privilege: not root.
    url = own_mariadb.add_user("conveyor_app")
    _turns_read_only_and_back(
        url,
        tmp_path,
        lambda: own_mariadb.set("read_only", "1"),
        lambda: own_mariadb.set("read_only", "0"),
    )


def test_sqlite_read_only_connection_refuses_writes_with_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    q = conveyor.connect(f"sqlite:///{path}")
    kept = q.enqueue(TASK, {"n": 1})
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    with pytest.raises(conveyor.StorageReadOnly, match="read-only"):
        q.enqueue(TASK, {"n": 2}, conn=reader)
    reader.close()
    assert q.get(kept.id) is not None and q.stats().pending == 1
    q.close()


class _Enqueuer(threading.Thread):
    """Enqueues ``storage.work`` jobs as fast as the database takes them, keeping the ids
    acknowledged and counting the refusals, until told to stop."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.q = conveyor.connect(url)
        self.acknowledged: list[int] = []
        self.refused = 0
        # Payloads refused by an error that says the write may be there after all (the
        # disk failed during the commit's fsync): such a job may come back on repair.
        self.maybe_written: list[int] = []
        self.maybe_said: list[str] = []
        self.other: list[BaseException] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            try:
                job = self.q.enqueue("storage.work", {"n": n, "sleep": 0.05})
            except conveyor.StorageReadOnly as exc:
                self.refused += 1
                if exc.outcome_unknown:
                    self.maybe_written.append(n)
                    self.maybe_said.append(exc.message)
                time.sleep(0.05)
                continue
            except BaseException as exc:  # reported by the test, never swallowed
                self.other.append(exc)
                return
            self.acknowledged.append(job.id)
            n += 1
            time.sleep(0.01)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        self.q.close()


def test_sqlite_on_a_file_system_turned_read_only_under_a_running_queue(tmp_path: Path) -> None:
    """The file system under a SQLite queue goes read-only (the kernel's answer to a disk
    error) while a worker process drains it, a server serves it and an enqueuer fills it:
    the library refuses writes with ``StorageReadOnly``, the server answers 503
    ``storage_read_only`` with ``Retry-After``, reads go on, and the worker keeps running,
    saying why on one line. Once the file system is repaired, a worker completes every
    acknowledged job exactly once."""
    disk = failing_disk(tmp_path)
    if isinstance(disk, str):
        pytest.skip(disk)
    url = f"sqlite:///{disk.mount / 'queue.db'}"
    fx = tmp_path / "effects.txt"
    q = conveyor.connect(url)
    serve = ServeProcess(url, tmp_path)
    worker = WorkerProcess("tests.faults.apps:storage", url, tmp_path, fx,
                           "--concurrency", "4", "--lease", "3", tag="0").start()  # fmt: skip
    enqueuer = _Enqueuer(url)
    try:
        assert serve.ready(90)
        enqueuer.start()
        assert wait_for(lambda: q.stats().completed >= 20, 60), q.stats()
        disk.fail()
        assert disk.read_only()
        failed_at = time.monotonic()

        with pytest.raises(conveyor.StorageReadOnly, match="read-only") as refused:
            q.enqueue("storage.work", {"n": -1})
        assert wait_for(lambda: enqueuer.refused >= 5, 30), enqueuer.refused
        answer = httpx.post(
            f"{serve.base}/api/jobs",
            json={"task": "storage.work", "payload": {"n": -4}},
            timeout=30,
        )
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "storage_read_only"
        # What may come back after the repair: writes refused with the outcome unknown.
        maybe = [-1] if refused.value.outcome_unknown else []
        maybe += [-4] if answer.json()["error"].get("outcome_unknown") else []
        assert answer.headers["Retry-After"] == "5"
        # Reads go on, and every job acknowledged before is there.
        assert httpx.get(f"{serve.base}/api/jobs", timeout=30).status_code == 200
        acknowledged = list(enqueuer.acknowledged)
        assert all(q.get(job_id) is not None for job_id in acknowledged)
        # The worker rides it out: alive, saying why on a line, not in a crash loop.
        time.sleep(max(0.0, failed_at + 5 - time.monotonic()))
        assert worker.alive(), worker.log()
        log = worker.log()
        assert "read-only" in log, log[-3000:]
        warnings = [line for line in log.splitlines() if "WARNING" in line]
        assert len(warnings) < 40 * 6, f"{len(warnings)} warning lines in about 5 s"
        enqueuer.stop()
        assert not enqueuer.other, enqueuer.other
        assert enqueuer.acknowledged == acknowledged  # nothing was acknowledged meanwhile

        # The operator stops what runs on it, repairs it, and starts a worker again.
        worker.signal(15)
        stopping = time.monotonic()
        assert worker.wait(60) == 0, worker.log()[-3000:]
        print(f"the worker stopped in {time.monotonic() - stopping:.1f}s")
        serve.stop()
        q.close()
        disk.repair()
        assert not disk.read_only()
        q = conveyor.connect(url)
        serve = ServeProcess(url, tmp_path)
        worker = WorkerProcess("tests.faults.apps:storage", url, tmp_path, fx,
                               "--concurrency", "4", "--lease", "3", tag="1").start()  # fmt: skip
        assert serve.ready(90)
        q.enqueue("storage.work", {"n": -2})
        answer = httpx.post(
            f"{serve.base}/api/jobs",
            json={"task": "storage.work", "payload": {"n": -3}},
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        # Every acknowledged job is there, and besides them (and the two just sent) only
        # jobs whose enqueue said it may have been written.
        jobs = q.jobs(limit=len(acknowledged) + len(enqueuer.maybe_written) + 100)
        known = set(acknowledged) | {answer.json()["id"]}
        others = [j for j in jobs if j.id not in known and j.payload != {"n": -2}]
        assert set(acknowledged) <= {j.id for j in jobs}
        maybe += enqueuer.maybe_written
        assert all(j.payload["n"] in maybe for j in others), ([j.payload for j in others], maybe)
        assert all("may have been written" in said for said in enqueuer.maybe_said)
        total = len(acknowledged) + 2 + len(others)

        def drained() -> bool:
            stats = q.stats()
            return stats.completed == total and stats.pending == stats.running == 0

        drained_in_time = wait_for(drained, 120, every=0.5)
        rows = Counter(str(j.status) for j in q.jobs(limit=total + 100))
        failed = [(j.id, j.attempts, j.error) for j in q.jobs(status="failed")]
        assert drained_in_time, (q.stats(), total, rows, failed)
        problems, runs = audit_runs(q, total, fx)
        assert not problems, problems[:10]
    finally:
        if enqueuer.is_alive():
            enqueuer.stop()
        worker.signal(15)
        if worker.proc is not None:
            worker.wait(30)
        serve.stop()
        q.close()
        disk.release()
    for log in (worker.log(), serve.log()):
        assert "Traceback" not in log, log[-3000:]
    maybe_count = len(enqueuer.maybe_written)
    print(f"{total} jobs completed, {enqueuer.refused} enqueues refused while read-only "
          f"({maybe_count} of them maybe written), {runs} runs recorded")  # fmt: skip
