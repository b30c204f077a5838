"""Pieces the route modules share: documented error responses and parameters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from starlette.convertors import StringConvertor, register_url_convertor

from conveyor.validation import MAX_KEY_LENGTH, MAX_NAME_LENGTH
from conveyor.web.models import _NO_CONTROL, JOB_ID_MAX, ErrorOut

_DESCRIPTIONS = {
    400: "Malformed request (the body is not JSON)",
    401: "No valid bearer token",
    403: "The token's role does not allow this route",
    404: "No such job, or no such route",
    409: "Stale claim, invalid transition, or an active job already has the key",
    413: "Request body too large",
    415: "Request body is not JSON",
    422: "Invalid argument",
    503: "The database is unavailable",
}
_EVERY_ROUTE = (400, 401, 403, 404, 413, 415, 422, 503)


def errors(*extra: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer with."""
    codes = sorted({*_EVERY_ROUTE, *extra})
    return {code: {"model": ErrorOut, "description": _DESCRIPTIONS[code]} for code in codes}


JobIdPath = Annotated[int, Path(ge=1, le=JOB_ID_MAX, description="the job's id")]
QueuePath = Annotated[
    str, Path(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL, description="queue")
]
ClaimIdPath = Annotated[str, Path(min_length=1, max_length=200, pattern=_NO_CONTROL)]
NamePath = Annotated[
    str, Path(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL, description="name")
]
QUEUE = Query(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL)
KEY = Query(min_length=1, max_length=MAX_KEY_LENGTH, pattern=_NO_CONTROL)
QueueQuery = Annotated[str | None, QUEUE]
TaskQuery = Annotated[
    str | None, Query(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL)
]
QUEUES = Query(
    min_length=1,
    max_length=20_000,
    pattern=_NO_CONTROL,
    description="queue names, comma-separated (default: every queue)",
)
QueuesQuery = Annotated[str | None, QUEUES]


def queue_list(value: str | None) -> list[str] | None:
    return None if value is None else [name for name in value.split(",") if name]


KeyQuery = Annotated[str | None, KEY]


class _ClaimIdConvertor(StringConvertor):
    """A claim id in a path: any segment but ``reset``, which names another resource
    (``POST /api/claims/reset``): ``DELETE /api/claims/reset`` must answer 405, not
    release a claim called "reset". Job ids use the ``int`` convertor for the same
    reason (``/api/jobs/batch``, ``/api/jobs/latest``)."""

    regex = r"(?!reset$)[^/]+"


register_url_convertor("claim_id", _ClaimIdConvertor())
