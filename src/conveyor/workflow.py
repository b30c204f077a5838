"""Workflows: many jobs enqueued together as the steps of one run, each step running
after the steps it names.

    wf = conveyor.Workflow("book-42")
    extract = wf.add(extract_text, book=42)
    pages = [wf.add(ocr_page, book=42, page=n, after=[extract]) for n in range(1, 301)]
    done = wf.add(finalize, book=42, after=pages)
    wf.add(notify_owner, book=42, after=[done], on_dependency_failure="run")
    run = q.enqueue_workflow(wf)            # every step in one transaction

A step is an ordinary job (dedupe, limits, snooze and fencing apply) that carries its
run's id and its step name; it runs once every step it names completed. ``chain`` and
``group`` build workflows from step specs (``step(task, **kwargs)``).

Building a workflow touches no database: a graph that cannot be right (an unknown step
in ``after``, a step of another workflow, a name used twice) raises ``InvalidArgument``
where it is built, and the options are checked again by ``enqueue_workflow`` before
anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from conveyor import validation as check
from conveyor.errors import InvalidArgument
from conveyor.job import Job, Status

# The keywords of ``Workflow.add`` that are options of the step's job; every other
# keyword is the task's payload (for a ``Task``, unless it has a parameter of that name).
STEP_OPTIONS = frozenset(
    {"queue", "priority", "max_attempts", "key", "run_at", "group", "on_dependency_failure"}
)
MAX_STEPS = 100_000
MAX_LABEL_LENGTH = 200


@runtime_checkable
class TaskLike(Protocol):
    """What a step needs of a registered task (``conveyor.Task``)."""

    name: str
    queue: str
    priority: int
    max_attempts: int | None

    @property
    def binding(self) -> Any: ...


class WorkflowStatus(StrEnum):
    """Where a run stands, read from its steps: ``running`` while any step is pending or
    running; then ``failed`` when a step failed, ``cancelled`` when a step was
    cancelled (and none failed), else ``completed``."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, eq=False)
class Step:
    """One step of a workflow: a task, its payload, the job options chosen, and the steps
    it runs after. Made by ``Workflow.add``; pass it in a later step's ``after``."""

    workflow: Workflow = field(repr=False)
    name: str
    task: str
    payload: Any
    after: tuple[Step, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def on_dependency_failure(self) -> str:
        return str(self.options.get("on_dependency_failure", "cancel"))

    def __repr__(self) -> str:
        return f"<Step {self.name} task={self.task} after={[s.name for s in self.after]}>"


@dataclass(frozen=True, slots=True)
class StepSpec:
    """A task and its arguments, not yet part of a workflow: what ``chain`` and ``group``
    take. Make one with ``conveyor.step(task, **kwargs)`` (the same keywords as
    ``Workflow.add``, ``after`` excepted)."""

    task: Any
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None


def step(task: Any, /, *, name: str | None = None, **kwargs: Any) -> StepSpec:
    """A step spec for ``chain`` and ``group``: ``step(ocr_page, book=42, page=1)``."""
    if "after" in kwargs:
        raise InvalidArgument("after: chain and group decide what a step runs after")
    return StepSpec(task, dict(kwargs), name)


class Workflow:
    """Steps to enqueue together. ``label``: a name for people (not unique)."""

    def __init__(self, label: str = "workflow") -> None:
        self.label = check.name(label, "label", max_length=MAX_LABEL_LENGTH)
        self._steps: dict[str, Step] = {}
        self._counters: dict[str, int] = {}

    # -- building ---------------------------------------------------------------------
    def add(
        self,
        task: Any,
        /,
        *,
        name: str | None = None,
        after: Iterable[Step] = (),
        **kwargs: Any,
    ) -> Step:
        """Add a step running ``task`` (a ``conveyor.Task`` or a task name) with the
        keyword arguments as its payload, once every step in ``after`` completed. The
        keywords ``queue``, ``priority``, ``max_attempts``, ``key``, ``run_at``, ``group``
        and ``on_dependency_failure`` are options of the step's job. ``name``: unique in
        the workflow (default: the task's name, numbered when taken)."""
        task_name, payload, options = _resolve(task, kwargs)
        return self._put(name, task_name, payload, self._parents(after), options)

    def _put(
        self,
        name: Any,
        task_name: str,
        payload: Any,
        parents: tuple[Step, ...],
        options: dict[str, Any],
    ) -> Step:
        if len(self._steps) >= MAX_STEPS:
            raise InvalidArgument(f"a workflow has at most {MAX_STEPS} steps")
        if name is None:
            name = self._fresh_name(task_name)
        else:
            name = check.name(name, "name")
            if name in self._steps:
                raise InvalidArgument(f"name: workflow {self.label!r} already has a step {name!r}")
        made = Step(self, name, task_name, payload, parents, options)
        self._steps[name] = made
        return made

    def _parents(self, after: Iterable[Step]) -> tuple[Step, ...]:
        if isinstance(after, (Step, str, bytes, Mapping)) or not isinstance(after, Iterable):
            raise InvalidArgument(f"after: expected a list of steps, got {after!r:.80}")
        parents: dict[str, Step] = {}
        for parent in after:
            if not isinstance(parent, Step):
                raise InvalidArgument(
                    f"after: expected steps of this workflow, got {type(parent).__name__}"
                )
            if parent.workflow is not self:
                raise InvalidArgument(
                    f"after: step {parent.name!r} belongs to workflow "
                    f"{parent.workflow.label!r}, not to {self.label!r}"
                )
            if self._steps.get(parent.name) is not parent:
                raise InvalidArgument(f"after: unknown step {parent.name!r}")
            parents[parent.name] = parent
        return tuple(parents.values())

    def _fresh_name(self, task_name: str) -> str:
        base = task_name.rsplit(".", 1)[-1] or task_name
        if base not in self._steps:
            return base
        n = self._counters.get(base, 1)
        while True:
            n += 1
            candidate = f"{base}-{n}"
            if candidate not in self._steps:
                self._counters[base] = n
                return candidate

    def include(self, other: Workflow, *, after: Iterable[Step] = ()) -> list[Step]:
        """Copy ``other``'s steps into this workflow (renamed when a name is taken); its
        first steps run after ``after``. Returns the copies of its last steps (those no
        other step runs after), for what comes next to run after."""
        if other is self:
            raise InvalidArgument("include: a workflow cannot include itself")
        start = self._parents(after)
        copies: dict[str, Step] = {}
        for original in other:
            parents = tuple(copies[p.name] for p in original.after) or start
            name = original.name if original.name not in self._steps else None
            copies[original.name] = self._put(
                name, original.task, original.payload, parents, dict(original.options)
            )
        return [copies[s.name] for s in other.last_steps()]

    # -- reading ----------------------------------------------------------------------
    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps.values())

    def __len__(self) -> int:
        return len(self._steps)

    def __contains__(self, name: object) -> bool:
        return name in self._steps

    def __getitem__(self, name: str) -> Step:
        return self._steps[name]

    def last_steps(self) -> list[Step]:
        """The steps no other step runs after."""
        parents = {p.name for s in self._steps.values() for p in s.after}
        return [s for s in self._steps.values() if s.name not in parents]

    def to_wire(self) -> dict[str, Any]:
        """The workflow as JSON data (what ``POST /api/workflows`` takes)."""
        return {
            "label": self.label,
            "steps": [
                {"name": s.name, "task": s.task, "payload": s.payload,
                 "after": [p.name for p in s.after], **s.options}
                for s in self
            ],
        }  # fmt: skip

    @classmethod
    def from_wire(cls, data: Any) -> Workflow:
        """A workflow from its JSON data; every step's ``after`` names earlier steps."""
        if not isinstance(data, Mapping):
            raise InvalidArgument("workflow: expected an object with a label and steps")
        wf = cls(data.get("label", "workflow"))
        steps = data.get("steps")
        if not isinstance(steps, list) or not steps:
            raise InvalidArgument("steps: expected a non-empty list of steps")
        for index, item in enumerate(steps):
            if not isinstance(item, Mapping):
                raise InvalidArgument(f"steps[{index}]: expected an object")
            unknown = set(item) - STEP_OPTIONS - {"name", "task", "payload", "after"}
            if unknown:
                raise InvalidArgument(
                    f"steps[{index}]: unknown field(s) {', '.join(sorted(unknown))}"
                )
            after = item.get("after") or []
            if not isinstance(after, list):
                raise InvalidArgument(f"steps[{index}].after: expected a list of step names")
            try:
                parents = []
                for parent in after:
                    if not isinstance(parent, str) or parent not in wf:
                        raise InvalidArgument(
                            f"after: unknown step {parent!r} (a step runs after earlier steps)"
                        )
                    parents.append(wf[parent])
                options = {k: item[k] for k in STEP_OPTIONS if item.get(k) is not None}
                wf._add_payload(item.get("task"), item.get("name"), parents,
                                item.get("payload"), options)  # fmt: skip
            except InvalidArgument as exc:
                raise InvalidArgument(f"steps[{index}]: {exc}") from None
        return wf

    def _add_payload(
        self, task: Any, name: Any, parents: list[Step], payload: Any, options: dict[str, Any]
    ) -> Step:
        """A step whose payload is given whole (not as keywords), as the wire carries it."""
        _check_options(options)
        return self._put(name, check.name(task, "task"), payload, tuple(parents), options)

    def __repr__(self) -> str:
        return f"<Workflow {self.label!r} steps={len(self._steps)}>"


def _resolve(task: Any, kwargs: dict[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """The task's name, its payload and the job options, from ``add``'s arguments."""
    if isinstance(task, str):
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in STEP_OPTIONS}
        _check_options(options)
        return check.name(task, "task"), (kwargs or None), options
    if isinstance(task, TaskLike):
        params = task.binding.parameters
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in STEP_OPTIONS and k not in params}
        _check_options(options)
        defaults = {"queue": task.queue, "priority": task.priority,
                    "max_attempts": task.max_attempts}  # fmt: skip
        for k, v in defaults.items():
            if v is not None and k not in options and (k != "priority" or v != 0):
                options[k] = v
        if options.get("queue") == "default":
            del options["queue"]
        return task.name, task.binding.to_payload((), kwargs), options
    raise InvalidArgument(f"task: expected a conveyor.Task or a task name, got {task!r:.80}")


def _check_options(options: dict[str, Any]) -> None:
    policy = options.get("on_dependency_failure", "cancel")
    if policy not in ("cancel", "run"):
        raise InvalidArgument(f"on_dependency_failure: expected 'cancel' or 'run', got {policy!r}")
    for k in [k for k, v in options.items() if v is None]:
        del options[k]


def _part(item: Any, wf: Workflow, after: list[Step]) -> list[Step]:
    """Add a part of a chain or group to ``wf`` after ``after``: its last steps."""
    if isinstance(item, Workflow):
        return wf.include(item, after=after)
    if isinstance(item, tuple):
        raise InvalidArgument("chain/group: expected step(task, **kwargs), a task or a workflow")
    spec = item if isinstance(item, StepSpec) else StepSpec(item)
    return [wf.add(spec.task, name=spec.name, after=after, **dict(spec.kwargs))]


def chain(*items: Any, label: str = "chain") -> Workflow:
    """A workflow whose parts run one after the other: each part runs after the last
    steps of the one before. A part is ``step(task, **kwargs)``, a bare task (no
    arguments), or a workflow (``group(...)``: a fan-out, and what follows is its
    fan-in)."""
    if not items:
        raise InvalidArgument("chain: expected at least one step")
    wf = Workflow(label)
    last: list[Step] = []
    for item in items:
        last = _part(item, wf, last)
    return wf


def group(*items: Any, label: str = "group") -> Workflow:
    """A workflow whose parts run side by side (any order, at once when workers allow).
    Put it in a ``chain`` to run it after something, or to run something after all of
    it (Celery calls that a chord)."""
    if not items:
        raise InvalidArgument("group: expected at least one step")
    wf = Workflow(label)
    for item in items:
        _part(item, wf, [])
    return wf


# -- what the queue answers -------------------------------------------------------------


def run_status(counts: Mapping[str, int]) -> WorkflowStatus:
    """A run's status from its steps' counts by status."""
    if counts.get(Status.PENDING, 0) or counts.get(Status.RUNNING, 0):
        return WorkflowStatus.RUNNING
    if counts.get(Status.FAILED, 0):
        return WorkflowStatus.FAILED
    if counts.get(Status.CANCELLED, 0):
        return WorkflowStatus.CANCELLED
    return WorkflowStatus.COMPLETED


def full_counts(counts: Mapping[str, int]) -> dict[str, int]:
    return {str(s): int(counts.get(s, 0)) for s in Status}


@dataclass(frozen=True)
class WorkflowRun:
    """A run of a workflow: its id, label and status, its steps' counts by status, and
    its steps' jobs by step name."""

    id: int
    label: str
    status: WorkflowStatus
    counts: dict[str, int]
    created_at: datetime
    jobs: Mapping[str, Job]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def is_final(self) -> bool:
        return self.status != WorkflowStatus.RUNNING

    def results(self) -> dict[str, Any]:
        """``{step name: result}`` of the completed steps."""
        return {n: j.result for n, j in self.jobs.items() if j.status == Status.COMPLETED}

    def to_dict(self) -> dict[str, Any]:
        from conveyor.codec import to_json

        return {
            **summary_json(self),
            "jobs": [to_json(j) for j in self.jobs.values()],
        }


@dataclass(frozen=True)
class WorkflowSummary:
    """A run as ``workflows()`` lists it: without its steps."""

    id: int
    label: str
    status: WorkflowStatus
    counts: dict[str, int]
    created_at: datetime

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return summary_json(self)


def summary_json(run: WorkflowRun | WorkflowSummary) -> dict[str, Any]:
    return {
        "id": run.id,
        "label": run.label,
        "status": str(run.status),
        "counts": dict(run.counts),
        "total": run.total,
        "created_at": run.created_at.isoformat(),
    }


def summary_from_json(data: Any) -> WorkflowSummary:
    from conveyor.codec import parse_time

    counts = full_counts(data["counts"])
    return WorkflowSummary(
        id=int(data["id"]),
        label=str(data["label"]),
        status=WorkflowStatus(data["status"]),
        counts=counts,
        created_at=parse_time(data["created_at"]),
    )


def run_from_json(data: Any) -> WorkflowRun:
    from conveyor.codec import from_json

    head = summary_from_json(data)
    jobs = [from_json(Job, {"payload": None, "result": None, **j}) for j in data["jobs"]]
    return WorkflowRun(
        id=head.id,
        label=head.label,
        status=head.status,
        counts=head.counts,
        created_at=head.created_at,
        jobs={j.step or str(j.id): j for j in jobs},
    )


__all__ = [
    "Step",
    "StepSpec",
    "Workflow",
    "WorkflowRun",
    "WorkflowStatus",
    "WorkflowSummary",
    "chain",
    "group",
    "step",
]
