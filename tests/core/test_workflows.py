"""Workflows: steps enqueued together, run in dependency order, results passed from
parents to children; runs read, cancelled and retried. Every test runs on each kind of
queue and each database."""

from __future__ import annotations

from typing import Any

import pytest

import conveyor
from conveyor import (
    DuplicateJob,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    Status,
    WorkflowNotFound,
    WorkflowStatus,
)


def _book(label: str = "book-42") -> conveyor.Workflow:
    wf = conveyor.Workflow(label)
    extract = wf.add("books.extract_text", book=42)
    pages = [wf.add("books.ocr_page", book=42, page=n, after=[extract]) for n in (1, 2, 3)]
    done = wf.add("books.finalize", book=42, after=pages)
    wf.add("books.notify_owner", book=42, after=[done], on_dependency_failure="run")
    return wf


def _claim_steps(q: Any, expected: set[str]) -> tuple[conveyor.Claim, dict[str, conveyor.Job]]:
    claim = q.claim(limit=20, count_remaining=False)
    steps = {j.step: j for j in claim.jobs}
    assert set(steps) == expected
    return claim, steps


def test_a_workflow_is_enqueued_as_jobs_carrying_the_run_and_their_step(q: Any) -> None:
    run = q.enqueue_workflow(_book())
    assert list(run.jobs) == [
        "extract_text", "ocr_page", "ocr_page-2", "ocr_page-3", "finalize", "notify_owner",
    ]  # fmt: skip
    assert run.status == WorkflowStatus.RUNNING and run.counts["pending"] == 6
    extract, finalize = run.jobs["extract_text"], run.jobs["finalize"]
    pages = [run.jobs[n] for n in ("ocr_page", "ocr_page-2", "ocr_page-3")]
    stored = q.get(finalize.id)
    assert stored.workflow_id == run.id and stored.step == "finalize"
    assert stored.depends_on == tuple(p.id for p in pages) and stored.waiting_for == 3
    assert stored.payload == {"book": 42} and stored.task == "books.finalize"
    assert q.get(pages[1].id).payload == {"book": 42, "page": 2}
    assert q.dependents(extract.id) == [p.id for p in pages]
    assert q.workflow(run.id).jobs == {name: q.get(j.id) for name, j in run.jobs.items()}
    assert q.get(extract.id).workflow_id == run.id and extract.waiting_for == 0


def test_results_pass_across_fan_out_and_fan_in(q: Any) -> None:
    run = q.enqueue_workflow(_book())
    claim, steps = _claim_steps(q, {"extract_text"})
    q.complete(steps["extract_text"].id, claim.id, result={"pages": 3})
    claim, steps = _claim_steps(q, {"ocr_page", "ocr_page-2", "ocr_page-3"})
    for job in steps.values():
        ctx = conveyor.Context(job, q)
        assert ctx.parent_results() == {"extract_text": {"pages": 3}}
        q.complete(job.id, claim.id, result={"text": f"page {job.payload['page']}"})
    claim, steps = _claim_steps(q, {"finalize"})
    ctx = conveyor.Context(steps["finalize"], q)
    assert ctx.parent_results() == {
        "ocr_page": {"text": "page 1"},
        "ocr_page-2": {"text": "page 2"},
        "ocr_page-3": {"text": "page 3"},
    }
    assert set(ctx.parent_statuses().values()) == {Status.COMPLETED}
    assert ctx.failed_parents() == []
    q.complete(steps["finalize"].id, claim.id, result="book")
    claim, steps = _claim_steps(q, {"notify_owner"})
    assert conveyor.Context(steps["notify_owner"], q).parent_results() == {"finalize": "book"}
    q.complete(steps["notify_owner"].id, claim.id, result="told")
    done = q.workflow(run.id)
    assert done.status == WorkflowStatus.COMPLETED and done.is_final
    assert done.counts == {"pending": 0, "running": 0, "completed": 6, "failed": 0,
                           "cancelled": 0}  # fmt: skip
    assert done.results()["finalize"] == "book" and done.results()["notify_owner"] == "told"


def test_a_failed_step_cancels_what_runs_after_it_while_the_run_step_still_runs(q: Any) -> None:
    run = q.enqueue_workflow(_book())
    claim, steps = _claim_steps(q, {"extract_text"})
    q.complete(steps["extract_text"].id, claim.id)
    claim, steps = _claim_steps(q, {"ocr_page", "ocr_page-2", "ocr_page-3"})
    q.complete(steps["ocr_page"].id, claim.id, result=1)
    q.fail(steps["ocr_page-2"].id, claim.id, "unreadable", retryable=False)
    finalize = q.get(run.jobs["finalize"].id)
    assert finalize.status == Status.CANCELLED
    assert finalize.error == f"dependency job {steps['ocr_page-2'].id} failed"
    assert q.workflow(run.id).status == WorkflowStatus.RUNNING  # page 3 still runs
    q.complete(steps["ocr_page-3"].id, claim.id, result=3)
    claim, steps = _claim_steps(q, {"notify_owner"})
    ctx = conveyor.Context(steps["notify_owner"], q)
    assert ctx.parent_results() == {"finalize": None}
    assert ctx.parent_statuses() == {"finalize": Status.CANCELLED}
    assert ctx.failed_parents() == ["finalize"]
    q.complete(steps["notify_owner"].id, claim.id, result="told of the failure")
    ended = q.workflow(run.id)
    assert ended.status == WorkflowStatus.FAILED
    assert (ended.counts["completed"], ended.counts["failed"], ended.counts["cancelled"]) == (
        4, 1, 1,
    )  # fmt: skip


def test_cancelling_a_run_cancels_every_step_not_yet_final(q: Any) -> None:
    run = q.enqueue_workflow(_book())
    claim, steps = _claim_steps(q, {"extract_text"})
    q.complete(steps["extract_text"].id, claim.id, result="x")
    claim, steps = _claim_steps(q, {"ocr_page", "ocr_page-2", "ocr_page-3"})
    q.complete(steps["ocr_page"].id, claim.id)
    cancelled = q.cancel_workflow(run.id)
    assert cancelled.status == WorkflowStatus.CANCELLED
    assert cancelled.counts == {"pending": 0, "running": 0, "completed": 2, "failed": 0,
                                "cancelled": 4}  # fmt: skip
    assert cancelled.jobs["extract_text"].result == "x"  # what completed stays completed
    with pytest.raises(InvalidTransition):  # a running step's worker is fenced out
        q.complete(steps["ocr_page-2"].id, claim.id)
    assert q.claim(limit=10).jobs == []
    assert q.cancel_workflow(run.id).counts == cancelled.counts  # nothing left to cancel


def test_retrying_a_run_reruns_the_failed_steps_and_those_after_them(q: Any) -> None:
    run = q.enqueue_workflow(_book())
    claim, steps = _claim_steps(q, {"extract_text"})
    q.complete(steps["extract_text"].id, claim.id, result="text")
    claim, steps = _claim_steps(q, {"ocr_page", "ocr_page-2", "ocr_page-3"})
    q.complete(steps["ocr_page"].id, claim.id, result=1)
    q.fail(steps["ocr_page-2"].id, claim.id, "flaky", retryable=False)
    q.complete(steps["ocr_page-3"].id, claim.id, result=3)
    claim, steps = _claim_steps(q, {"notify_owner"})
    q.complete(steps["notify_owner"].id, claim.id, result="failed")
    assert q.workflow(run.id).status == WorkflowStatus.FAILED

    again = q.retry_workflow(run.id)
    assert again.status == WorkflowStatus.RUNNING
    by_step = {n: (j.status, j.waiting_for, j.attempts) for n, j in again.jobs.items()}
    assert by_step["ocr_page-2"] == (Status.PENDING, 0, 0)
    assert by_step["finalize"] == (Status.PENDING, 1, 0)  # waits for page 2 alone
    assert by_step["notify_owner"] == (Status.PENDING, 1, 0)  # runs again after finalize
    assert by_step["ocr_page"][0] == by_step["ocr_page-3"][0] == Status.COMPLETED
    assert again.jobs["ocr_page"].result == 1  # untouched

    claim, steps = _claim_steps(q, {"ocr_page-2"})
    q.complete(steps["ocr_page-2"].id, claim.id, result=2)
    claim, steps = _claim_steps(q, {"finalize"})
    assert conveyor.Context(steps["finalize"], q).parent_results() == {
        "ocr_page": 1, "ocr_page-2": 2, "ocr_page-3": 3,
    }  # fmt: skip
    q.complete(steps["finalize"].id, claim.id, result="book")
    claim, steps = _claim_steps(q, {"notify_owner"})
    assert conveyor.Context(steps["notify_owner"], q).parent_results() == {"finalize": "book"}
    q.complete(steps["notify_owner"].id, claim.id, result="done")
    done = q.workflow(run.id)
    assert done.status == WorkflowStatus.COMPLETED
    assert done.results()["notify_owner"] == "done"
    # A run with nothing failed is left as it is.
    assert q.retry_workflow(run.id).counts == done.counts


def test_a_run_whose_failed_step_was_retried_alone_is_retried_from_its_cancelled_steps(
    q: Any,
) -> None:
    wf = conveyor.Workflow("alone")
    first = wf.add("a")
    second = wf.add("b", after=[first])
    wf.add("c", after=[second])
    run = q.enqueue_workflow(wf)
    claim = q.claim_job(run.jobs["a"].id)
    q.fail(run.jobs["a"].id, claim.id, "broken", retryable=False)
    q.retry(run.jobs["a"].id)  # the failed step alone: what ran after it stays cancelled
    claim = q.claim_job(run.jobs["a"].id)
    q.complete(run.jobs["a"].id, claim.id)
    assert q.workflow(run.id).status == WorkflowStatus.CANCELLED
    again = q.retry_workflow(run.id)
    assert {n: (j.status, j.waiting_for) for n, j in again.jobs.items()} == {
        "a": (Status.COMPLETED, 0), "b": (Status.PENDING, 0), "c": (Status.PENDING, 1),
    }  # fmt: skip
    assert [j.step for j in q.claim(limit=5).jobs] == ["b"]


def test_retrying_a_job_cancelled_for_its_dependency_counts_its_dependencies_again(q: Any) -> None:
    first, second = q.enqueue("first"), q.enqueue("second")
    both = q.enqueue("both", after=[first.id, second.id])
    claim = q.claim_job(first.id)
    q.fail(first.id, claim.id, "broken", retryable=False)
    assert q.get(both.id).status == Status.CANCELLED  # with one of two dependencies unmet
    claim = q.claim_job(second.id)
    q.complete(second.id, claim.id)  # met while the dependent was cancelled: not counted
    q.retry(first.id)
    claim = q.claim_job(first.id)
    q.complete(first.id, claim.id)
    reopened = q.retry(both.id)
    assert reopened.status == Status.PENDING and reopened.waiting_for == 0
    assert [j.id for j in q.claim(limit=5).jobs] == [both.id]


def test_a_job_retried_before_its_dependency_waits_for_it(q: Any) -> None:
    root = q.enqueue("root")
    child = q.enqueue("child", after=[root.id])
    claim = q.claim_job(root.id)
    q.fail(root.id, claim.id, "broken", retryable=False)
    assert q.retry(child.id).waiting_for == 1  # its dependency failed: not met
    q.retry(root.id)
    claim = q.claim(limit=5)
    assert [j.id for j in claim.jobs] == [root.id]
    q.complete(root.id, claim.id)
    assert [j.id for j in q.claim(limit=5).jobs] == [child.id]


def test_chain_and_group_build_runs(q: Any) -> None:
    wf = conveyor.chain(
        conveyor.step("fetch", url="u"),
        conveyor.group(conveyor.step("resize", size=1), conveyor.step("resize", size=2)),
        conveyor.step("publish", name="publish"),
        label="images",
    )
    run = q.enqueue_workflow(wf)
    jobs = run.jobs
    assert list(jobs) == ["fetch", "resize", "resize-2", "publish"]
    assert jobs["resize"].depends_on == (jobs["fetch"].id,)
    assert jobs["publish"].depends_on == (jobs["resize"].id, jobs["resize-2"].id)
    assert jobs["resize-2"].payload == {"size": 2}
    assert q.workflow(run.id).label == "images"


def test_a_bad_step_refuses_the_whole_run(q: Any) -> None:
    q.enqueue("other", key="taken")
    before = q.stats()
    wf = conveyor.Workflow("bad")
    first = wf.add("a")
    wf.add("b", after=[first], priority="high")
    with pytest.raises(InvalidArgument, match="step 'b': priority"):
        q.enqueue_workflow(wf)
    keyed = conveyor.Workflow("keyed")
    keyed.add("a")
    keyed.add("b", key="taken")
    with pytest.raises(DuplicateJob, match="step 'b'"):
        q.enqueue_workflow(keyed)
    twice = conveyor.Workflow("twice")
    twice.add("a", key="k")
    twice.add("b", key="k")
    with pytest.raises(InvalidArgument, match="same key"):
        q.enqueue_workflow(twice)
    with pytest.raises(InvalidArgument, match="no steps"):
        q.enqueue_workflow(conveyor.Workflow("empty"))
    assert q.stats() == before
    assert q.workflows() == []


def test_runs_are_listed_by_status_and_label(q: Any) -> None:
    running, cancelled, other = (
        q.enqueue_workflow(_book(label)).id for label in ("book-1", "book-1", "book-2")
    )
    q.cancel_workflow(cancelled)
    failed = q.enqueue_workflow(conveyor.chain("a.one", "a.two", label="book-1")).id
    claim = q.claim_job(q.workflow(failed).jobs["one"].id)
    q.fail(claim.jobs[0].id, claim.id, "no text", retryable=False)
    completed = q.enqueue_workflow(conveyor.chain("reports.collect", label="book-1")).id
    claim = q.claim_job(q.workflow(completed).jobs["collect"].id)
    q.complete(claim.jobs[0].id, claim.id, None)

    def ids(**filters: Any) -> list[int]:
        return [w.id for w in q.workflows(**filters)]

    assert ids(status="running") == [running, other]
    assert ids(status="cancelled") == [cancelled]
    assert ids(status=WorkflowStatus.FAILED) == [failed]
    assert ids(status="completed") == [completed]
    assert ids(label="book-2") == [other]
    assert ids(label="book-1", status="running") == [running]
    assert ids(label="book-1", newest_first=True, limit=2) == [completed, failed]
    assert ids(label="book-1", status="running", newest_first=True, after=running) == []
    assert ids(label="no such label") == []
    assert all(w.status == "failed" for w in q.workflows(status="failed"))
    for bad in ({"status": "pending"}, {"status": 3}, {"label": ""}, {"label": "x" * 201}):
        with pytest.raises(InvalidArgument):
            q.workflows(**bad)


def test_runs_are_listed_paged_and_missing_ones_refused(q: Any) -> None:
    ids = [q.enqueue_workflow(_book(f"book-{n}")).id for n in range(3)]
    listed = q.workflows()
    assert [w.id for w in listed] == ids
    assert [w.label for w in listed] == ["book-0", "book-1", "book-2"]
    assert all(w.status == WorkflowStatus.RUNNING and w.total == 6 for w in listed)
    assert [w.id for w in q.workflows(limit=2)] == ids[:2]
    assert [w.id for w in q.workflows(after=ids[1])] == ids[2:]
    assert [w.id for w in q.workflows(newest_first=True, limit=2)] == ids[::-1][:2]
    q.cancel_workflow(ids[0])
    assert q.workflows(limit=1)[0].status == WorkflowStatus.CANCELLED
    for call in (q.workflow, q.cancel_workflow, q.retry_workflow):
        with pytest.raises(WorkflowNotFound):
            call(999_999)
    with pytest.raises(JobNotFound):  # a WorkflowNotFound is a JobNotFound too
        q.workflow(999_999)
    with pytest.raises(InvalidArgument):
        q.workflows(limit=0)
    assert q.parents(ids[0]) == []
