"""The database restarted under load: real worker processes and a ``conveyor serve``
process drain a backlog while the database (a throwaway server of the run's own) is
stopped for a few seconds and started again; then an audit.

Used by ``test_restart.py`` and runnable on its own for bigger numbers:

    python -m tests.faults.restart --backend postgresql --jobs 20000
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

import conveyor
from tests.faults.servers import ThrowawayMariaDB, ThrowawayPostgres, free_port
from tests.worker.procs import REPO, WorkerProcess, audit_runs, effects, wait_for

APP = "tests.worker.apps:chaos"
TASK = "chaos.work"
# Lines a worker or the server writes while the database is gone: the one-line
# warnings it is expected to write (anything with a traceback is a problem).
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\)", re.MULTILINE)
_CONTINUED = re.compile(r"^\s+\S", re.MULTILINE)  # a line that goes on from the one above


class Server(Protocol):
    name: str
    url: str

    def start(self) -> None: ...

    def stop(self, mode: str = "fast") -> None: ...


@dataclass
class Report:
    database: str
    jobs: int
    mode: str
    down_for: float = 0.0  # seconds the database was stopped (stop to started again)
    seconds: float = 0.0
    runs_recorded: int = 0  # task runs that left an effect (re-runs included)
    resumed_after: float = 0.0  # database back until the first job completed
    http_resumed_after: float = 0.0  # database back until the server enqueued again
    answers_while_down: dict[str, int] = field(default_factory=dict)  # error code -> count
    retry_after: set[str] = field(default_factory=set)
    worker_warnings: int = 0  # one-line warnings the workers wrote while it was gone
    server_warnings: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        answers = ", ".join(f"{n} {code}" for code, n in sorted(self.answers_while_down.items()))
        return (
            f"{self.database} ({self.mode} stop): {self.jobs} jobs in {self.seconds:.1f}s; "
            f"database down {self.down_for:.1f}s; {self.runs_recorded} runs recorded; "
            f"work resumed {self.resumed_after:.2f}s and HTTP enqueue "
            f"{self.http_resumed_after:.2f}s after it returned; HTTP while down: {answers}; "
            f"{self.worker_warnings} worker and {self.server_warnings} server warning lines"
        )


class ServeProcess:
    """``conveyor serve`` in a subprocess, its log in a file."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
        command = [sys.executable, "-m", "conveyor", "serve", "--db", url, "--port",
                   str(self.port), "--log-level", "warning", "--rescue-interval", "1"]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def ready(self, timeout: float = 30) -> bool:
        def answers() -> bool:
            try:
                return httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        return wait_for(answers, timeout, every=0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Restart:
    def __init__(
        self,
        server: Server,
        tmp: Path,
        *,
        jobs: int = 3000,
        workers: int = 3,
        concurrency: int = 8,
        lease: float = 5.0,
        down: float = 4.0,
        mode: str = "fast",
        database: str = "",
    ) -> None:
        self.server, self.tmp, self.jobs = server, tmp, jobs
        self.workers, self.concurrency, self.lease = workers, concurrency, lease
        self.down, self.mode = down, mode
        self.effects = tmp / "effects.txt"
        self.report = Report(database or server.name, jobs, mode)
        self._procs: list[WorkerProcess] = []

    def run(self, timeout: float = 240.0) -> Report:
        q = conveyor.connect(self.server.url)
        q.enqueue_many(
            [{"task": TASK, "payload": {"n": i}, "max_attempts": 1000} for i in range(self.jobs)]
        )
        q.close()  # the harness keeps no connection across the restart
        serve = ServeProcess(self.server.url, self.tmp)
        started = time.monotonic()
        try:
            if not serve.ready():
                self.report.problems.append("conveyor serve did not answer /healthz")
                return self.report
            for n in range(self.workers):
                args = ["--concurrency", str(self.concurrency), "--lease", str(self.lease)]
                proc = WorkerProcess(APP, self.server.url, self.tmp, self.effects, *args,
                                     tag=str(n))  # fmt: skip
                self._procs.append(proc.start())
            # Stop the database once a good part of the backlog is done, well before all.
            if not wait_for(lambda: len(effects(self.effects)) >= self.jobs // 4, 120, 0.1):
                self.report.problems.append("the workers did not get going")
                return self.report
            self._outage(serve)
            extra = self._enqueue_over_http(serve)
            self.jobs += extra
            self.report.jobs = self.jobs
            if not wait_for(lambda: self._completed() >= self.jobs, timeout, 0.5):
                self.report.problems.append(f"not every job completed after {timeout:.0f}s")
        finally:
            for p in self._procs:
                p.signal(signal.SIGTERM)
            for p in self._procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
            serve.stop()
        self.report.seconds = time.monotonic() - started
        self._audit(serve)
        return self.report

    def _completed(self) -> int:
        try:
            q = conveyor.connect(self.server.url, migrate=False)
        except conveyor.DatabaseError:
            return -1
        try:
            return q.stats().completed
        except conveyor.DatabaseError:
            return -1
        finally:
            q.close()

    def _outage(self, serve: ServeProcess) -> None:
        r = self.report
        self._log_marks = {p.log_path: len(p.log()) for p in self._procs}
        self._serve_mark = len(serve.log())
        stopped_at = time.monotonic()
        self.server.stop(self.mode)
        # While it is gone, the server answers; what it says is recorded.
        with httpx.Client(base_url=serve.base, timeout=5) as http:
            while time.monotonic() - stopped_at < self.down:
                answer = http.post("/api/jobs", json={"task": TASK, "payload": {"n": -1}})
                if answer.status_code == 503:
                    code = answer.json()["error"]["code"]
                    r.answers_while_down[code] = r.answers_while_down.get(code, 0) + 1
                    r.retry_after.add(answer.headers.get("Retry-After", ""))
                else:  # accepted before it noticed? It must not be: the database is down
                    key = f"HTTP {answer.status_code}"
                    r.answers_while_down[key] = r.answers_while_down.get(key, 0) + 1
                time.sleep(0.2)
        seen = len(effects(self.effects))
        self.server.start()
        back_at = time.monotonic()
        r.down_for = back_at - stopped_at
        self._window = {p.log_path: len(p.log()) for p in self._procs}, len(serve.log())
        if wait_for(lambda: len(effects(self.effects)) > seen, 60, 0.02):
            r.resumed_after = time.monotonic() - back_at
        else:
            r.problems.append("no job ran within 60s of the database's return")

    def _enqueue_over_http(self, serve: ServeProcess) -> int:
        """Jobs enqueued through the server once the database is back: the first one
        accepted tells when the server recovered."""
        back_at = time.monotonic() - self.report.resumed_after
        added = 0
        with httpx.Client(base_url=serve.base, timeout=5) as http:
            deadline = time.monotonic() + 60
            while added < 100 and time.monotonic() < deadline:
                answer = http.post(
                    "/api/jobs", json={"task": TASK, "payload": {"n": 10**6 + added},
                                       "max_attempts": 1000}
                )  # fmt: skip
                if answer.status_code in (200, 201):
                    if added == 0:
                        self.report.http_resumed_after = time.monotonic() - back_at
                    added += 1
                else:
                    time.sleep(0.05)
        if added < 100:
            self.report.problems.append(f"the server enqueued only {added} of 100 jobs")
        return added

    def _audit(self, serve: ServeProcess) -> None:
        r = self.report
        q = conveyor.connect(self.server.url, migrate=False)
        try:
            problems, r.runs_recorded = audit_runs(q, self.jobs, self.effects)
            r.problems += problems
        finally:
            q.close()
        if r.answers_while_down.keys() - {"database_unavailable"}:
            r.problems.append(f"while the database was down the server said {r.answers_while_down}")
        if not r.answers_while_down or r.retry_after != {"1"}:
            r.problems.append(f"503s while down carried Retry-After {r.retry_after}")
        self._audit_logs(serve)

    def _audit_logs(self, serve: ServeProcess) -> None:
        r = self.report
        marks, serve_mark = self._window
        for p in self._procs:
            text = p.log()
            if _TRACEBACK.search(text) or _CONTINUED.search(text):
                r.problems.append(
                    f"a traceback or a message over several lines in {p.log_path.name}"
                )
            during = text[self._log_marks[p.log_path] : marks[p.log_path]]
            r.worker_warnings += sum(" WARNING " in line for line in during.splitlines())
        text = serve.log()
        if _TRACEBACK.search(text) or _CONTINUED.search(text):
            r.problems.append("a traceback or a message over several lines in the server's log")
        during = text[self._serve_mark : serve_mark]
        r.server_warnings = len(during.splitlines())
        if not r.worker_warnings:
            r.problems.append("the workers wrote no warning while the database was gone")
        # One line per failed attempt, with backoff: a handful a second, not a flood.
        cap = 40 * self.workers * max(1.0, r.down_for)
        if r.worker_warnings > cap:
            r.problems.append(f"{r.worker_warnings} warning lines in {r.down_for:.1f}s")


def _server(backend: str) -> ThrowawayPostgres | ThrowawayMariaDB:
    if backend == "postgresql":
        return ThrowawayPostgres().create()
    return ThrowawayMariaDB().create()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["postgresql", "mysql"], default="postgresql")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--down", type=float, default=4.0)
    parser.add_argument("--mode", choices=["fast", "immediate"], default="fast")
    parser.add_argument("--logs", metavar="DIR", help="keep the logs in DIR")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.logs or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        server = _server(args.backend)
        try:
            report = Restart(server, Path(tmp), jobs=args.jobs, workers=args.workers,
                             down=args.down, mode=args.mode).run()  # fmt: skip
        finally:
            server.destroy()
    print(report.summary())
    for problem in report.problems:
        print("PROBLEM:", problem)
    os._exit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
