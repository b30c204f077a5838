"""Handlers of the operator's operations (queries/operator.sql): per-task changes by
key, the console's runs and deletes, payload search and the hourly throughput roll-up.
Same shapes as handlers.py: a generator of statements, run in the session's
transaction, that returns what the PostgreSQL statement returns."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from conveyor.drivers.mysql.handlers import (
    KEPT,
    Change,
    Handler,
    HandlerSession,
    Moves,
    Rows,
    Steps,
    add_move,
    count_moves,
    guarded,
)
from conveyor.drivers.values import Row

_ID_QUEUE = ("id", "queue")


def search_payload(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """The field's JSON path is built here, the name quoted as a JSON string, so any
    name (dots, quotes, spaces) reads one top-level member."""
    path = "$." + json.dumps(params["field"], ensure_ascii=False)
    rows: list[Row] = yield Rows("search_payload", {**params, "path": path})
    return rows


def roll_up_throughput(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """Lock the per-minute rows to roll up, add them to their hours and delete them, then
    prune the old hours, in one transaction. Answers how many (hour, queue) rows were
    written."""
    locked: list[Row] = yield Rows("roll_up_throughput_lock", params)
    if locked:
        yield Change("roll_up_throughput_add", params)
        yield Change("drop_rolled_minutes", params)
    yield Change("prune_throughput_hours", params)
    return len({(row["hour"], row["queue"]) for row in locked})


def delete_jobs(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """Final jobs deleted. From migration 0018 on, locked first and counted by one
    INSERT of deltas for the statement (the delete trigger skipping its rows) rather
    than a delta row per job: a prune of a million jobs left a million deltas to fold.
    Answers how many were deleted."""
    if not session.counts_deletes:
        deleted: int = yield Change("delete_jobs", params)
        return deleted
    rows: list[Row] = yield Rows("delete_jobs_lock", params)
    locked = {row["id"]: row for row in rows}  # an id given twice is one job
    if not locked:
        return 0
    yield Change("deletes_counted", {})
    gone: int = yield Change("delete_jobs_locked", {"locked": tuple(locked)})
    yield Change("deletes_uncounted", {})
    moves: Moves = {}
    for row in locked.values():  # each deleted: they stay final while locked
        add_move(moves, row["queue"], row["task"], row["status"], None)
    yield from count_moves(moves)
    return gone


def delete_retention(session: HandlerSession, params: Mapping[str, Any]) -> Steps:
    """The policies locked, then deleted: answers their statuses."""
    locked: list[Row] = yield Rows("delete_retention_lock", params)
    if locked:
        yield Change("delete_retention_delete", params)
    return locked


OPERATOR_HANDLERS: dict[str, Handler] = {
    "delete_jobs": delete_jobs,
    "delete_retention": delete_retention,
    "fail_by_key": guarded("fail_by_key_lock", "fail_by_key_update", _ID_QUEUE, to="failed"),
    "run_now": guarded("run_now_lock", "run_now_update"),
    "run_now_jobs": guarded("run_now_jobs_lock", "run_now_jobs_update", _ID_QUEUE, to=KEPT),
    "search_payload": search_payload,
    "roll_up_throughput": roll_up_throughput,
}
