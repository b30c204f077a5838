"""The driver conformance suite for the workflow operations: what a dialect's
statements (or handlers) must do, below the queue, on every database."""

from __future__ import annotations

import json
from typing import Any

import pytest

import conveyor
from conveyor.drivers import operations as db
from conveyor.drivers.base import Driver
from conveyor.job import Status
from tests.drivers.test_conformance import get, insert


@pytest.fixture
def driver(q: conveyor.Queue) -> Driver:
    return q.driver


def _run(d: Driver, op: Any) -> Any:
    with d.session() as s:
        return s.run(op)


def _steps(d: Driver, wid: int, steps: list[tuple[int, str, str | None, int, list[int]]]) -> Any:
    """Insert steps (id, name, key, waiting_for, parents) of run ``wid``."""
    items = [
        [
            i,
            "q",
            "t",
            json.dumps({"n": n}),
            key,
            0,
            None,
            3,
            None,
            name,
            waiting,
            0,
            parents or None,
        ]
        for n, (i, name, key, waiting, parents) in enumerate(steps)
    ]
    return _run(d, db.InsertSteps(workflow_id=wid, items=d.json_param(items)))


def _run_id(d: Driver) -> int:
    return int(_run(d, db.InsertWorkflow(label="w"))[0]["id"])


def test_reserved_ids_are_new_increasing_and_never_handed_out_again(driver: Driver) -> None:
    before = insert(driver)
    ids = [int(r["id"]) for r in _run(driver, db.ReserveJobIds(n=3))]
    assert ids == sorted(ids) and len(set(ids)) == 3 and ids[0] > before
    wid = _run_id(driver)
    rows = _steps(driver, wid, [(ids[0], "a", None, 0, []), (ids[2], "b", None, 1, [ids[0]])])
    assert sorted((r["id"], r["step"]) for r in rows) == [(ids[0], "a"), (ids[2], "b")]
    assert insert(driver) > ids[2]  # an id reserved but left unused is not handed out
    step = get(driver, ids[2])
    assert (step["workflow_id"], step["step"], step["waiting_for"]) == (wid, "b", 1)
    assert (
        json.loads(step["depends_on"])
        if isinstance(step["depends_on"], str)
        else (step["depends_on"]) == [ids[0]]
    )


def test_a_step_whose_key_is_held_answers_no_row(driver: Driver) -> None:
    insert(driver, key="held")
    ids = [int(r["id"]) for r in _run(driver, db.ReserveJobIds(n=2))]
    rows = _steps(
        driver, _run_id(driver), [(ids[0], "a", None, 0, []), (ids[1], "b", "held", 0, [])]
    )
    assert "b" not in {r["step"] for r in rows}


def test_retried_dependents_count_their_unmet_dependencies_again(driver: Driver) -> None:
    first, second = insert(driver), insert(driver)
    ids = [int(r["id"]) for r in _run(driver, db.ReserveJobIds(n=1))]
    wid = _run_id(driver)
    _steps(driver, wid, [(ids[0], "c", None, 2, [first, second])])
    edges = [[ids[0], first, 0], [ids[0], second, 1]]
    _run(driver, db.InsertDependencies(items=driver.json_param(edges)))
    locked = _run(driver, db.LockParents(ids=driver.json_param(ids)))
    assert sorted(int(r["id"]) for r in locked) == [first, second]
    with driver.session() as s:
        s.run(db.CancelJobs(id=second))  # final: met for the edge that runs on failure
        s.run(db.RecountWaiting(ids=driver.json_param(ids)))
    assert get(driver, ids[0])["waiting_for"] == 1  # `first` is still pending
    cancelled = _run(driver, db.CancelJobs(workflow_id=wid))
    assert [int(r["id"]) for r in cancelled] == ids
    assert get(driver, ids[0])["status"] == Status.CANCELLED
    reopened = _run(driver, db.ReopenJob(ids=driver.json_param(ids)))
    assert [int(r["id"]) for r in reopened] == ids
    assert get(driver, ids[0])["status"] == Status.PENDING
