"""Dependencies: a job runs only after the jobs it names completed; when one of them
fails for good or is cancelled, it is cancelled too (or runs anyway, as chosen)."""

from __future__ import annotations

import pytest

import conveyor
from conveyor import InvalidArgument, InvalidTransition, Status


def _finish(q: conveyor.Queue, job: conveyor.Job, *, fail: bool = False) -> conveyor.Job:
    claim = q.claim_job(job.id)
    if fail:
        return q.fail(job.id, claim.id, "broken", retryable=False)
    return q.complete(job.id, claim.id)


def _ids(claim: conveyor.Claim) -> list[int]:
    return [j.id for j in claim.jobs]


def test_a_dependent_waits_until_its_dependency_completes(q: conveyor.Queue) -> None:
    extract = q.enqueue("extract")
    ocr = q.enqueue("ocr", after=[extract.id])
    assert ocr.status == Status.PENDING and ocr.waiting_for == 1
    assert ocr.depends_on == (extract.id,)
    first = q.claim(limit=10)
    assert _ids(first) == [extract.id]  # the dependent is not claimable
    assert q.claim(limit=10).jobs == []
    with pytest.raises(InvalidTransition):
        q.claim_job(ocr.id)
    q.complete(extract.id, first.id)
    released = q.get(ocr.id)
    assert released is not None and released.waiting_for == 0
    assert _ids(q.claim(limit=10)) == [ocr.id]
    assert q.dependents(extract.id) == [ocr.id]


def test_a_pipeline_and_a_fan_in_release_in_order(q: conveyor.Queue) -> None:
    extract = q.enqueue("extract")
    pages = [q.enqueue("ocr", {"page": n}, after=[extract.id]) for n in range(3)]
    finalize = q.enqueue("finalize", after=[p.id for p in pages])
    assert finalize.waiting_for == 3
    _finish(q, extract)
    batch = q.claim(limit=10, count_remaining=False)
    assert set(_ids(batch)) == {p.id for p in pages}
    for page in pages[:2]:
        q.complete(page.id, batch.id)
        assert q.get(finalize.id).waiting_for > 0  # type: ignore[union-attr]
    q.complete(pages[2].id, batch.id)
    assert _ids(q.claim(limit=10)) == [finalize.id]


def test_a_failed_dependency_cancels_its_dependents_transitively(q: conveyor.Queue) -> None:
    root = q.enqueue("root")
    child = q.enqueue("child", after=[root.id])
    grandchild = q.enqueue("grandchild", after=[child.id])
    bystander = q.enqueue("other")
    _finish(q, root, fail=True)
    for job, blamed in ((child, root), (grandchild, child)):
        now = q.get(job.id)
        assert now is not None and now.status == Status.CANCELLED
        assert now.error == f"dependency job {blamed.id} " + (
            "failed" if blamed is root else "cancelled"
        )
        assert now.finished_at is not None
    assert q.get(bystander.id).status == Status.PENDING  # type: ignore[union-attr]
    stats = q.stats()
    assert (stats.cancelled, stats.failed, stats.pending) == (2, 1, 1)


def test_cancelling_a_dependency_cancels_its_dependents(q: conveyor.Queue) -> None:
    root = q.enqueue("root")
    child = q.enqueue("child", after=[root.id])
    q.cancel(root.id)
    assert q.get(child.id).status == Status.CANCELLED  # type: ignore[union-attr]


def test_on_dependency_failure_run_lets_the_dependent_run(q: conveyor.Queue) -> None:
    root = q.enqueue("root")
    cleanup = q.enqueue("cleanup", after=[root.id], on_dependency_failure="run")
    _finish(q, root, fail=True)
    assert _ids(q.claim(limit=5)) == [cleanup.id]


def test_a_retried_dependency_blocks_its_dependent_again(q: conveyor.Queue) -> None:
    root = q.enqueue("root")
    cleanup = q.enqueue("cleanup", after=[root.id], on_dependency_failure="run")
    _finish(q, root, fail=True)
    assert q.get(cleanup.id).waiting_for == 0  # type: ignore[union-attr]
    q.retry(root.id)  # the dependency will run again: the dependent waits for it
    assert q.get(cleanup.id).waiting_for == 1  # type: ignore[union-attr]
    assert _ids(q.claim(limit=5)) == [root.id]


def test_depending_on_finished_jobs(q: conveyor.Queue) -> None:
    done = q.enqueue("done")
    _finish(q, done)
    broken = q.enqueue("broken")
    _finish(q, broken, fail=True)
    ready = q.enqueue("ready", after=[done.id])
    assert ready.waiting_for == 0 and ready.status == Status.PENDING
    doomed = q.enqueue("doomed", after=[done.id, broken.id])
    assert doomed.status == Status.CANCELLED
    assert doomed.error == f"dependency job {broken.id} failed"
    anyway = q.enqueue("anyway", after=[broken.id], on_dependency_failure="run")
    assert anyway.waiting_for == 0
    assert set(_ids(q.claim(limit=5))) == {ready.id, anyway.id}


def test_a_missing_dependency_is_refused_and_writes_nothing(q: conveyor.Queue) -> None:
    real = q.enqueue("real")
    before = q.stats()
    with pytest.raises(InvalidArgument, match="after: job 999999 does not exist"):
        q.enqueue("t", after=[real.id, 999999])
    with pytest.raises(InvalidArgument, match="after"):
        q.enqueue("t", after="12")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="on_dependency_failure"):
        q.enqueue("t", after=[real.id], on_dependency_failure="maybe")  # type: ignore[arg-type]
    assert q.stats() == before
    assert q.dependents(real.id) == []


def test_dependencies_in_a_batch_and_over_keys(q: conveyor.Queue) -> None:
    first = q.enqueue("first")
    jobs = q.enqueue_many(
        [{"task": "a", "after": [first.id]}, {"task": "b", "after": [first.id], "key": "k"}]
    )
    assert [j.waiting_for for j in jobs] == [1, 1]
    again = q.enqueue("b", after=[first.id], key="k")
    assert again.id == jobs[1].id and again.deduplicated
    _finish(q, first)
    assert set(_ids(q.claim(limit=5))) == {j.id for j in jobs}
