"""The worker runtime against a server: ``App(RemoteQueue(url, worker_token))`` runs
tasks with nothing but the worker role."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI

import conveyor
from conveyor.client import RemoteQueue
from conveyor.job import Status
from tests.web.conftest import TOKEN_OF


@pytest.mark.slow
def test_a_worker_runs_tasks_through_the_server(
    app: FastAPI, server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    remote = RemoteQueue(server_url, TOKEN_OF["worker"])
    tasks = conveyor.App(remote)

    @tasks.task(name="pages.count", queue="remote", max_attempts=2)
    def count(ctx: conveyor.Context, pages: int) -> int:
        ctx.progress(total=pages, completed=pages, checkpoint=f"page-{pages}")
        if pages == 13:
            raise conveyor.Terminal("unlucky book")
        return pages * 2

    jobs = [count.enqueue(pages=n) for n in range(1, 21)]
    with caplog.at_level(logging.WARNING):
        stats = tasks.worker(burst=True, install_signals=False, concurrency=4).run()
    assert (stats.claimed, stats.completed, stats.failed) == (20, 19, 1)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    with RemoteQueue(server_url, TOKEN_OF["reader"]) as reader:
        finished = {j.id: j for j in reader.jobs(queue="remote", limit=100)}
    for job in jobs:
        pages = job.payload["pages"]
        done = finished[job.id]
        assert done.progress.checkpoint == f"page-{pages}"
        if pages == 13:
            assert done.status == Status.FAILED
            assert done.error is not None and "unlucky book" in done.error
        else:
            assert (done.status, done.result) == (Status.COMPLETED, pages * 2)
    remote.close()
