"""The dialects' statements: an operation's variants are lines kept or dropped per call
(``-- if :param`` kept when the parameter is given, ``-- unless :param`` when it is not),
so each marked line must name a field of its operation, or it would never be kept (or
never dropped)."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from conveyor.drivers import operations as db
from conveyor.drivers.mysql.handlers import ADDED_PARAMS
from conveyor.drivers.sql import load_queries

DIALECTS = ("conveyor.drivers.sqlite", "conveyor.drivers.postgres", "conveyor.drivers.mysql")
_MARK = re.compile(r"--\s*(?:if|unless)\s+:(\w+)\s*$", re.MULTILINE)


def _operation_of(name: str) -> type[db.Operation[object]] | None:
    """The operation a statement belongs to: its own name, or a MySQL handler's
    ``<operation>_lock`` / ``<operation>_update`` step."""
    known = db.all_operations()
    for candidate in (name, name.removesuffix("_lock"), name.removesuffix("_update")):
        if candidate in known:
            return known[candidate]
    return None


@pytest.mark.parametrize("package", DIALECTS)
def test_every_marked_line_names_a_field_of_its_operation(package: str) -> None:
    statements = load_queries(package, {})
    wrong, checked = [], 0
    for name, sql in statements.items():
        op = _operation_of(name)
        if op is None:
            continue
        names = {f.name for f in fields(op)}  # type: ignore[arg-type]
        if package == "conveyor.drivers.mysql":
            names |= ADDED_PARAMS.get(op.op, frozenset())
        marked = _MARK.findall(sql)
        checked += len(marked)
        wrong += [f"{name}: :{p}" for p in marked if p not in names]
    assert wrong == []
    assert checked > 40  # the lines were found at all


def test_a_line_marked_unless_is_kept_only_while_its_parameter_is_not_given() -> None:
    statements = load_queries("conveyor.drivers.sqlite", {})
    where = {"queue": "q", "status": None, "key": None, "task": None, "created_after": None,
             "created_before": None, "limit": 10}  # fmt: skip
    oldest = statements.text("list_jobs", {**where, "after": 0})
    newest = statements.text("list_jobs", {**where, "before": 5, "newest": 1})
    assert "ORDER BY id DESC" not in oldest and "ORDER BY id\n" in oldest
    assert "ORDER BY id DESC" in newest and "ORDER BY id\n" not in newest
    assert "id > :after" in oldest and "id < :before" not in oldest
    assert "id < :before" in newest and "id > :after" not in newest
    assert "queue = :queue" in oldest and "status = :status" not in oldest


def test_each_variant_is_made_once_and_kept() -> None:
    statements = load_queries("conveyor.drivers.sqlite", {})
    first = statements.text("complete_jobs", {"items": "[]", "brief": 1})
    again = statements.text("complete_jobs", {"items": "[1]", "brief": 1})
    assert first is again
    assert "RETURNING *" not in first
    assert "RETURNING *" in statements.text("complete_jobs", {"items": "[]"})


_MARKED = re.compile(r"^(?P<line>.*?)\s*--\s*(?P<when>if|unless)\s+:(?P<param>\w+)\s*$")


@pytest.mark.parametrize("package", DIALECTS)
def test_a_where_kept_by_a_parameter_carries_its_conditions_with_it(package: str) -> None:
    # Conditions after a WHERE that only some calls keep must go and come with it: else
    # a call without it sends "SET ..., updated_at = now() AND status IN (...)", which
    # changes every row.
    wrong = []
    for name, sql in load_queries(package, {}).items():
        lines = sql.splitlines()
        for i, line in enumerate(lines):
            head = _MARKED.match(line)
            if head is None or not head["line"].lstrip().upper().startswith("WHERE"):
                continue
            for follower in lines[i + 1 :]:
                if not follower.lstrip().upper().startswith(("AND ", "OR ")):
                    break
                mark = _MARKED.match(follower)
                if mark is None or (mark["when"], mark["param"]) != (head["when"], head["param"]):
                    wrong.append(f"{name}: {follower.strip()}")
    assert wrong == []


@pytest.mark.parametrize(
    ("make", "args"),
    [
        (db.GetJob, {"id": 1, "ids": "[1]"}),
        (db.ClaimIds, {"claim_id": "c", "worker": "w", "lease_s": 1.0}),
        (db.ReleaseJobs, {}),
        (db.CancelJobs, {"queue": "q"}),
        (db.ReopenJob, {"keep_attempts": 1}),
        (db.DeleteJobs, {}),
        (db.DeleteJobs, {"id": 1, "ids": "[1]"}),
        (db.ForgetWorkers, {}),
        (db.ForgetWorkers, {"name": "w", "older_than_s": 60.0}),
    ],
)
def test_an_operation_that_names_no_jobs_or_two_ways_of_naming_them_is_refused(
    make: type[db.Operation[object]], args: dict[str, object]
) -> None:
    with pytest.raises(TypeError, match="exactly one of"):
        make(**args)
