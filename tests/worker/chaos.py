"""The chaos run: real worker processes, SIGKILLed, SIGSTOPped and cut off from the
database while they work through a backlog, then an audit of what happened.

Used by ``test_chaos.py`` and runnable on its own for bigger numbers:

    python -m tests.worker.chaos --backend sqlite --jobs 20000
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import conveyor
from tests.worker.procs import WorkerProcess, audit_runs

APP = "tests.worker.apps:chaos"
TASK = "chaos.work"
PG_APP_NAME = "conveyor_chaos_worker"
# Jobs added when every job is done but no stale write was refused yet, and how often.
_TOP_UP = 500
_MAX_TOP_UPS = 20
# At least this many workers are SIGKILLed in a run: a drain that finishes sooner gets
# more work until they have been.
MIN_KILLS = 5


@dataclass
class Report:
    backend: str
    jobs: int
    seconds: float = 0.0
    kills: int = 0
    stops: int = 0
    connections_terminated: int = 0
    runs_recorded: int = 0  # task runs that left an effect (re-runs included)
    stale_refused: int = 0  # endings refused by the claim guard (from the workers' logs)
    leases_lost: int = 0  # running tasks told their claim was gone
    longest_recovery: float = 0.0  # a kill until none of the victim's claims is running
    top_ups: int = 0  # batches added because no stale write had been refused yet
    locked_out: int = 0  # SQLite: the watcher's own calls timed out behind a frozen worker
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.backend}: {self.jobs} jobs in {self.seconds:.1f}s; {self.kills} SIGKILLs, "
            f"{self.stops} SIGSTOP, {self.connections_terminated} connections terminated; "
            f"{self.runs_recorded} runs recorded, {self.stale_refused} stale writes refused, "
            f"{self.leases_lost} leases lost; longest recovery {self.longest_recovery:.2f}s"
            + (f"; topped up {self.top_ups} time(s)" if self.top_ups else "")
            + (
                f"; the watcher waited out the lock {self.locked_out} time(s)"
                if self.locked_out
                else ""
            )
        )


@dataclass
class _Recovery:
    killed_at: float
    claims: dict[int, str]  # job id -> the dead worker's claim


class Chaos:
    def __init__(
        self,
        url: str,
        tmp: Path,
        *,
        backend: str,
        jobs: int = 5000,
        workers: int = 4,
        concurrency: int = 8,
        lease: float = 1.0,
        kill_every: float = 0.5,
        terminate_every: float | None = None,
        seed: int = 7,
    ) -> None:
        self.url, self.tmp, self.jobs = url, tmp, jobs
        self.workers, self.concurrency, self.lease = workers, concurrency, lease
        self.kill_every, self.terminate_every = kill_every, terminate_every
        self.rng = random.Random(seed)
        self.effects = tmp / "effects.txt"
        self.report = Report(backend, jobs)
        self.host = socket.gethostname()
        self._spawned = 0
        self._all: list[WorkerProcess] = []
        self._refused_seen = False

    # -- running ----------------------------------------------------------------------
    @staticmethod
    def _enqueue(q: conveyor.Queue, first: int, count: int) -> None:
        q.enqueue_many(
            [{"task": TASK, "payload": {"n": i}, "max_attempts": 1000}
             for i in range(first, first + count)]
        )  # fmt: skip

    def run(self, timeout: float = 150.0) -> Report:
        q = conveyor.connect(self.url)
        try:
            self._enqueue(q, 0, self.jobs)
            procs = [self._spawn() for _ in range(self.workers)]
            started = time.monotonic()
            try:
                self._storm(q, procs, started, timeout)
            finally:
                for p in procs:
                    p.signal(signal.SIGCONT)
                    p.signal(signal.SIGTERM)
                for p in procs:
                    try:
                        p.wait(15)
                    except Exception:
                        p.kill()
            self.report.seconds = time.monotonic() - started
            self._audit(q)
        finally:
            q.close()
        return self.report

    def _spawn(self) -> WorkerProcess:
        self._spawned += 1
        args = ["--concurrency", str(self.concurrency), "--lease", str(self.lease), "--grace", "2"]
        proc = WorkerProcess(
            APP, self._worker_url(), self.tmp, self.effects, *args, tag=str(self._spawned)
        )
        self._all.append(proc.start())
        return proc

    def _worker_url(self) -> str:
        if self.report.backend != "postgresql":
            return self.url
        return f"{self.url}&application_name={PG_APP_NAME}"

    def _storm(
        self, q: conveyor.Queue, procs: list[WorkerProcess], started: float, timeout: float
    ) -> None:
        now = time.monotonic()
        next_kill = now + self.kill_every
        next_stop = now + 1.5
        next_cut = now + (self.terminate_every or 0)
        stopped: tuple[WorkerProcess, float] | None = None
        open_recoveries: list[_Recovery] = []
        while True:
            now = time.monotonic()
            if now - started > timeout:
                self.report.problems.append(f"not done after {timeout:.0f}s")
                return
            # Resume a frozen worker before touching the database: on SQLite it may be
            # frozen inside a write transaction, holding the lock every writer waits for.
            if stopped is not None and now >= stopped[1]:
                stopped[0].signal(signal.SIGCONT)
                stopped = None
                next_stop = now + 2.0  # then stop another only if nothing was refused
            try:
                stopped, next_kill, next_stop, next_cut, done = self._step(
                    q, procs, stopped, open_recoveries, now, next_kill, next_stop, next_cut
                )
            except conveyor.DatabaseError:
                # The watcher's reads may recover stale jobs, and so write. Behind a
                # frozen lock holder they time out: that is SQLite, not the workers.
                # MySQL too: a frozen worker may hold row locks mid-transaction, and a
                # write behind them gives up after the lock wait timeout.
                if self.report.backend == "postgresql":
                    raise
                self.report.locked_out += 1
                done = False
            if done:
                return
            time.sleep(0.05)

    def _step(
        self,
        q: conveyor.Queue,
        procs: list[WorkerProcess],
        stopped: tuple[WorkerProcess, float] | None,
        open_recoveries: list[_Recovery],
        now: float,
        next_kill: float,
        next_stop: float,
        next_cut: float,
    ) -> tuple[tuple[WorkerProcess, float] | None, float, float, float, bool]:
        """One look at the run, and the next blow."""
        stats = q.stats()
        if stopped is None and stats.completed + stats.failed + stats.cancelled >= self.jobs:
            enough = self._refused_any() and self.report.kills >= MIN_KILLS
            if enough or self.report.top_ups >= _MAX_TOP_UPS:
                return stopped, next_kill, next_stop, next_cut, True
            # A resumed worker often learns from its heartbeat that its lease is
            # gone and drops its endings itself, so no stale write reaches the
            # database. Go on with more work until one does (the guard is what is
            # under test), freezing a worker again at once; and until enough
            # workers were killed mid-drain.
            self._enqueue(q, self.jobs, _TOP_UP)
            self.jobs += _TOP_UP
            self.report.jobs = self.jobs
            self.report.top_ups += 1
            if not self._refused_any():
                next_stop = now
            return stopped, next_kill, next_stop, next_cut, False
        running = q.jobs(status="running", limit=1000)
        if now >= next_kill:
            candidates = [p for p in procs if stopped is None or p is not stopped[0]]
            victim = self.rng.choice(candidates)
            held = {j.id: j.claim_id for j in running if j.worker == f"{self.host}:{victim.pid}"}
            victim.kill()
            self.report.kills += 1
            open_recoveries.append(_Recovery(time.monotonic(), held))  # type: ignore[arg-type]
            procs[procs.index(victim)] = self._spawn()
            next_kill = now + self.kill_every * self.rng.uniform(0.6, 1.4)
        if stopped is None and now >= next_stop and not self._refused_any():
            # Stop a worker that holds claims, for three leases: others take over its
            # jobs, and when it resumes its writes must be refused.
            busy = {j.worker for j in running}
            holders = [p for p in procs if f"{self.host}:{p.pid}" in busy]
            if holders:
                target = self.rng.choice(holders)
                target.signal(signal.SIGSTOP)
                self.report.stops += 1
                stopped = (target, now + 3 * self.lease)
                # Resumed on time even while this loop waits on a lock the frozen worker
                # holds (a read that folds counts on MySQL, a write on SQLite): the loop
                # must not lengthen the freeze, nor stop killing for as long.
                wake = threading.Timer(3 * self.lease, target.signal, (signal.SIGCONT,))
                wake.daemon = True
                wake.start()
        if self.terminate_every and now >= next_cut:
            self.report.connections_terminated += _terminate_pg_connections(q)
            next_cut = now + self.terminate_every * self.rng.uniform(0.6, 1.4)
        self._settle(q, open_recoveries)
        return stopped, next_kill, next_stop, next_cut, False

    def _settle(self, q: conveyor.Queue, recoveries: list[_Recovery]) -> None:
        """A kill is recovered once none of the victim's claims still holds a job."""
        for rec in list(recoveries):
            for job_id, claim in list(rec.claims.items()):
                job = q.get(job_id)
                if job is None or job.claim_id != claim or job.status != "running":
                    del rec.claims[job_id]
            if not rec.claims:
                took = time.monotonic() - rec.killed_at
                self.report.longest_recovery = max(self.report.longest_recovery, took)
                recoveries.remove(rec)

    # -- auditing ---------------------------------------------------------------------
    def _audit(self, q: conveyor.Queue) -> None:
        r = self.report
        problems, r.runs_recorded = audit_runs(q, self.jobs, self.effects)
        r.problems += problems
        r.stale_refused = self._count_logs(r"refused stale write")
        r.leases_lost = self._count_logs(r"WARNING conveyor\.worker: job \d+: claim lost")
        if r.stale_refused < 1:
            r.problems.append("no stale write was refused")

    def _refused_any(self) -> bool:
        if not self._refused_seen:
            self._refused_seen = self._count_logs(r"refused stale write") > 0
        return self._refused_seen

    def _count_logs(self, pattern: str) -> int:
        regex = re.compile(pattern)
        return sum(len(regex.findall(p.log())) for p in self._all)


def _terminate_pg_connections(q: conveyor.Queue) -> int:
    """Cut every connection of the chaos workers (pool and LISTEN alike)."""
    import psycopg

    from tests.conftest import PG_URL

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (PG_APP_NAME,),
        ).fetchone()
    return int(row[0]) if row else 0


def main(default_jobs: int = 5000) -> None:
    from tests.conftest import drop_schema, fresh_url

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "mysql"], default="sqlite")
    parser.add_argument("--jobs", type=int, default=default_jobs)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url, schema = fresh_url(args.backend, Path(tmp))
        try:
            cut = 1.5 if args.backend == "postgresql" else None
            chaos = Chaos(url, Path(tmp), backend=args.backend, jobs=args.jobs,
                          workers=args.workers, terminate_every=cut)  # fmt: skip
            report = chaos.run(timeout=max(150.0, args.jobs / 20))
        finally:
            if schema:
                drop_schema(schema)
    print(report.summary())
    for problem in report.problems:
        print("PROBLEM:", problem)
    os._exit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
