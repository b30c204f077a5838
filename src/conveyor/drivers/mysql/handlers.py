"""Named statements that are several statements on MySQL.

PostgreSQL changes rows and returns them in one ``UPDATE … RETURNING``; MySQL has no
such statement (MariaDB returns rows from INSERT and DELETE only). Here each of those
names has a handler, run in the session's transaction: it locks the rows it will change
(``SELECT … FOR UPDATE``, with ``SKIP LOCKED`` where claimers compete), changes exactly
those, and reads them back. Where a job with dependents changed state, its dependents
follow (a MySQL trigger may not change the table that fired it).

A handler is ``handler(session, params)`` (``params``: the operation's fields): a
generator that yields the statements it needs (``Rows``, ``Change``, ``Insert``) and
receives their results, and returns what the PostgreSQL statement returns (rows, or for
a few a count). It never touches a
connection, so the same handler runs on the synchronous and the asynchronous backend
(``drive`` and ``drive_async``). ``HANDLERS`` maps operation names to handlers;
``sync_handlers()`` and ``async_handlers()`` make them the sessions' ``handlers``."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from conveyor.drivers.values import Row, job_columns
from conveyor.errors import ConveyorError, DuplicateJob

_ACTIVE = ("pending", "running")
_FINAL = ("completed", "failed", "cancelled")
_FOLD_BATCH = 5000
_ID_QUEUE = ("id", "queue")
_ID_QUEUE_STATUS = ("id", "queue", "status")


@dataclass(frozen=True, slots=True)
class Rows:
    """Run a named statement; the handler is sent its rows (dicts)."""

    name: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """Run a named statement; the handler is sent how many rows it matched."""

    name: str
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Insert:
    """Run a named INSERT; the handler is sent (the first new id, how many rows)."""

    name: str
    params: Mapping[str, Any]


Step = Rows | Change | Insert
Result = list[Row] | int
Steps = Generator[Step, Any, Result]


class HandlerSession(Protocol):
    @property
    def consecutive_ids(self) -> bool:
        """Whether one multi-row INSERT is given consecutive ids (InnoDB's
        ``innodb_autoinc_lock_mode`` 0 or 1)."""
        ...

    @property
    def returning_inserts(self) -> bool:
        """Whether an INSERT can return the rows it made (MariaDB's ``INSERT …
        RETURNING``; MySQL has none)."""
        ...

    @property
    def counts_moves(self) -> bool:
        """Whether a statement that changes jobs' states writes their counts itself (no
        row trigger does: migration 0015)."""
        ...

    @property
    def counts_bulk_inserts(self) -> bool:
        """Whether a bulk insert writes the counts of its jobs itself, the insert
        trigger skipping them (migration 0017)."""
        ...

    @property
    def counts_deletes(self) -> bool:
        """Whether a delete writes the counts of the jobs it deletes itself, the delete
        trigger skipping them (migration 0018)."""
        ...

    @property
    def packed_rows(self) -> bool:
        """Whether whole jobs are read packed, one JSON array per row (``read_jobs``)."""
        ...


Handler = Callable[[HandlerSession, Mapping[str, Any]], Steps]


class Runner(Protocol):
    def run_step(self, step: Step) -> Any: ...


class AsyncRunner(Protocol):
    async def run_step(self, step: Step) -> Any: ...


def drive(steps: Steps, runner: Runner) -> Result:
    """Run a handler's statements; a statement's error is raised inside the handler."""
    try:
        step = next(steps)
        while True:
            try:
                reply = runner.run_step(step)
            except ConveyorError as exc:
                step = steps.throw(exc)
                continue
            step = steps.send(reply)
    except StopIteration as stop:
        result: Result = stop.value
        return result


async def drive_async(steps: Steps, runner: AsyncRunner) -> Result:
    try:
        step = next(steps)
        while True:
            try:
                reply = await runner.run_step(step)
            except ConveyorError as exc:
                step = steps.throw(exc)
                continue
            step = steps.send(reply)
    except StopIteration as stop:
        result: Result = stop.value
        return result


def _listed(ids: Sequence[Any]) -> tuple[Any, ...]:
    """A parameter for ``IN :name``: an empty list reads as ``IN (NULL)``, no match."""
    return tuple(ids) if ids else (None,)


def _only(rows: list[Row], columns: tuple[str, ...] | None) -> list[Row]:
    if columns is None:
        return rows
    return [{c: row[c] for c in columns} for row in rows]


# -- whole jobs, read back --------------------------------------------------------------
PACKED_JOB = "conveyor_job"  # the column of a job packed as one JSON array (MariaDB)
_JOB_COLUMNS = tuple(job_columns())


def read_jobs(session: HandlerSession, ids: tuple[Any, ...]) -> Generator[Step, Any, list[Row]]:
    """The jobs ``ids`` as rows of their columns, in claim order. Where the session
    reads them packed (MariaDB through PyMySQL or aiomysql: the dialect's ``job_row``),
    a row the server could not pack (NULL: larger than its ``max_allowed_packet``) sends
    the read again, column by column."""
    if session.packed_rows:
        rows = unpacked((yield Rows("jobs_locked", {"locked": ids})))
        if rows is not None:
            return rows
    columns: list[Row] = yield Rows("jobs_locked_columns", {"locked": ids})
    return columns


def unpacked(rows: list[Row]) -> list[Row] | None:
    """Packed rows as rows of their columns; None if one of them could not be packed."""
    packed = [row[PACKED_JOB] for row in rows]
    if None in packed:
        return None
    names = _JOB_COLUMNS
    return [dict(zip(names, json.loads(text), strict=True)) for text in packed]


# -- counts: one INSERT of deltas per statement that changed states -----------------------
Moves = dict[tuple[str, str, str], list[int]]


def add_move(moves: Moves, queue: str, task: str, was: str, now: str | None) -> None:
    """One job of ``queue`` and ``task`` went from status ``was`` to ``now`` (None:
    deleted): [net change, jobs that entered] per (queue, status, task), as the fold
    adds them up."""
    left = moves.setdefault((queue, was, task), [0, 0])
    left[0] -= 1
    if now is not None:
        entered = moves.setdefault((queue, now, task), [0, 0])
        entered[0] += 1
        entered[1] += 1


def count_moves(moves: Moves) -> Generator[Step, Any, None]:
    if moves:
        deltas = [
            [q, s, t, n, entered] for (q, s, t), (n, entered) in moves.items() if n or entered
        ]
        yield Change("count_moves", {"moves": json.dumps(deltas, ensure_ascii=False)})


def settle(
    session: HandlerSession, before: list[Row], after: list[Row]
) -> Generator[Step, Any, None]:
    """What follows a statement that changed the jobs ``before`` (locked, as they were;
    with queue, task and status) into ``after``: the counts of the states they left and
    entered, and for jobs with dependents whose state differs, their dependents count
    them as met or unmet, or are cancelled."""
    counted = session.counts_moves
    if counted:
        was = {row["id"]: row for row in before}
        moves: Moves = {}
        for row in after:
            then = was.get(row["id"])
            if then is not None and then["status"] != row["status"]:
                add_move(moves, then["queue"], then["task"], then["status"], row["status"])
        yield from count_moves(moves)
    old = {row["id"]: row["status"] for row in before if row.get("has_dependents")}
    if not old:
        return
    moved = [
        (row["id"], old[row["id"]], row["status"])
        for row in after
        if row["id"] in old and old[row["id"]] != row["status"]
    ]
    yield from dependents_follow(moved, counted)


def dependents_follow(
    moved: list[tuple[int, str, str]], counted: bool
) -> Generator[Step, Any, None]:
    """``moved``: (job, status before, status now) of jobs with dependents. An edge
    with run_on_failure false is met when its dependency completed; one with true when
    it is final. Cancelling a dependent makes its own dependents follow in turn, and is
    counted when ``counted`` (the session's ``counts_moves``)."""
    while moved:
        completed = [i for i, _, new in moved if new == "completed"]
        ended = [i for i, old, new in moved if new in _FINAL and old in _ACTIVE]
        if completed or ended:
            yield Change(
                "dependencies_met", {"completed": _listed(completed), "ended": _listed(ended)}
            )
        uncompleted = [i for i, old, _ in moved if old == "completed"]
        reopened = [i for i, old, new in moved if old in _FINAL and new in _ACTIVE]
        if uncompleted or reopened:
            yield Change(
                "dependencies_unmet",
                {"reopened_completed": _listed(uncompleted), "reopened": _listed(reopened)},
            )
        status_now = {i: new for i, _, new in moved}
        failed = [i for i, _, new in moved if new in ("failed", "cancelled")]
        moved = []
        if not failed:
            break
        doomed: list[Row] = yield Rows("dependents_to_cancel", {"failed": _listed(failed)})
        seen: set[int] = set()
        moves: Moves = {}
        for row in doomed:
            if row["id"] in seen:
                continue
            seen.add(row["id"])
            dependency = row["dependency"]
            error = f"dependency job {dependency} {status_now[dependency]}"
            cancelled: int = yield Change("cancel_dependent", {"id": row["id"], "error": error})
            if not cancelled:
                continue
            add_move(moves, row["queue"], row["task"], row["status"], "cancelled")
            if row["has_dependents"]:
                moved.append((row["id"], row["status"], "cancelled"))
        if counted:
            yield from count_moves(moves)


# -- the shapes of handler ------------------------------------------------------------------
KEPT = ""  # guarded's ``to`` for an update that leaves the state as it was


def guarded(
    lock: str, update: str, columns: tuple[str, ...] | None = None, *, to: str | None = None
) -> Handler:
    """Lock the rows ``lock`` picks, run ``update`` on exactly those (``:locked``), read
    them back (all columns, or ``columns``). ``to``: the state ``update`` leaves every
    row in (``KEPT``: the one it had), for a caller of ``columns`` drawn from the lock's
    (id, queue, status): when the update changed every row locked, as it does unless
    its guard disagrees with the lock's, they are not read back."""

    # Whole rows only when the caller gets jobs: PyMySQL reads each column in Python,
    # and a full row costs about ten times the three columns an ending needs.
    whole = columns is None
    if to is not None and not set(columns or ()) <= set(_ID_QUEUE_STATUS):
        raise ValueError(f"{update}: to= needs columns drawn from {_ID_QUEUE_STATUS}")

    def handler(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
        locked: list[Row] = yield Rows(lock, params)
        if not locked:
            return []
        ids = tuple(row["id"] for row in locked)
        changed: int = yield Change(update, {**params, "locked": ids})
        rows: list[Row]
        if to is not None and changed == len(ids):
            rows = [{**row, "status": to or row["status"]} for row in locked]
        elif whole:
            rows = yield from read_jobs(session, ids)
        else:
            rows = yield Rows("jobs_locked_brief", {"locked": ids})
        yield from settle(session, locked, rows)
        return _only(rows, columns)

    return handler


# What claim_update writes into a job, for the rows its lock read: (column, parameter),
# beside status 'running' and one more attempt. Keep alike with claim_update.
CLAIMED = (
    ("claim_id", "claim_id"),
    ("worker", "worker"),
    ("claimed_at", "claim_at"),
    ("heartbeat_at", "claim_at"),
    ("started_at", "claim_at"),
    ("lease_expires_at", "claim_expires"),
    ("updated_at", "claim_at"),
)


def claimed(lock: str) -> Handler:
    """A claim: ``lock`` reads the jobs whole, with the instant of the claim and the end
    of its lease, and ``claim_update`` writes those into exactly the jobs locked. When it
    changed every one (its guard is the lock's), the rows read are patched as it left
    them instead of read again: a round trip and a read of every row fewer."""

    def handler(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
        packed = session.packed_rows
        locked: list[Row] = yield Rows(lock, {**params, "packed": 1 if packed else None})
        if not locked:
            return []
        first = locked[0]
        update = {**params, "claim_at": first["claim_at"], "claim_expires": first["claim_expires"]}
        ids = tuple(row["id"] for row in locked)
        changed: int = yield Change("claim_update", {**update, "locked": ids})
        read: list[Row] | None = None
        if changed == len(ids):
            read = unpacked(locked) if packed else locked
        rows: list[Row]
        if read is None:  # a row too large to pack, or one the update's guard refused
            rows = yield from read_jobs(session, ids)
        else:
            wrote = {"status": "running", **{column: update[name] for column, name in CLAIMED}}
            rows = [{**row, **wrote, "attempts": row["attempts"] + 1} for row in read]
        yield from settle(session, locked, rows)
        return rows

    return handler


# What handlers give an operation's statements beside its fields, which the statements'
# marked lines may name too (tests/unit/test_statements.py checks the others).
ADDED_PARAMS: dict[str, frozenset[str]] = {
    "claim_jobs": frozenset({"packed"}),
    "claim_ids": frozenset({"packed"}),
    "insert_jobs": frozenset({"counted"}),
}


def fail_jobs(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """One UPDATE per item: MySQL gives no order to the assignments of an UPDATE that
    joins the items, and the history entry must read the worker before it is cleared."""
    locked: list[Row] = yield Rows("claimed_items_lock", params)
    if not locked:
        return []
    held = {row["id"] for row in locked}
    changed = []
    for item in json.loads(params["items"]):
        if item["id"] not in held:
            continue
        done: int = yield Change(
            "fail_update",
            {
                "id": item["id"],
                "claim_id": item["claim_id"],
                "attempts": item["attempts"],
                "again": bool(item.get("again")),
                "error": item.get("error"),
                "error_kind": item.get("error_kind"),
                "delay_s": item.get("delay_s") or 0,
            },
        )
        if done:
            changed.append(item["id"])
    if not changed:
        return []
    rows = yield from read_jobs(session, tuple(changed))
    yield from settle(session, locked, rows)
    return rows


def end_leases(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """Expired leases ended as decided above: one UPDATE per item (see fail_jobs)."""
    locked: list[Row] = yield Rows("end_leases_lock", params)
    if not locked:
        return []
    held = {row["id"] for row in locked}
    for item in json.loads(params["items"]):
        if item["id"] in held:
            yield Change(
                "end_lease_update",
                {
                    "id": item["id"],
                    "again": bool(item.get("again")),
                    "error": item.get("error"),
                    "cause": item.get("cause"),
                },
            )
    rows: list[Row] = yield Rows("jobs_locked_brief", {"locked": tuple(held)})
    yield from settle(session, locked, rows)
    return _only(rows, _ID_QUEUE_STATUS)


def insert_job(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """An active job with the key already: no row (ON CONFLICT DO NOTHING)."""
    try:
        if session.returning_inserts:
            returned: list[Row] = yield Rows("insert_job_returning", params)
            return returned
        new_id, _ = yield Insert("insert_job", params)
    except DuplicateJob:
        return []
    rows: list[Row] = yield Rows("inserted_jobs", {"first_id": new_id, "last_id": new_id})
    return rows


def insert_many(columns: tuple[str, ...]) -> Handler:
    """Jobs without keys or dependencies, many in one statement. Where the schema allows
    (``counts_bulk_inserts``), their creation time is set first (``bulk_created_at``):
    the insert trigger, which writes a delta row per job, skips jobs created at that
    instant, and one statement counts them all after. Otherwise the trigger counts."""

    def handler(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
        counted = session.counts_bulk_inserts
        if counted:
            yield Change("bulk_created_at", {})
            params = {**params, "counted": 1}
        rows: list[Row] = []
        if session.consecutive_ids:
            first, count = yield Insert("insert_jobs", params)
            if count and columns == ("id",):
                rows = [{"id": i} for i in range(first, first + count)]
            elif count:
                last = first + count - 1
                rows = yield Rows("inserted_jobs", {"first_id": first, "last_id": last})
        else:
            # Ids of one INSERT may interleave with another's: one row at a time.
            for item in json.loads(params["items"]):
                one = {**params, "items": json.dumps([item])}
                new_id, _ = yield Insert("insert_jobs", one)
                rows += yield Rows("inserted_jobs", {"first_id": new_id, "last_id": new_id})
        if rows and counted:
            yield Change("count_bulk_insert", params)
        return _only(rows, columns)

    return handler


def insert_workflow(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    new_id, _ = yield Insert("insert_workflow", params)
    rows: list[Row] = yield Rows("workflow_created", {"id": new_id})
    return rows


def reserve_job_ids(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """Placeholder jobs take the ids from the table's AUTO_INCREMENT, inside a savepoint
    rolled back at once: InnoDB never hands out those values again, and nothing else
    of the placeholders (rows, count deltas) outlives the rollback."""
    n = int(params["n"])
    if n <= 0:
        return []
    yield Change("reserve_savepoint", {})
    ids: list[int] = []
    if session.consecutive_ids:
        first, count = yield Insert("reserve_placeholders", {"slots": json.dumps([0] * n)})
        ids = list(range(first, first + count))
    else:
        # Ids of one INSERT may interleave with another's: one row at a time.
        for _ in range(n):
            new_id, _count = yield Insert("reserve_placeholders", {"slots": "[0]"})
            ids.append(new_id)
    # (A failed INSERT fails the operation: its transaction is rolled back whole.)
    yield Change("reserve_rollback", {})
    return [{"id": i} for i in ids]


def insert_steps(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """A step whose key an active job holds fails the whole INSERT here (MySQL has no
    ON CONFLICT … DO NOTHING for one index): no row answers for the chunk, and the
    caller names the step."""
    try:
        yield Change("insert_steps", params)
    except DuplicateJob:
        return []
    rows: list[Row] = yield Rows("inserted_steps", {"items": params["items"]})
    return rows


def mark_dependencies(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    locked: list[Row] = yield Rows("mark_dependencies_lock", params)
    if locked:
        yield Change("mark_dependencies_update", {"locked": tuple(r["id"] for r in locked)})
    return locked


def upsert_then(upsert: str, read: str, key: str) -> Handler:
    """INSERT … ON DUPLICATE KEY UPDATE, then the row as it now is."""

    def handler(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
        yield Change(upsert, params)
        rows: list[Row] = yield Rows(read, {key: params[key]})
        return rows

    return handler


def take_schedule_slot(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    taken: int = yield Change("take_schedule_slot_update", params)
    return [{"name": params["name"]}] if taken else []


def take_notifications(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    locked: list[Row] = yield Rows("take_notifications_lock", params)
    if locked:
        pairs = tuple((row["job_id"], row["subscriber"]) for row in locked)
        yield Change("take_notifications_update", {**params, "locked": pairs})
    return locked


def fold_counts(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """Move one batch of deltas into the counts and the throughput. Deltas are taken
    with SKIP LOCKED: those of transactions still open, or of another folder, wait for
    a later fold, so two folders never count one twice. One batch per transaction:
    each folder then locks counter rows in one order (counts, then throughput, each
    sorted), so folders running at once cannot deadlock; ``more`` asks for the next."""
    taken: list[Row] = yield Rows("fold_take", {"limit": _FOLD_BATCH})
    if not taken:
        return [{"folded": 0, "more": False}]
    ids = tuple(row["id"] for row in taken)
    yield Change("fold_counts_add", {"locked": ids})
    yield Change("fold_throughput_add", {"locked": ids})
    yield Change("fold_forget", {"ids": json.dumps(ids)})
    return [{"folded": len(ids), "more": len(ids) == _FOLD_BATCH}]


def pending_summary(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """Per queue with pending jobs, a statement that names it as a constant (see
    ``pending_summary_of``)."""
    queues: list[Row] = yield Rows("pending_queues", {"queue": params["queue"]})
    out: list[Row] = []
    for row in queues:
        out += yield Rows("pending_summary_of", {"queue": row["queue"]})
    return out


def items_read(handler: Handler) -> Handler:
    """``handler`` given, beside the reports' ``items``, what its statements choose their
    form by: ``one_claim`` and ``item_ids`` when every item names one claim (a list of
    ids is looked up faster than pairs out of JSON_TABLE), ``results`` when any item
    carries a result (without one, a completion need not join the items)."""

    def read(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
        items = json.loads(params["items"])
        if not items:
            return []
        claims = {item["claim_id"] for item in items}
        one = next(iter(claims)) if len(claims) == 1 else None
        return (
            yield from handler(
                session,
                {
                    **params,
                    "one_claim": one,
                    "item_ids": tuple(item["id"] for item in items) if one else None,
                    "results": True if any(i.get("result") is not None for i in items) else None,
                },
            )
        )

    return read


def chosen(flag: str, given: Handler, otherwise: Handler) -> Handler:
    """One operation with two forms: ``given`` when its parameter ``flag`` is set (the
    rows a worker needs, say), else ``otherwise``."""

    def handler(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
        return (given if params.get(flag) else otherwise)(session, params)

    return handler


HANDLERS: dict[str, Handler] = {
    # admin
    "reopen_job": chosen(
        "id",
        guarded("reopen_job_lock", "reopen_job_update"),
        guarded("reopen_job_lock", "reopen_job_update", _ID_QUEUE),
    ),
    "cancel_jobs": chosen(
        "id",
        guarded("cancel_jobs_lock", "cancel_job_update"),
        guarded("cancel_jobs_lock", "cancel_job_update", _ID_QUEUE, to="cancelled"),
    ),
    "complete_by_key": guarded(
        "complete_by_key_lock", "complete_by_key_update", _ID_QUEUE, to="completed"
    ),
    # claims
    "claim_jobs": claimed("claim_jobs_lock"),
    "claim_ids": claimed("claim_ids_lock"),
    "ack_claim": guarded("ack_claim_lock", "ack_claim_update", _ID_QUEUE, to="completed"),
    "release_jobs": chosen(
        "id",
        guarded("release_jobs_lock", "release_update"),
        guarded("release_jobs_lock", "release_update", _ID_QUEUE, to="pending"),
    ),
    "end_leases": end_leases,
    # enqueue
    "insert_job": insert_job,
    "insert_jobs": chosen(
        "ids_only", insert_many(("id",)), insert_many(("id", "run_at", "created_at"))
    ),
    "mark_dependencies": mark_dependencies,
    "cancel_for_dependency": guarded("cancel_for_dependency_lock", "cancel_for_dependency_update"),
    # flow
    "save_queue_settings": upsert_then("save_queue_settings_upsert", "queue_settings", "queue"),
    # reading
    "fold_counts": fold_counts,
    "pending_summary": pending_summary,
    # registry
    "save_schedule": upsert_then("save_schedule_upsert", "schedule_by_name", "name"),
    "take_schedule_slot": take_schedule_slot,
    "take_notifications": take_notifications,
    # workflows
    "insert_workflow": insert_workflow,
    "reserve_job_ids": reserve_job_ids,
    "insert_steps": insert_steps,
    # reports
    "complete_jobs": items_read(
        chosen(
            "brief",
            guarded("claimed_items_lock", "complete_update", _ID_QUEUE_STATUS, to="completed"),
            guarded("claimed_items_lock", "complete_update"),
        )
    ),
    "fail_jobs": items_read(fail_jobs),
    "snooze_jobs": items_read(guarded("claimed_items_lock", "snooze_update")),
    "heartbeat_jobs": items_read(
        chosen(
            "brief",
            guarded("claimed_items_lock", "heartbeat_update", ("id",), to=KEPT),
            guarded("claimed_items_lock", "heartbeat_update"),
        )
    ),
    "progress_job": guarded("progress_job_lock", "progress_job_update"),
}


def sync_handlers(
    extra: Mapping[str, Handler] | None = None,
) -> dict[str, Callable[[Any, Any], Result]]:
    """``{operation name: handler(session, op)}`` for a synchronous session (a
    ``Runner``): the handler's statements run one after the other. ``extra``: handlers
    kept in another module (``operator_handlers``, which imports this one)."""

    def make(handler: Handler) -> Callable[[Any, Any], Result]:
        return lambda session, op: drive(handler(session, op.params()), session)

    return {name: make(handler) for name, handler in {**HANDLERS, **(extra or {})}.items()}


def async_handlers(
    extra: Mapping[str, Handler] | None = None,
) -> dict[str, Callable[[Any, Any], Awaitable[Result]]]:
    """The same for an asynchronous session (an ``AsyncRunner``)."""

    def make(handler: Handler) -> Callable[[Any, Any], Awaitable[Result]]:
        return lambda session, op: drive_async(handler(session, op.params()), session)

    return {name: make(handler) for name, handler in {**HANDLERS, **(extra or {})}.items()}
