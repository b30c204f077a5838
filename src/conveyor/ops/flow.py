"""Flow control: pausing queues, capping how many of their jobs run at once (per queue
and per group), and limiting how many start per window.

Limits are enforced when jobs are claimed. A queue with any of them set is *controlled*:
the ordinary claim statement takes nothing from it, and its claims run here instead, one
at a time (the queue's settings row is locked on PostgreSQL; SQLite's write lock already
serialises them), so no race between workers on any number of machines lets a cap be
passed. Queues without settings never pay for any of this.
"""

from __future__ import annotations

from typing import Any

from conveyor import validation as check
from conveyor.drivers import operations as db
from conveyor.info import QueueSettings, Rate
from conveyor.ops import Call, Plan, Row, Values

# A claim of a queue with group caps looks at most this many jobs past the ones its
# groups hold back, so one crowded group cannot make claims scan the whole backlog.
MAX_SCAN = 10_000
# With group caps, candidates are read a page at a time: twice the claim's size first
# (most are taken), doubling while groups hold jobs back, up to _PAGE.
_FIRST_PAGE = 16
_PAGE = 500


def pause(queue: Any) -> Call[QueueSettings]:
    """No new claims from ``queue``, on any worker, from the next claim on. Jobs already
    running finish."""
    return _change(queue, "pause", paused=True)


def resume(queue: Any) -> Call[QueueSettings]:
    return _change(queue, "resume", paused=False)


def set_limits(
    queue: Any,
    *,
    max_running: Any = None,
    group_max_running: Any = None,
    rate: Any = None,
    group_rate: Any = None,
) -> Call[QueueSettings]:
    """Replace the queue's limits (``None`` removes one)."""
    limits = {
        "max_running": _cap(max_running, "max_running"),
        "group_max_running": _cap(group_max_running, "group_max_running"),
        "rate": None if rate is None else Rate.parse(rate, "rate"),
        "group_rate": None if group_rate is None else Rate.parse(group_rate, "group_rate"),
    }
    return _change(queue, "set_limits", **limits)


def queue_settings(queue: Any = None) -> Call[dict[str, QueueSettings]]:
    """The settings of every queue that has some (or of ``queue``)."""
    name = None if queue is None else check.name(queue, "queue")

    def build(v: Values) -> Plan[dict[str, QueueSettings]]:
        rows = yield db.QueueSettings(queue=name)
        return {r["queue"]: settings_from_row(v, r) for r in rows}

    return Call("queue_settings", {"queue": name}, build, write=False)


def _change(queue: Any, op: str, **changes: Any) -> Call[QueueSettings]:
    name = check.name(queue, "queue")

    def build(v: Values) -> Plan[QueueSettings]:
        rows = yield db.QueueSettings(queue=name, lock=1)
        current = settings_from_row(v, rows[0]) if rows else QueueSettings(name)
        fields = {
            "paused": current.paused,
            "max_running": current.max_running,
            "group_max_running": current.group_max_running,
            "rate": current.rate,
            "group_rate": current.group_rate,
            **changes,
        }
        wanted = QueueSettings(name, **fields)
        rate, group_rate = wanted.rate, wanted.group_rate
        saved = yield db.SaveQueueSettings(
            queue=name,
            paused=wanted.paused,
            max_running=wanted.max_running,
            group_max_running=wanted.group_max_running,
            rate_limit=None if rate is None else rate.limit,
            rate_period=None if rate is None else rate.per,
            group_rate_limit=None if group_rate is None else group_rate.limit,
            group_rate_period=None if group_rate is None else group_rate.per,
            controlled=wanted.controlled,
        )
        return settings_from_row(v, saved[0])

    return Call(op, {"queue": name, **changes}, build)


def settings_from_row(v: Values, row: Row) -> QueueSettings:
    rate = row["rate_limit"]
    group_rate = row["group_rate_limit"]
    return QueueSettings(
        queue=row["queue"],
        paused=bool(row["paused"]),
        max_running=row["max_running"],
        group_max_running=row["group_max_running"],
        rate=None if rate is None else Rate(rate, row["rate_period"]),
        group_rate=None if group_rate is None else Rate(group_rate, row["group_rate_period"]),
        updated_at=v.decode_time(row["updated_at"]),
    )


def _cap(value: Any, what: str) -> int | None:
    return None if value is None else check.integer(value, what, low=1, high=1_000_000)


def claim_controlled(v: Values, settings: Row, params: dict[str, Any]) -> Plan[list[Row]]:
    """Claim from a controlled queue, within its limits. ``settings`` is the queue's
    row, read (and locked) in this transaction."""
    if settings["paused"]:
        return []
    queue = params["queue"]
    budget = params["limit"]
    if settings["max_running"] is not None:
        rows = yield db.CountRunning(queue=queue)
        budget = min(budget, settings["max_running"] - int(rows[0]["n"]))
    if settings["rate_limit"] is not None:
        rows = yield db.CountStarts(queue=queue, period=settings["rate_period"])
        budget = min(budget, settings["rate_limit"] - int(rows[0]["n"]))
    if budget <= 0:
        return []
    picked = yield from _pick(v, settings, queue, budget)
    if not picked:
        return []
    claimed: list[Row] = yield db.ClaimIds(
        ids=v.json_param(picked),
        lease_s=params["lease_s"],
        claim_id=params["claim_id"],
        worker=params["worker"],
    )
    periods = [p for p in (settings["rate_period"], settings["group_rate_period"]) if p]
    if periods and claimed:
        groups = [r["job_group"] or "" for r in claimed]
        yield db.RecordStarts(queue=queue, groups=v.json_param(groups))
        yield db.ForgetStarts(queue=queue, period=max(periods))
    return claimed


def _pick(v: Values, settings: Row, queue: str, budget: int) -> Plan[list[int]]:
    """Up to ``budget`` claimable jobs in claim order, skipping those whose group is at
    its cap or out of starts."""
    group_cap, group_rate = settings["group_max_running"], settings["group_rate_limit"]
    grouped = group_cap is not None or group_rate is not None
    picked: list[int] = []
    room: dict[str, int] = {}  # how many more of each group may start now
    cursor: Row | None = None
    scanned = 0
    page = min(_PAGE, max(_FIRST_PAGE, 2 * budget)) if grouped else budget
    while len(picked) < budget and scanned < MAX_SCAN:
        where: dict[str, Any] = {"queue": queue, "limit": page, "id": None, "priority": None}
        if cursor is not None:
            where.update(id=cursor["id"], priority=cursor["priority"])
        rows = yield db.ClaimCandidates(**where)
        if not rows:
            break
        scanned += len(rows)
        fresh = sorted({r["job_group"] for r in rows if r["job_group"] is not None} - set(room))
        if grouped and fresh:
            yield from _room_for(v, settings, queue, fresh, room)
        for row in rows:
            group = row["job_group"]
            if grouped and group is not None:
                if room[group] <= 0:
                    continue
                room[group] -= 1
            picked.append(row["id"])
            if len(picked) >= budget:
                break
        if not grouped or len(rows) < page:
            break
        cursor = rows[-1]
        page = min(_PAGE, 2 * page)
    return picked


def _room_for(
    v: Values, settings: Row, queue: str, groups: list[str], room: dict[str, int]
) -> Plan[None]:
    names = v.json_param(groups)
    for group in groups:
        room[group] = MAX_SCAN
    if settings["group_max_running"] is not None:
        cap = settings["group_max_running"]
        rows = yield db.CountRunning(queue=queue, groups=names)
        running = {r["job_group"]: int(r["n"]) for r in rows}
        for group in groups:
            room[group] = min(room[group], cap - running.get(group, 0))
    if settings["group_rate_limit"] is not None:
        limit, period = settings["group_rate_limit"], settings["group_rate_period"]
        params: dict[str, Any] = {"queue": queue, "groups": names, "period": period}
        rows = yield db.CountStarts(**params)
        started = {r["job_group"]: int(r["n"]) for r in rows}
        for group in groups:
            room[group] = min(room[group], limit - started.get(group, 0))
