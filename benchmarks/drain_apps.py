"""The no-op job every drain runs, and the apps its consumers load.

Every system's job does the same thing: append one line, ``<job number> <time_ns>``,
to a log file of its process (``$BENCH_LOG_DIR/<pid>.log``). The logs prove that every
job ran exactly once and give the span of the drain (first job's start to the last
job's end) without counting any worker's start-up or shutdown. The database comes from
``$BENCH_DB`` (a SQLite path or a PostgreSQL URL), set by ``benchmarks/drains.py``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from typing import Any

_fd: tuple[int, int] | None = None  # (pid, fd): a forked worker opens its own file


def log_job(i: int) -> None:
    """The job: one line in this process's log."""
    global _fd
    pid = os.getpid()
    if _fd is None or _fd[0] != pid:
        path = os.path.join(os.environ["BENCH_LOG_DIR"], f"{pid}.log")
        _fd = (pid, os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    os.write(_fd[1], b"%d %d\n" % (i, time.time_ns()))


# -- conveyor: `conveyor worker --app benchmarks.drain_apps:conveyor_app` --------------------
def _conveyor_app() -> Any:
    import conveyor

    app = conveyor.App()

    @app.task(name="bench.noop", queue="bench")
    def noop(ctx: conveyor.Context, i: int) -> None:
        log_job(i)

    return app


# -- huey: `huey_consumer benchmarks.drain_apps.huey_app` -----------------------------------
def _huey_app() -> Any:
    from huey import SqliteHuey  # type: ignore[import-untyped]

    # WAL is huey's default journal mode; fsync=True is synchronous=FULL.
    huey = SqliteHuey(name="bench", filename=os.environ["BENCH_DB"], fsync=True)

    @huey.task(name="noop")  # type: ignore[untyped-decorator]
    def noop(i: int) -> None:
        log_job(i)

    huey.bench_noop = noop
    return huey


# -- procrastinate: `procrastinate --app benchmarks.drain_apps.procrastinate_app worker` ----
def _procrastinate_app() -> Any:
    import procrastinate

    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=os.environ["BENCH_DB"])
    )

    @app.task(name="noop", queue="bench")
    def noop(i: int) -> None:
        log_job(i)

    return app


# -- pgqueuer: `pgq run benchmarks.drain_apps:pgqueuer_factory` -----------------------------
@contextlib.asynccontextmanager
async def pgqueuer_factory() -> AsyncIterator[Any]:
    import json

    import psycopg
    from pgqueuer import PgQueuer
    from pgqueuer.db import PsycopgDriver

    conn = await psycopg.AsyncConnection.connect(os.environ["BENCH_DB"], autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Any) -> None:
        log_job(json.loads(job.payload)["i"])

    yield pgq
    await conn.close()


def __getattr__(name: str) -> Any:
    """The apps are built on first use, so importing this module needs no peer."""
    builders = {"conveyor_app": _conveyor_app, "huey_app": _huey_app,
                "procrastinate_app": _procrastinate_app}  # fmt: skip
    if name in builders:
        value = builders[name]()
        globals()[name] = value
        return value
    raise AttributeError(name)
