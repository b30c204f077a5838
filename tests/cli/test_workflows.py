"""``conveyor workflows``, ``conveyor workflow ID``, ``cancel-workflow``, ``retry-workflow``."""

from __future__ import annotations

import conveyor
from tests.cli.conftest import Cli, assert_one_line_error


def _run(url: str) -> conveyor.WorkflowRun:
    wf = conveyor.Workflow("book-42")
    extract = wf.add("books.extract", book=42)
    page = wf.add("books.ocr", page=1, after=[extract])
    wf.add("books.notify", after=[page], on_dependency_failure="run")
    with conveyor.connect(url) as q:
        run = q.enqueue_workflow(wf)
        claim = q.claim_job(run.jobs["extract"].id)
        q.fail(claim.jobs[0].id, claim.id, "scanner jammed", retryable=False)
        return run


def test_runs_are_listed_and_shown(cli: Cli, sqlite_url: str) -> None:
    run = _run(sqlite_url)
    listed = cli("workflows", "--db", sqlite_url, "--json").json()
    assert [(r["id"], r["label"], r["status"], r["total"]) for r in listed] == [
        (run.id, "book-42", "running", 3)
    ]
    table = cli("workflows", "--db", sqlite_url)
    assert table.code == 0 and "book-42" in table.stdout and "running" in table.stdout
    shown = cli("workflow", str(run.id), "--db", sqlite_url, "--json").json()
    steps = {j["step"]: j["status"] for j in shown["jobs"]}
    assert steps == {"extract": "failed", "ocr": "cancelled", "notify": "pending"}
    text = cli("workflow", str(run.id), "--db", sqlite_url)
    assert text.code == 0 and "scanner jammed" in text.stdout and "notify" in text.stdout


def test_cancel_and_retry_a_run(cli: Cli, sqlite_url: str) -> None:
    run = _run(sqlite_url)
    retried = cli("retry-workflow", str(run.id), "--db", sqlite_url, "--json").json()
    assert {j["step"]: j["status"] for j in retried["jobs"]} == {
        "extract": "pending", "ocr": "pending", "notify": "pending",
    }  # fmt: skip
    cancelled = cli("cancel-workflow", str(run.id), "--db", sqlite_url, "--json").json()
    assert cancelled["status"] == "cancelled" and cancelled["counts"]["cancelled"] == 3


def test_a_missing_run_is_one_line_and_a_non_zero_exit(cli: Cli, sqlite_url: str) -> None:
    _run(sqlite_url)
    result = cli("workflow", "4242", "--db", sqlite_url)
    assert_one_line_error(result, contains="workflow 4242")
    assert_one_line_error(cli("retry-workflow", "4242", "--db", sqlite_url), contains="4242")
    assert cli("workflow", "zero", "--db", sqlite_url).code != 0
