"""``conveyor demo``: enqueue the demo's jobs, run workers and the dashboard in this
process, and show the jobs moving until they are all final or Ctrl-C.

The parts are kept apart so each can be left out: ``Workers`` (threads running
``conveyor.Worker``), ``Dashboard`` (uvicorn serving ``conveyor.web.create_app``
in a thread) and the view loop."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import conveyor
from conveyor import Worker
from conveyor.demo import progress, tasks, workload
from conveyor.errors import ConfigurationError
from conveyor.queue import Queue

# Seconds a stopping worker lets its running tasks finish before releasing them.
STOP_GRACE = 5.0
TICK = 0.5


@dataclass
class Options:
    url: str
    jobs: int = 60
    workers: int = 2
    concurrency: int = 4
    serve: bool = True
    port: int = 8000
    exit_when_done: bool = False
    pace: float = 1.0
    seed: int = 7


class Workers:
    """Worker threads, each with a connection of its own, as separate processes would."""

    def __init__(self, url: str, *, count: int, concurrency: int) -> None:
        host = socket.gethostname()
        self._workers: list[Worker] = []
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []
        for n in range(1, count + 1):
            app = conveyor.App(conveyor.connect(url, migrate=False, use_env=False))
            for task in tasks.app.tasks.values():
                app.add(task)
            worker = Worker(
                app, queues=tasks.QUEUES, concurrency=concurrency, lease=10, grace=STOP_GRACE,
                name=f"{host}:demo-{n}", install_signals=False,
            )  # fmt: skip
            self._workers.append(worker)
            self._threads.append(threading.Thread(
                target=self._run, args=(worker,), name=f"demo-worker-{n}", daemon=True
            ))  # fmt: skip

    def _run(self, worker: Worker) -> None:
        try:
            worker.run()
        except Exception as exc:  # reported at the end; the other workers carry on
            self.errors.append(f"{worker.name}: {type(exc).__name__}: {exc}")
        finally:
            worker.app.queue.close()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def alive(self) -> int:
        return sum(t.is_alive() for t in self._threads)

    def stop(self) -> None:
        for worker in self._workers:
            worker.stop()
        for thread in self._threads:
            thread.join(STOP_GRACE + 15)


class Dashboard:
    """The HTTP API and dashboard on 127.0.0.1, without tokens (loopback only)."""

    def __init__(self, url: str, port: int) -> None:
        import uvicorn

        from conveyor.web import create_app

        self.port = _free_port(port)
        config = uvicorn.Config(
            create_app(url, tokens={}, use_env=False), host="127.0.0.1", port=self.port,
            log_level="warning", access_log=False,
        )  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="demo-dashboard",
                                        daemon=True)  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 15.0) -> bool:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._thread.is_alive():
            if self._server.started:
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


def _free_port(wanted: int) -> int:
    """``wanted`` when it is free on loopback, else one the system picks."""
    for port in (wanted, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise ConfigurationError("no free port on 127.0.0.1 for the dashboard")


class _Remember(logging.Handler):
    """Keeps the workers' warnings for the view instead of letting them scroll over it."""

    def __init__(self, lines: deque[str]) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        # The headline only: a failed attempt's traceback would spill over the view
        # (it is in the job's error, on the dashboard and in ``conveyor show``).
        headline = getattr(record, "headline", None)
        text = headline if isinstance(headline, str) else record.getMessage()
        first = text.strip().splitlines()[0] if text.strip() else ""
        self.lines.append(first)


@dataclass
class Outcome:
    snapshot: progress.Snapshot
    elapsed: float
    interrupted: bool
    dashboard_url: str | None
    job_ids: list[int]
    worker_errors: list[str]


def run(
    q: Queue,
    options: Options,
    *,
    show: Callable[[progress.Snapshot, float, str | None, list[str]], None],
    announce: Callable[[str], None],
) -> Outcome:
    """Run the demo on ``q`` (opened on ``options.url``). ``show`` is called every tick
    with the latest snapshot, the elapsed seconds, the dashboard URL and recent worker
    warnings; ``announce`` prints a line."""
    tasks.set_pace(options.pace)
    tasks.app.bind(q)
    try:
        ids = workload.enqueue(q, workload.plan(options.jobs, seed=options.seed),
                               pace=options.pace)  # fmt: skip
    finally:
        tasks.app.bind(None)
    announce(f"enqueued {len(ids)} demo jobs on {q.url}")
    warnings: deque[str] = deque(maxlen=3)
    handler = _Remember(warnings)
    conveyor_log = logging.getLogger("conveyor")
    conveyor_log.addHandler(handler)
    conveyor_log.propagate = False
    dashboard = _start_dashboard(options, announce)
    workers = Workers(options.url, count=options.workers, concurrency=options.concurrency)
    started = time.monotonic()
    interrupted = False
    try:
        workers.start()
        while True:
            snap = progress.snapshot(q, ids)
            show(snap, time.monotonic() - started, dashboard.url if dashboard else None,
                 list(warnings))  # fmt: skip
            if (options.exit_when_done and snap.done) or not workers.alive():
                break
            time.sleep(TICK)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        announce("stopping: running tasks finish, or go back to pending…")
        workers.stop()
        if dashboard is not None:
            dashboard.stop()
        conveyor_log.removeHandler(handler)
        conveyor_log.propagate = True
    snap = progress.snapshot(q, ids)
    return Outcome(snap, time.monotonic() - started, interrupted,
                   dashboard.url if dashboard else None, ids, workers.errors)  # fmt: skip


def _start_dashboard(options: Options, announce: Callable[[str], None]) -> Dashboard | None:
    if not options.serve:
        return None
    try:
        dashboard = Dashboard(options.url, options.port)
    except ImportError as exc:
        announce(f"no dashboard: it needs the server extra, pip install 'conveyor[server]' ({exc})")
        return None
    if not dashboard.start():
        announce("no dashboard: the web server did not start")
        return None
    announce(f"dashboard: {dashboard.url}")
    return dashboard
