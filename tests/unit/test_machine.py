"""The state machine is written once (``conveyor.machine``): the schema, ``Status``,
the drivers' guarded writes and docs/state-machine.md must all agree with it."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from conveyor import machine
from conveyor.drivers.sql import load_queries
from conveyor.job import Status
from conveyor.retry import Backoff

ROOT = Path(__file__).resolve().parents[2]
DIALECTS = [
    p.name
    for p in resources.files("conveyor.drivers").iterdir()  # type: ignore[attr-defined]
    if p.is_dir() and p.joinpath("queries").is_dir()
]


def _sql_files(dialect: str, folder: str) -> list[tuple[str, str]]:
    root = resources.files(f"conveyor.drivers.{dialect}").joinpath(folder)
    return [
        (p.name, p.read_text(encoding="utf-8")) for p in root.iterdir() if p.name.endswith(".sql")
    ]


def test_every_transition_names_states_of_status() -> None:
    for t in machine.TRANSITIONS:
        assert set(t.sources) <= set(Status), t.name
        assert t.target is None or t.target in Status, t.name
    # Every state can be reached, and every active state can be left.
    reached = {t.target for t in machine.TRANSITIONS}
    left = {s for t in machine.TRANSITIONS for s in t.sources}
    assert set(Status) <= reached
    assert {Status.PENDING, Status.RUNNING} <= left


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_schemas_check_constraint_lists_exactly_the_states(dialect: str) -> None:
    text = "\n".join(sql for _, sql in _sql_files(dialect, "migrations"))
    checks = re.findall(r"CHECK\s*\(\s*status\s+IN\s*\(([^)]*)\)", text, flags=re.I)
    assert checks, f"{dialect}: no CHECK on status"
    named = set(re.findall(r"'(\w+)'", checks[-1]))
    assert named == {str(s) for s in Status}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_write_that_sets_a_status_is_guarded_by_the_table(dialect: str) -> None:
    # A guard is a {from_<transition>} macro, or states the plan took from the table
    # and passes as :statuses (complete_by_key, whose states depend on an argument).
    unguarded = []
    for name, text in _sql_files(dialect, "queries"):
        parts = re.split(r"^--\s*name:\s*(\w+)\s*$", text, flags=re.M)
        for stmt, body in zip(parts[1::2], parts[2::2], strict=True):
            code = "\n".join(ln for ln in body.splitlines() if not ln.lstrip().startswith("--"))
            if (
                re.search(r"\bSET\s+status\s*=", code)
                and "{from_" not in code
                and ":statuses" not in code
            ):
                unguarded.append(f"{name}:{stmt}")
    assert unguarded == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_guard_macro_names_a_transition(dialect: str) -> None:
    for _, text in _sql_files(dialect, "queries"):
        for name in re.findall(r"\{from_(\w+)\}", text):
            assert name in machine.BY_NAME, name
    # Loaded statements keep no guard unexpanded.
    package = f"conveyor.drivers.{dialect}"
    macros = {"schema": "s", "now": "now()", "errors_kept": "e"}
    for stmt, sql in load_queries(package, macros).items():
        assert "{from_" not in sql, stmt


def test_the_guards_expand_to_the_source_states() -> None:
    macros = machine.sql_macros()
    assert macros["from_cancel"] == "('pending', 'running')"
    assert macros["from_retry"] == "('completed', 'failed', 'cancelled')"
    assert macros["from_complete"] == "('running')"


def test_the_docs_hold_the_table() -> None:
    page = (ROOT / "docs" / "state-machine.md").read_text(encoding="utf-8")
    assert machine.markdown_table() in page


def test_refusals_say_what_the_table_expects() -> None:
    assert machine.refusal(7, "cancel", "completed") == (
        "cannot cancel job 7: expected status pending or running, found completed"
    )
    assert machine.refusal(3, "claim_job", "running") == (
        "cannot claim job 3: expected status pending, with its dependencies met, found running"
    )
    assert machine.refusal(5, "retry", "pending").endswith(
        "expected status completed, failed or cancelled, found pending"
    )


def test_a_failure_runs_again_only_while_retryable_with_attempts_left() -> None:
    again = machine.after_failure(retryable=True, attempts=1, max_attempts=3)
    assert again.target == Status.PENDING
    assert machine.after_failure(retryable=True, attempts=3, max_attempts=3).target == Status.FAILED
    assert machine.after_failure(retryable=False, attempts=1, max_attempts=3).target == (
        Status.FAILED
    )


def test_an_expired_lease_runs_again_while_attempts_remain() -> None:
    assert machine.after_lease_expired(attempts=1, max_attempts=2).target == Status.PENDING
    assert machine.after_lease_expired(attempts=2, max_attempts=2).target == Status.FAILED
    assert machine.lease_expired_error("w1", 2, 5) == (
        "lease expired: worker w1 stopped renewing its claim (attempt 2 of 5)"
    )
    assert machine.lease_expired_cause(None) == "lease expired: worker ? stopped renewing its claim"


def test_a_failed_delivery_backs_off_doubling_up_to_the_cap_then_gives_up() -> None:
    delays = [
        machine.after_failed_delivery(attempts=n, base_s=5, cap_s=30, max_attempts=4)
        for n in range(4)
    ]
    assert [d.delay_s for d in delays] == [5, 10, 20, 30]
    assert [d.give_up for d in delays] == [False, False, False, True]
    # The same back-off as the jobs' own, without jitter.
    assert delays[2].delay_s == Backoff(base=5, cap=30, jitter=0).delay(3)
