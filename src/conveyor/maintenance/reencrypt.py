"""Sealing stored payloads and results again with the first encryption key, after a new
key was put first (``conveyor reencrypt``): once every value is sealed with it, the old
keys can be dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conveyor import crypto
from conveyor.drivers import operations as db
from conveyor.errors import InvalidArgument
from conveyor.ops import Call, Plan, Values
from conveyor.queue import Queue


@dataclass(frozen=True, slots=True)
class Reencrypted:
    """What a pass did: ``values`` sealed again (payloads and results) in ``jobs``
    jobs; ``unopened``: sealed values that none of the keys opens (left as they are)."""

    jobs: int = 0
    values: int = 0
    unopened: int = 0


def _page(keys: crypto.Keyring, after: int, limit: int) -> Call[tuple[int | None, Reencrypted]]:
    def build(v: Values) -> Plan[tuple[int | None, Reencrypted]]:
        rows = yield db.SealedJobs(after=after, marker=crypto.MARKER, limit=limit)
        jobs = values = unopened = 0
        for row in rows:
            touched = False
            for column, which in (("payload", None), ("result", 1)):
                raw = row[column]
                value = v.decode_json(raw) if raw is not None else None
                if not crypto.sealed(value):
                    continue
                again = keys.rotate(value)
                if again is value:
                    unopened += 1
                    continue
                old: Any = raw if isinstance(raw, str) else v.json_param(raw)
                new = v.json_param(again)
                changed = yield db.Reseal(id=row["id"], old=old, new=new, result=which)
                values += changed
                touched = touched or bool(changed)
            jobs += touched
        last = rows[-1]["id"] if rows else None
        return last, Reencrypted(jobs, values, unopened)

    return Call("reencrypt", {"after": after, "limit": limit}, build)


def reencrypt(q: Queue, keys: crypto.Keyring | None = None, *, batch: int = 500) -> Reencrypted:
    """Seal every encrypted payload and result of ``q`` again with the first of ``keys``
    (default: the keys this process holds, else ``$CONVEYOR_ENCRYPTION_KEYS``), one
    transaction per ``batch`` jobs. A value changed meanwhile is left for the next pass."""
    if not isinstance(q, Queue):
        raise InvalidArgument("reencrypt: needs a database queue (not a remote one)")
    if type(batch) is not int or not 1 <= batch <= 10_000:
        raise InvalidArgument(f"batch: expected 1 to 10000, got {batch!r}")
    keyring = keys or crypto.required()
    total = Reencrypted()
    after = 0
    while True:
        last, done = q._run(_page(keyring, after, batch))
        total = Reencrypted(
            total.jobs + done.jobs, total.values + done.values, total.unopened + done.unopened
        )
        if last is None:
            return total
        after = last


__all__ = ["Reencrypted", "reencrypt"]
