"""Idempotent create requests: a call that creates jobs, run so that the same request
sent again (same key, same method, path and body) creates nothing and gets the first
answer back.

The record of the key is inserted first, in the transaction that creates the jobs, and
the answer is stored in it before that transaction commits: either the jobs and their
answer are both written, or neither is. A second request with the key, while the first
is still open, waits on the record's row (its insert meets the first one's) and then
reads the committed answer; if the first rolled back, the second creates the jobs. A
record past its retention is deleted by the request that finds it, which then takes
the key (nothing is deleted before an insert is tried: on MySQL, two requests deleting
a row that is not there would lock the same gap and deadlock on their inserts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from conveyor.drivers import operations as db
from conveyor.errors import IdempotencyKeyReused, InvalidArgument, RequestInProgress
from conveyor.ops import Announce, Call, Once, Plan, Values, settled

T = TypeVar("T")

MAX_KEY_LENGTH = 255
DEFAULT_KEEP_SECONDS = 24 * 3600.0
MAX_KEEP_SECONDS = 30 * 86400.0
# Expired records deleted per statement by the maintenance pass.
PRUNE_BATCH = 500
MAX_PRUNE_BATCH = 10_000


def check_key(key: str) -> str:
    """An Idempotency-Key: 1 to 255 printable ASCII characters (space to ``~``)."""
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not all(" " <= c <= "~" for c in key):
        raise InvalidArgument(
            f"Idempotency-Key: expected 1 to {MAX_KEY_LENGTH} printable ASCII characters"
        )
    return key


def check_keep(keep_s: float) -> float:
    """How long answers are kept: more than 0 seconds, at most ``MAX_KEEP_SECONDS``."""
    if not 0 < keep_s <= MAX_KEEP_SECONDS:
        raise InvalidArgument(
            f"idempotency retention: expected seconds in (0, {MAX_KEEP_SECONDS:g}], got {keep_s}"
        )
    return float(keep_s)


def digest(*parts: bytes) -> str:
    """A SHA-256 (hex) of ``parts``, each length-prefixed so that no two lists of parts
    give the same input."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class IdempotentRequest:
    """A request with an Idempotency-Key. ``scope``: a digest of who sent it (keys of
    different callers never meet); ``request_hash``: a digest of what it asks (method,
    path, canonical body); ``keep_s``: how long its answer is kept."""

    scope: str
    key: str
    request_hash: str
    keep_s: float = DEFAULT_KEEP_SECONDS

    def __post_init__(self) -> None:
        check_key(self.key)
        check_keep(self.keep_s)


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer as it is stored: its status and its body (JSON text)."""

    status: int
    body: str


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What an idempotent call gives: the answer; ``replayed``: the answer stored by
    an earlier request (nothing was created now, and ``result`` is None)."""

    answer: Answer
    replayed: bool
    result: T | None = None


def idempotent(
    call: Call[T], request: IdempotentRequest, render: Callable[[T], Answer]
) -> Call[Outcome[T]]:
    """``call`` run under ``request``'s key: the first time, in one transaction with the
    key's record and its answer (``render`` of the result); then the stored answer."""
    if call.conn is not None:
        raise InvalidArgument("an idempotent call runs in a transaction of its own")

    def build(v: Values) -> Plan[Outcome[T]]:
        return _plan(v, call, request, render)

    return Call(call.op, call.args, build, write=True)


def _plan(
    v: Values, call: Call[T], request: IdempotentRequest, render: Callable[[T], Answer]
) -> Plan[Outcome[T]]:
    scope, key = request.scope, request.key
    claim = db.ClaimIdempotencyKey(
        scope=scope, idem_key=key, request_hash=request.request_hash, keep_s=request.keep_s
    )
    claimed = yield claim
    if not claimed:
        rows = yield db.IdempotencyRecord(scope=scope, idem_key=key)
        if rows and rows[0]["expired"]:  # kept long enough: the key is free again
            yield db.ForgetIdempotencyKeys(limit=1, scope=scope, idem_key=key)
            claimed = yield claim
            if not claimed:
                rows = yield db.IdempotencyRecord(scope=scope, idem_key=key)
    if not claimed:
        if not rows:  # deleted between the two statements: its retention just ended
            raise RequestInProgress("the Idempotency-Key's record just expired; send it again")
        row = rows[0]
        if row["request_hash"] != request.request_hash:
            raise IdempotencyKeyReused(
                "Idempotency-Key: already used with another request (method, path or body); "
                "nothing was written"
            )
        if row["answer_status"] is None:
            raise RequestInProgress(
                "a request with this Idempotency-Key has not answered yet; try again shortly"
            )
        return Outcome(Answer(int(row["answer_status"]), str(row["body"])), replayed=True)
    result = yield from _inner(v, call)
    answer = render(result)
    yield db.SaveIdempotentAnswer(
        scope=scope, idem_key=key, answer_status=answer.status, body=answer.body
    )
    return Outcome(answer, replayed=False, result=result)


def _inner(v: Values, call: Call[T]) -> Plan[T]:
    """The call's own work as steps of this transaction (a single statement that would
    commit on its own is run here instead)."""
    work = call.build(v)
    if not isinstance(work, Once):
        result: T = settled((yield from work))
        return result
    rows: Any = yield work.op
    if rows or work.if_empty is None:
        if rows:
            yield Announce(queues=work.queues, finished=work.finished)
        return work.then(rows)
    again: T = settled((yield from work.if_empty()))
    return again


__all__ = [
    "DEFAULT_KEEP_SECONDS",
    "MAX_KEEP_SECONDS",
    "MAX_KEY_LENGTH",
    "Answer",
    "IdempotentRequest",
    "Outcome",
    "check_key",
    "digest",
    "idempotent",
]
