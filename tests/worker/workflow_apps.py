"""The app that worker processes run in the workflow process test
(``--app tests.worker.workflow_apps:books``). Each step records when it starts and when
it is done (with its claim id) in the effects file, and passes results on through
``ctx.parent_results()``."""

from __future__ import annotations

import time

import conveyor
from tests.worker.apps import record

books = conveyor.App()


def _start(ctx: conveyor.Context) -> None:
    record(f"start {ctx.job.step} {ctx.attempt} {ctx.claim_id}")


def _done(ctx: conveyor.Context) -> None:
    record(f"done {ctx.job.step} {ctx.attempt} {ctx.claim_id}")


@books.task(name="books.extract")
def extract(ctx: conveyor.Context, pages: int) -> dict[str, int]:
    _start(ctx)
    _done(ctx)
    return {"pages": pages}


@books.task(name="books.ocr")
def ocr(ctx: conveyor.Context, page: int, seconds: float) -> int:
    _start(ctx)
    pages = ctx.parent_results()["extract"]["pages"]
    time.sleep(seconds)
    _done(ctx)
    return page * 100 + pages


@books.task(name="books.finalize")
def finalize(ctx: conveyor.Context) -> int:
    _start(ctx)
    total = sum(ctx.parent_results().values())
    _done(ctx)
    return total


@books.task(name="books.notify")
def notify(ctx: conveyor.Context) -> dict[str, object]:
    _start(ctx)
    told = {"total": ctx.parent_results()["finalize"], "failed": ctx.failed_parents()}
    _done(ctx)
    return told
