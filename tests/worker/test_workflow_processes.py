"""A workflow run by real worker processes, one of them SIGKILLed in the middle: every
step still completes exactly once, after the steps it runs after, with the results
passed along intact (both databases)."""

from __future__ import annotations

import signal
from pathlib import Path

import conveyor
from conveyor import Status, WorkflowStatus
from tests.worker.procs import WorkerProcess, effects, start_worker, wait_for

APP = "tests.worker.workflow_apps:books"
PAGES = 8


def _book() -> conveyor.Workflow:
    wf = conveyor.Workflow("book-7")
    extract = wf.add("books.extract", pages=PAGES)
    pages = [
        wf.add("books.ocr", name=f"page-{n}", page=n, seconds=0.4, after=[extract])
        for n in range(1, PAGES + 1)
    ]
    done = wf.add("books.finalize", name="finalize", after=pages)
    wf.add("books.notify", name="notify", after=[done], on_dependency_failure="run")
    return wf


def test_a_worker_killed_mid_workflow_leaves_every_step_completed_once(
    q: conveyor.Queue, db_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    run = q.enqueue_workflow(_book())
    args = ("--concurrency", "4", "--lease", "1")
    first = start_worker(workers, APP, db_url, tmp_path, *args)

    def pages_started() -> int:
        return sum(line.startswith("start page-") for line in effects(tmp_path / "effects.txt"))

    assert wait_for(lambda: pages_started() >= 2, 60), first.log()
    first.signal(signal.SIGCONT)
    first.signal(signal.SIGKILL)
    first.wait(10)
    second = start_worker(workers, APP, db_url, tmp_path, *args)
    assert wait_for(lambda: q.workflow(run.id).is_final, 120), second.log()

    final = q.workflow(run.id)
    assert final.status == WorkflowStatus.COMPLETED, final.counts
    jobs = final.jobs
    assert all(j.status == Status.COMPLETED for j in jobs.values())
    expected = sum(n * 100 + PAGES for n in range(1, PAGES + 1))
    assert jobs["finalize"].result == expected
    assert jobs["notify"].result == {"total": expected, "failed": []}
    assert jobs["page-3"].result == 300 + PAGES

    lines = [line.split() for line in effects(tmp_path / "effects.txt")]
    # The kill hit running steps: some ran again under a new claim.
    assert any(int(j.attempts) > 1 for j in jobs.values()), [j.attempts for j in jobs.values()]

    def counted_at(step: str) -> list[int]:
        """Where the run that completed ``step`` (under its final claim) said it was done."""
        claim = jobs[step].claim_id
        return [i for i, (kind, name, _, by) in enumerate(lines)
                if kind == "done" and name == step and by == claim]  # fmt: skip

    for name, job in jobs.items():
        assert len(counted_at(name)) == 1, (name, lines)  # one run of it counted
        # Every start of a step came after each step it runs after was done for good.
        parents = [n for n, j in jobs.items() if j.id in job.depends_on]
        for i, (kind, step, _, _) in enumerate(lines):
            if kind == "start" and step == name:
                for parent in parents:
                    assert counted_at(parent)[0] < i, (name, parent)
