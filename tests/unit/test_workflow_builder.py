"""Building workflows: names, options, payloads and the graph checks, before any queue."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import conveyor
from conveyor import InvalidArgument

app = conveyor.App(immediate=False)


@app.task(name="books.ocr_page", queue="ocr", priority=5, max_attempts=7)
def ocr_page(ctx: conveyor.Context, book: int, page: int, key: str = "") -> None:
    """A task with a parameter named like an option (``key``)."""


def test_steps_are_named_after_their_task_and_numbered_when_taken() -> None:
    wf = conveyor.Workflow("w")
    first = wf.add("a.b.extract")
    second = wf.add("extract")
    wf.add("x", name="extract-3")
    third = wf.add("extract")
    assert [first.name, second.name, third.name] == ["extract", "extract-2", "extract-4"]
    assert len(wf) == 4 and "extract-3" in wf and wf["extract"] is first


def test_a_task_gives_its_name_payload_and_defaults_and_keeps_its_parameters() -> None:
    wf = conveyor.Workflow("w")
    s = wf.add(ocr_page, book=1, page=2, key="kept", group="book-1")
    assert s.task == "books.ocr_page" and s.name == "ocr_page"
    assert s.payload == {"book": 1, "page": 2, "key": "kept"}  # the task's own parameter
    assert s.options == {"group": "book-1", "queue": "ocr", "priority": 5, "max_attempts": 7}
    named = wf.add("plain", queue="q", key="k", run_at=datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert named.payload is None and named.options["key"] == "k"
    with pytest.raises(InvalidArgument, match="arguments for task books.ocr_page"):
        wf.add(ocr_page, book=1, pages=2)


def test_bad_graphs_are_refused_where_they_are_built() -> None:
    wf, other = conveyor.Workflow("w"), conveyor.Workflow("other")
    a = wf.add("a")
    foreign = other.add("b")
    with pytest.raises(InvalidArgument, match="belongs to workflow 'other'"):
        wf.add("c", after=[foreign])
    with pytest.raises(InvalidArgument, match="already has a step 'a'"):
        wf.add("c", name="a")
    with pytest.raises(InvalidArgument, match="expected a list of steps"):
        wf.add("c", after=a)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="expected steps of this workflow"):
        wf.add("c", after=["a"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="on_dependency_failure"):
        wf.add("c", after=[a], on_dependency_failure="sometimes")
    with pytest.raises(InvalidArgument, match="task"):
        wf.add(42)
    assert [s.name for s in wf] == ["a"]  # nothing refused was added


def test_the_wire_form_round_trips_and_is_checked() -> None:
    wf = conveyor.Workflow("w")
    a = wf.add("a", n=1)
    wf.add("b", after=[a], on_dependency_failure="run", priority=3)
    again = conveyor.Workflow.from_wire(wf.to_wire())
    assert again.to_wire() == wf.to_wire()
    with pytest.raises(InvalidArgument, match=r"steps\[1\]: after: unknown step 'zz'"):
        conveyor.Workflow.from_wire({"steps": [{"task": "a"}, {"task": "b", "after": ["zz"]}]})
    with pytest.raises(InvalidArgument, match="unknown field"):
        conveyor.Workflow.from_wire({"steps": [{"task": "a", "colour": "red"}]})
    with pytest.raises(InvalidArgument, match="non-empty list"):
        conveyor.Workflow.from_wire({"label": "x", "steps": []})


def test_chain_and_group_wire_their_parts() -> None:
    chord = conveyor.chain(
        conveyor.group(conveyor.step("page", n=1), conveyor.step("page", n=2)),
        conveyor.step("finalize"),
    )
    by_name = {s.name: s for s in chord}
    assert [p.name for p in by_name["finalize"].after] == ["page", "page-2"]
    assert by_name["page"].after == ()
    nested = conveyor.chain("first", chord, "last")
    names = {s.name: [p.name for p in s.after] for s in nested}
    assert names == {"first": [], "page": ["first"], "page-2": ["first"],
                     "finalize": ["page", "page-2"], "last": ["finalize"]}  # fmt: skip
    with pytest.raises(InvalidArgument, match="itself"):
        nested.include(nested)
    with pytest.raises(InvalidArgument):
        conveyor.chain()
    with pytest.raises(InvalidArgument, match="step"):
        conveyor.group(("page", {"n": 1}))
    with pytest.raises(InvalidArgument, match="after"):
        conveyor.step("page", after=[])
