"""Workflows: enqueue a run's steps in one transaction, read runs, cancel and retry them.

A run's steps are inserted in a few statements whatever their number (rows, then the
edges between them, then each step's ``depends_on``), so a run of ten thousand steps
costs about what ``enqueue_many`` of as many jobs does. Every step's parents are new
and pending, so its ``waiting_for`` is known before it is written: the number of its
parents. From then on the database's dependency trigger counts it down.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.errors import DuplicateJob, InvalidArgument, InvalidTransition, WorkflowNotFound
from conveyor.job import FINAL_STATUSES, Job, Status
from conveyor.ops import Announce, Call, LazyArgs, Plan, Row, Values
from conveyor.ops.defaults import MAX_JOB_ID, MAX_LIST, Defaults, job_id
from conveyor.ops.enqueue import MAX_DEPENDENCIES, NewJob, new_job
from conveyor.workflow import (
    MAX_LABEL_LENGTH,
    Workflow,
    WorkflowRun,
    WorkflowStatus,
    WorkflowSummary,
    full_counts,
    run_status,
)

_STEP_CHUNK = 1000
_EDGE_CHUNK = 5000


@dataclass(slots=True)
class _Prepared:
    name: str
    job: NewJob
    parents: tuple[str, ...]
    run_on_failure: bool


def workflow_id(value: Any) -> int:
    return check.integer(value, "workflow_id", low=1, high=MAX_JOB_ID)


def _prepare(d: Defaults, wf: Workflow) -> list[_Prepared]:
    if len(wf) == 0:
        raise InvalidArgument(f"workflow {wf.label!r} has no steps")
    prepared: list[_Prepared] = []
    keys: dict[tuple[str, str], str] = {}
    for s in wf:
        o = s.options
        try:
            job = new_job(
                d, s.task, s.payload, o.get("queue", "default"), o.get("key"),
                o.get("priority", 0), o.get("run_at"), o.get("max_attempts"), o.get("group"),
                None, o.get("on_dependency_failure", "cancel"),
            )  # fmt: skip
        except InvalidArgument as exc:
            raise InvalidArgument(f"step {s.name!r}: {exc}") from None
        if len(s.after) > MAX_DEPENDENCIES:
            raise InvalidArgument(
                f"step {s.name!r}: expected at most {MAX_DEPENDENCIES} steps in after, "
                f"got {len(s.after)}"
            )
        if job.key is not None:
            other = keys.setdefault((job.queue, job.key), s.name)
            if other != s.name:
                raise InvalidArgument(
                    f"step {s.name!r}: step {other!r} has the same key {job.key!r} "
                    f"in queue {job.queue!r}"
                )
        prepared.append(
            _Prepared(
                s.name, job, tuple(p.name for p in s.after), job.on_dependency_failure == "run"
            )
        )
    return prepared


def as_workflow(value: Any) -> Workflow:
    if isinstance(value, Workflow):
        return value
    if isinstance(value, Mapping):
        return Workflow.from_wire(value)
    raise InvalidArgument(f"workflow: expected a conveyor.Workflow, got {type(value).__name__}")


def enqueue_workflow(d: Defaults, workflow: Any) -> Call[WorkflowRun]:
    """Every step is checked before anything is written."""
    wf = as_workflow(workflow)
    prepared = _prepare(d, wf)
    label = wf.label

    def build(v: Values) -> Plan[WorkflowRun]:
        return _insert_run(v, label, prepared)

    return Call("enqueue_workflow", LazyArgs(lambda: {"workflow": wf.to_wire()}), build)


def _insert_run(v: Values, label: str, prepared: list[_Prepared]) -> Plan[WorkflowRun]:
    head = (yield db.InsertWorkflow(label=label))[0]
    wid = int(head["id"])
    created = v.decode_time(head["created_at"])
    assert created is not None
    with_dependents = {p for s in prepared for p in s.parents}
    reserved = yield db.ReserveJobIds(n=len(prepared))
    ids = {s.name: int(r["id"]) for s, r in zip(prepared, reserved, strict=True)}
    inserted: dict[str, Row] = {}
    for start in range(0, len(prepared), _STEP_CHUNK):
        chunk = prepared[start : start + _STEP_CHUNK]
        items = []
        for s in chunk:
            j = s.job
            run_at = None if j.run_at is None else v.encode_time(j.run_at)
            depends = [ids[p] for p in s.parents] if s.parents else None
            items.append([ids[s.name], j.queue, j.task, j.payload_json, j.key, j.priority,
                          run_at, j.max_attempts, j.group, s.name, len(s.parents),
                          1 if s.name in with_dependents else 0, depends,
                          j.trace_context])  # fmt: skip
        rows = yield db.InsertSteps(workflow_id=wid, items=v.json_param(items))
        for r in rows:
            inserted[r["step"]] = r
        if len(rows) < len(chunk):
            yield from _refuse_duplicate([s for s in chunk if s.name not in inserted])
    edges = [
        [ids[s.name], ids[p], 1 if s.run_on_failure else 0] for s in prepared for p in s.parents
    ]
    for start in range(0, len(edges), _EDGE_CHUNK):
        yield db.InsertDependencies(items=v.json_param(edges[start : start + _EDGE_CHUNK]))
    yield Announce(queues={s.job.queue for s in prepared if not s.parents})
    jobs = _NewSteps(v, prepared, wid, inserted, ids, created)
    counts = full_counts({Status.PENDING: len(jobs)})
    return WorkflowRun(wid, label, run_status(counts), counts, created, jobs)


class _NewSteps(Mapping[str, Job]):
    """The jobs of a run just enqueued, by step name, each made on first use: a caller
    who enqueues ten thousand steps often reads only a few of them."""

    def __init__(
        self,
        v: Values,
        prepared: list[_Prepared],
        wid: int,
        rows: Mapping[str, Row],
        ids: Mapping[str, int],
        created: datetime,
    ) -> None:
        self._steps = {s.name: s for s in prepared}
        self._args = (v, wid, rows, ids, created)
        self._made: dict[str, Job] = {}

    def __getitem__(self, name: str) -> Job:
        job = self._made.get(name)
        if job is None:
            s = self._steps[name]
            v, wid, rows, ids, created = self._args
            payload = None if s.job.payload_json is None else json.loads(s.job.payload_json)
            job = self._made[name] = _new_step(v, s, wid, rows[name], ids, created, payload)
        return job

    def __iter__(self) -> Iterator[str]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def __repr__(self) -> str:
        return f"<{len(self)} jobs: {', '.join(list(self._steps)[:5])}…>"


def _new_step(
    v: Values,
    s: _Prepared,
    wid: int,
    row: Row,
    ids: Mapping[str, int],
    created: datetime,
    payload: Any,
) -> Job:
    j = s.job
    run_at = v.decode_time(row["run_at"])
    assert run_at is not None
    return Job(
        id=ids[s.name],
        queue=j.queue,
        task=j.task,
        payload=payload,
        key=j.key,
        priority=j.priority,
        run_at=run_at,
        max_attempts=j.max_attempts,
        created_at=created,
        updated_at=created,
        group=j.group,
        depends_on=tuple(ids[p] for p in s.parents),
        waiting_for=len(s.parents),
        workflow_id=wid,
        step=s.name,
        trace_context=j.trace_context,
    )


def _refuse_duplicate(missing: list[_Prepared]) -> Plan[None]:
    """Steps were not inserted because active jobs hold their keys (a dialect may leave
    out a whole chunk for one such step): name the first step whose key is held."""
    for s in missing:
        if s.job.key is None:
            continue
        rows = yield db.JobsByKey(queue=s.job.queue, key=s.job.key, active=1)
        if rows:
            found = rows[0]
            raise DuplicateJob(
                f"step {s.name!r}: job {found['id']} is already {found['status']} with key "
                f"{s.job.key!r} in queue {s.job.queue!r}; nothing was enqueued",
                job_id=int(found["id"]),
            )
    raise DuplicateJob("an active job holds the key of a step; nothing was enqueued")


# -- reading ------------------------------------------------------------------------


def workflow(run: Any) -> Call[WorkflowRun]:
    """A run: its status, counts by status, and every step's job."""
    wid = workflow_id(run)

    def build(v: Values) -> Plan[WorkflowRun]:
        return _read_run(v, wid)

    return Call("workflow", {"workflow_id": wid}, build, write=False)


def _read_run(v: Values, wid: int, verb: str = "read") -> Plan[WorkflowRun]:
    rows = yield db.GetWorkflow(id=wid)
    if not rows:
        raise WorkflowNotFound(f"cannot {verb} workflow {wid}: it does not exist")
    head = rows[0]
    steps = yield db.GetJob(workflow_id=wid)
    jobs: dict[str, Job] = {}
    tally: dict[str, int] = {}
    for r in steps:
        job = v.decode_job(r)
        jobs[job.step or str(job.id)] = job
        tally[job.status] = tally.get(job.status, 0) + 1
    counts = full_counts(tally)
    created = v.decode_time(head["created_at"])
    assert created is not None
    return WorkflowRun(wid, str(head["label"]), run_status(counts), counts, created, jobs)


def workflows(
    *,
    limit: Any = 100,
    after: Any = None,
    newest_first: Any = False,
    status: Any = None,
    label: Any = None,
) -> Call[list[WorkflowSummary]]:
    """Runs in id order, ``limit`` at a time; page with ``after`` = the last id seen.
    ``newest_first``: descending ids, where ``after`` means ids below it. ``status``:
    only runs in that status (read from their steps); ``label``: only runs so labelled."""
    size = check.integer(limit, "limit", low=1, high=MAX_LIST)
    cursor = None if after is None else check.integer(after, "after", low=0, high=MAX_JOB_ID)
    if not isinstance(newest_first, bool):
        raise InvalidArgument(f"newest_first: expected true or false, got {newest_first!r}")
    wanted = None
    if status is not None:
        try:
            wanted = str(WorkflowStatus(status))
        except ValueError:
            choices = ", ".join(str(s) for s in WorkflowStatus)
            raise InvalidArgument(f"status: expected one of {choices}, got {status!r}") from None
    named = None if label is None else check.name(label, "label", max_length=MAX_LABEL_LENGTH)

    def build(v: Values) -> Plan[list[WorkflowSummary]]:
        page = {"before": cursor, "newest": 1} if newest_first else {"after": cursor or 0}
        rows = yield db.ListWorkflows(**page, limit=size, label=named, status=wanted)
        if not rows:
            return []
        tallies = yield db.WorkflowCounts(ids=v.json_param([r["id"] for r in rows]))
        per: dict[int, dict[str, int]] = {}
        for t in tallies:
            per.setdefault(int(t["workflow_id"]), {})[t["status"]] = int(t["n"])
        out = []
        for r in rows:
            counts = full_counts(per.get(int(r["id"]), {}))
            created = v.decode_time(r["created_at"])
            assert created is not None
            out.append(
                WorkflowSummary(int(r["id"]), str(r["label"]), run_status(counts), counts, created)
            )
        return out

    args: dict[str, Any] = {"limit": size, "after": cursor, "newest_first": newest_first}
    if wanted is not None:
        args["status"] = wanted
    if named is not None:
        args["label"] = named
    return Call("workflows", args, build, write=False)


def parents(job: Any) -> Call[list[Job]]:
    """The jobs a job runs after, in id order."""
    jid = job_id(job)

    def build(v: Values) -> Plan[list[Job]]:
        rows = yield db.ParentJobs(job_id=jid)
        return [v.decode_job(r) for r in rows]

    return Call("parents", {"job_id": jid}, build, write=False)


# -- changing a run ------------------------------------------------------------------


def cancel_workflow(run: Any) -> Call[WorkflowRun]:
    """Cancel every step of the run that is not final yet; returns the run."""
    wid = workflow_id(run)

    def build(v: Values) -> Plan[WorkflowRun]:
        if not (yield db.GetWorkflow(id=wid)):
            raise WorkflowNotFound(f"cannot cancel workflow {wid}: it does not exist")
        rows = yield db.CancelJobs(workflow_id=wid)
        if rows:
            yield Announce(finished=[int(r["id"]) for r in rows])
        return (yield from _read_run(v, wid))

    return Call("cancel_workflow", {"workflow_id": wid}, build)


def retry_workflow(run: Any) -> Call[WorkflowRun]:
    """Retry the run's failed steps and every step after them that already ended (those
    cancelled because a step they ran after failed, and those that ran anyway): they
    are pending again, attempts reset, and each runs once its parents completed."""
    wid = workflow_id(run)

    def build(v: Values) -> Plan[WorkflowRun]:
        if not (yield db.GetWorkflow(id=wid)):
            raise WorkflowNotFound(f"cannot retry workflow {wid}: it does not exist")
        steps = yield db.GetJob(workflow_id=wid)
        edges = yield db.WorkflowEdges(workflow_id=wid)
        chosen = _to_retry(steps, edges)
        if chosen:
            ids = v.json_param(chosen)
            yield db.LockParents(ids=ids)
            try:
                rows = yield db.ReopenJob(ids=ids)
            except DuplicateJob:
                raise InvalidTransition(
                    f"cannot retry workflow {wid}: another active job holds a step's key"
                ) from None
            yield db.RecountWaiting(ids=ids)
            yield Announce(queues={r["queue"] for r in rows})
        return (yield from _read_run(v, wid))

    return Call("retry_workflow", {"workflow_id": wid}, build)


_CANCELLED_BY_FAILURE = re.compile(r"dependency job \d+ failed")


def _to_retry(steps: Iterable[Row], edges: Iterable[Row]) -> list[int]:
    """The failed steps and those cancelled because a step they ran after failed (also
    when that step was retried alone since), and every step after them (transitively)
    that is final."""
    status: dict[int, str] = {}
    chosen: set[int] = set()
    for r in steps:
        jid, now = int(r["id"]), r["status"]
        status[jid] = now
        if now == Status.FAILED or (
            now == Status.CANCELLED and _CANCELLED_BY_FAILURE.fullmatch(r["error"] or "")
        ):
            chosen.add(jid)
    children: dict[int, list[int]] = {}
    for e in edges:
        children.setdefault(int(e["depends_on"]), []).append(int(e["job_id"]))
    todo = deque(chosen)
    seen = set(chosen)
    while todo:
        for child in children.get(todo.popleft(), ()):
            if child in seen:
                continue
            seen.add(child)
            todo.append(child)
            if status.get(child) in FINAL_STATUSES:
                chosen.add(child)
    return sorted(chosen)


__all__ = [
    "cancel_workflow",
    "enqueue_workflow",
    "parents",
    "retry_workflow",
    "workflow",
    "workflows",
]
