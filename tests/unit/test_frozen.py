"""``conveyor.frozen.builder``: the same object as the class's own ``__init__`` makes."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

import pytest

from conveyor.drivers.operations import InsertJob, all_operations
from conveyor.frozen import builder, is_twin
from conveyor.job import Job, Status

T = TypeVar("T")
NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)


def test_a_job_built_quickly_is_the_job_init_builds() -> None:
    given: dict[str, Any] = {
        "id": 7, "queue": "q", "task": "t", "payload": "text", "key": "k",
        "priority": -3, "run_at": NOW, "max_attempts": 4, "created_at": NOW,
        "updated_at": NOW, "group": "g", "depends_on": (1, 2), "waiting_for": 2,
        "trace_context": "tc",
    }  # fmt: skip
    made = builder(Job)(**given)
    expected = Job(**given)
    assert type(made) is Job
    assert made == expected
    assert hash(made) == hash(expected)
    assert repr(made) == repr(expected)
    assert made.status is Status.PENDING and made.deduplicated is False  # the defaults
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.priority = 1  # type: ignore[misc]
    assert dataclasses.replace(made, priority=1).priority == 1


def test_an_operation_built_quickly_has_the_same_parameters() -> None:
    given: dict[str, Any] = {
        "queue": "q", "task": "t", "payload": "{}", "key": None, "priority": 0,
        "run_at": None, "max_attempts": 3, "job_group": None, "depends_on": None,
        "waiting_for": 0,
    }  # fmt: skip
    made = builder(InsertJob)(**given)
    assert isinstance(made, InsertJob) and made.op == "insert_job"
    assert made.params() == InsertJob(**given).params()


def test_post_init_runs_and_missing_or_unknown_fields_are_refused() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Span(Generic[T]):
        start: int
        end: int = 10
        label: T | None = None

        def __post_init__(self) -> None:
            if self.end < self.start:
                raise ValueError("end before start")
            object.__setattr__(self, "label", self.label or f"{self.start}-{self.end}")

    make = builder(Span)
    assert make(start=1) == Span(1) == Span(1, 10, "1-10")
    with pytest.raises(ValueError, match="end before start"):
        make(start=5, end=1)
    with pytest.raises(TypeError):
        make(end=3)
    with pytest.raises(TypeError):
        make(start=1, colour="red")


def test_only_frozen_dataclasses_with_slots() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    for cls in (NoSlots, NotFrozen, int):
        with pytest.raises(TypeError, match="frozen dataclass with slots"):
            builder(cls)


def test_the_operations_a_driver_must_run_are_the_frozen_classes() -> None:
    builder(InsertJob)  # its twin subclasses the same base
    found = all_operations()
    assert found["insert_job"] is InsertJob
    assert not any(is_twin(cls) for cls in found.values())
