"""The ``Idempotency-Key`` header of the routes that create jobs.

A request with the header is run by ``Queue.run_idempotent``: its jobs, the key's record
and the answer commit in one transaction. The same key with the same request (method,
path and canonical body) gets the stored answer again, with ``Idempotent-Replayed:
true``, and creates nothing; with another request, 422 ``idempotency_key_reused``.
Keys are kept apart per caller: the record holds a digest of the bearer token (and of
its role), never the token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import Header, Request, Response
from pydantic import BaseModel

from conveyor import tracing
from conveyor.ops import Call
from conveyor.ops.idempotency import MAX_KEY_LENGTH, Answer, IdempotentRequest, check_key, digest
from conveyor.tracing import SendKind
from conveyor.web.auth import ROLE_KEY
from conveyor.web.state import ServerState

T = TypeVar("T")

REPLAYED = "Idempotent-Replayed"

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description=(
            f"1 to {MAX_KEY_LENGTH} printable ASCII characters (else 422 "
            "`invalid_argument`). The first answer is kept (24 h by default); the same "
            "key with the same request replays it (header "
            "`Idempotent-Replayed: true`) and creates nothing; with another request, 422 "
            "`idempotency_key_reused`."
        ),
    ),
]


def caller_scope(request: Request) -> str:
    """A digest of who sent the request: its bearer token and the role it grants. Two
    tokens never share keys; the token itself is never stored."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    secret = token.strip() if scheme.lower() == "bearer" else ""
    role = request.scope.get(ROLE_KEY)
    return digest(
        b"conveyor idempotency scope",
        str(role or "").encode(),
        secret.encode("utf-8", "surrogateescape"),
    )


def request_hash(request: Request, body: BaseModel) -> str:
    """A digest of what the request asks: method, path and its body in canonical form
    (the parsed body, keys sorted), so that spacing or key order does not matter."""
    canonical = json.dumps(
        body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    path = request.scope.get("root_path", "") + request.scope["path"]
    return digest(
        request.method.encode(),
        path.encode("utf-8", "surrogateescape"),
        canonical.encode("utf-8", "surrogatepass"),
    )


def run(
    state: ServerState,
    request: Request,
    key: str,
    body: BaseModel,
    call: Callable[[], Call[T]],
    render: Callable[[T], Response],
    *,
    sent: tuple[SendKind, str, int, Callable[[T], list[int]]],
    created: Callable[[T], None] | None = None,
) -> Response:
    """The answer to a create request with an Idempotency-Key: ``call`` run once per
    key, its answer ``render`` of its result; or the answer stored by the first request
    with the key, replayed. ``sent``: the producer span's kind, queue and job count, and
    the new jobs' ids (as the queue's own enqueue reports them to ``conveyor.tracing``).
    ``render`` runs inside the transaction (it may run again if the database asks for
    the transaction again); ``created`` sees the result once it committed (not for a
    replay)."""
    wanted = IdempotentRequest(
        scope=caller_scope(request),
        key=check_key(key),
        request_hash=request_hash(request, body),
        keep_s=state.limits.idempotency_keep_seconds,
    )
    made: list[Response] = []

    def answer(result: T) -> Answer:
        response = render(result)
        made.append(response)
        return Answer(response.status_code, bytes(response.body).decode("utf-8"))

    kind, queue, count, ids = sent
    if tracing.hooks is None:
        outcome = state.queue.run_idempotent(call(), wanted, answer)
    else:  # the call reads the producer span's context: built inside it
        with tracing.hooks.sending(kind, queue, count) as span:
            outcome = state.queue.run_idempotent(call(), wanted, answer)
            if outcome.result is not None:
                span.sent(ids(outcome.result))
    if outcome.replayed:
        return Response(
            outcome.answer.body.encode("utf-8"),
            status_code=outcome.answer.status,
            media_type="application/json",
            headers={REPLAYED: "true"},
        )
    if created is not None and outcome.result is not None:
        created(outcome.result)
    return made[-1]
