"""SQLite's counts of changes of state are written once, by one of two means: the row
trigger, which fires for an UPDATE whose SET names ``key`` (migration 0018), or the
operation's own count statements (``conveyor.drivers.sqlite.counting``), for claims and
completions. A statement that changes a state by neither means, or by both, would leave
its jobs uncounted or count them twice."""

from __future__ import annotations

import re

from conveyor.drivers.sql import load_migrations, load_queries
from conveyor.drivers.sqlite import driver
from conveyor.drivers.sqlite.counting import HANDLERS

_PACKAGE = "conveyor.drivers.sqlite"
# The SET clause of an UPDATE of jobs, up to its FROM or WHERE.
_SET = re.compile(r"UPDATE conveyor_jobs\s+SET\s(?P<set>.*?)\s(?:FROM|WHERE)\s", re.DOTALL)


def _assigns(set_clause: str, column: str) -> bool:
    bare = re.sub(r"--[^\n]*", "", set_clause)
    return re.search(rf"(?:^|,)\s*{column}\s*=", bare) is not None


def _changes_of_state(text: str) -> list[bool]:
    """For each UPDATE of jobs in ``text`` that sets a status: whether it names key."""
    sets = [found["set"] for found in _SET.finditer(text)]
    return [_assigns(s, "key") for s in sets if _assigns(s, "status")]


def test_each_statement_that_changes_a_state_is_counted_by_one_means() -> None:
    queries = load_queries(_PACKAGE, driver._MACROS)
    changing: dict[str, bool] = {}  # statement: whether the row trigger counts it
    for name, text in queries.items():
        for by_trigger in _changes_of_state(text):
            changing[name] = by_trigger
    assert set(HANDLERS) <= changing.keys()
    assert len(changing) > len(HANDLERS)
    for name, by_trigger in changing.items():
        assert by_trigger != (name in HANDLERS), name


def test_the_count_trigger_fires_for_statements_that_name_key() -> None:
    latest = "".join(m.sql for m in load_migrations(_PACKAGE, driver._MACROS))
    trigger = latest[latest.rindex("CREATE TRIGGER conveyor_count_changed") :]
    assert trigger.startswith("CREATE TRIGGER conveyor_count_changed AFTER UPDATE OF key ")
    dependents = latest[latest.rindex("CREATE TRIGGER conveyor_dependency_met") :]
    assert _changes_of_state(dependents) == [True]  # its cancels, counted by the trigger
