"""What a task sees and writes through its context (both databases)."""

from __future__ import annotations

import pytest

import conveyor
from conveyor import App, Context
from conveyor.job import Status
from tests.worker.conftest import burst


def test_progress_is_recorded_and_a_retry_resumes_from_the_checkpoint(
    app: App, q: conveyor.Queue
) -> None:
    done_items: list[int] = []

    @app.task(max_attempts=3, backoff=conveyor.Fixed(0))
    def pages(ctx: Context, total: int) -> dict[str, int]:
        start = 0 if ctx.checkpoint is None else ctx.checkpoint + 1
        for page in range(start, total):
            if ctx.attempt == 1 and page == 4:
                raise OSError("scanner jammed")
            done_items.append(page)
            ctx.progress(total=total, completed=page + 1, current=page, checkpoint=page)
        return {"resumed_at": start}

    job = pages.enqueue(total=10)
    burst(app)
    done = q.get(job.id)
    assert done and done.status == Status.COMPLETED and done.attempts == 2
    assert done.result == {"resumed_at": 4}
    assert done_items == list(range(10))  # nothing done twice
    assert (done.progress.total, done.progress.completed, done.progress.checkpoint) == (10, 10, 9)


def test_the_context_reflects_the_latest_write(app: App, q: conveyor.Queue) -> None:
    task = app.task(name="noop")(lambda ctx: None)
    task.enqueue()
    ctx = Context(q.claim(limit=1).jobs[0], q)
    assert (ctx.attempt, ctx.checkpoint, ctx.cancelled, ctx.stopping) == (1, None, False, False)
    ctx.progress(checkpoint={"page": 3}, detail={"note": "ok"})
    assert ctx.checkpoint == {"page": 3} and ctx.job.progress.detail == {"note": "ok"}
    before = ctx.job.lease_expires_at
    assert ctx.heartbeat().lease_expires_at >= before  # type: ignore[operator]


@pytest.mark.parametrize("how", ["release", "cancel"])
def test_writes_after_the_claim_is_gone_raise_stale_claim_and_mark_the_context(
    app: App, q: conveyor.Queue, how: str
) -> None:
    app.task(name="noop")(lambda ctx: None).enqueue()
    claim = q.claim(limit=1)
    ctx = Context(claim.jobs[0], q)
    if how == "release":
        q.release(claim.id)
    else:
        q.cancel(claim.jobs[0].id)
    with pytest.raises(conveyor.StaleClaim):
        ctx.progress(completed=1)
    assert ctx.cancelled and ctx.reason
    with pytest.raises(conveyor.StaleClaim):
        ctx.heartbeat()
    with pytest.raises(conveyor.StaleClaim):
        ctx.raise_if_cancelled()
